#!/bin/bash
# UC and UD under SOFTHCA_FAULTS between two namespaces ("hosts",
# tests/netns/lib.sh): traffic_test_lossy (tests/traffic/test_lossy.c)
# runs its sender in a and its receiver in b, on softhca_veth0 (path MTU
# 1024: 5000 B and 64 KiB messages are several packets), once without
# faults and once per fault kind:
#
#   none      every message arrives, once, intact (the control run)
#   drop, dup, reorder, delay, reset, all (every kind at once)
#             what arrives is intact; UC never delivers a message twice
#             or out of order; UD may deliver a duplicated datagram twice,
#             intact; some messages still arrive; the sender counted
#             faults_injected (softhca stat)
#
# UC: SEND, SEND_WITH_IMM, RDMA WRITE, WRITE_WITH_IMM of 1, 1000, 5000 and
# 65536 B; UD: SEND, SEND_WITH_IMM of 1, 1000 B and the MTU.  Each case
# of each run is one check; besides, each run ended by itself, each side
# was in its own namespace, and a fault run delivered something.  The
# result lines (delivered, duplicates, partial WRITEs, the receiver QP's
# counters) are printed.
#
# Root only (skips otherwise).  Bounded: each run NETNS_EXEC_TIMEOUT, each
# case TEST_TIMEOUT; the namespaces go at exit (lib.sh).
#
# Usage: test_net_lossy.sh [RUN...] (none drop dup reorder delay reset
# all; default: every run).  Environment: SOFTHCA_BUILD (default: the
# source tree's build/), SOFTHCA_LOSSY_SEED (the faults' seed; default:
# fixed per run).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
BIN=$SOFTHCA_BUILD/tests/traffic_test_lossy
[ -x "$BIN" ] || { echo "FAIL: no $BIN (build first)" >&2; exit 1; }
[ -e "$SOFTHCA_BUILD/lib/libibverbs.so.1" ] || { echo "FAIL: no libibverbs.so.1 in $SOFTHCA_BUILD/lib" >&2; exit 1; }
export LD_LIBRARY_PATH=$SOFTHCA_BUILD/lib
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS SOFTHCA_FAULTS SOFTHCA_PCAP SHCA_TEST_NETNS_DEV
export NETNS_WATCHDOG=${NETNS_WATCHDOG:-380}

declare -A FAULTS=(
	[none]=""
	[drop]="drop=0.02"
	[dup]="dup=0.05"
	[reorder]="reorder=0.05"
	[delay]="delay=0.05,delay_ms=3"
	[reset]="reset=0.01"
	[all]="drop=0.01,dup=0.01,reorder=0.01,delay=0.01,delay_ms=3,reset=0.002"
)
declare -A SEED=([none]=1 [drop]=2 [dup]=3 [reorder]=4 [delay]=5 [reset]=6 [all]=7)
ALL_RUNS=(none drop dup reorder delay reset all)
RUNS=("$@")
[ "${#RUNS[@]}" -gt 0 ] || RUNS=("${ALL_RUNS[@]}")
for r in "${RUNS[@]}"; do
	[ -n "${SEED[$r]:-}" ] || { echo "usage: $0 [${ALL_RUNS[*]}]" >&2; exit 2; }
done
CASES=22	# result lines a whole run prints (4 x 4 UC, 2 x 3 UD)

netns_setup 2 || { fail "netns_setup 2"; finish; }
ok "namespaces ${NETNS_HOSTS[*]} (a: $(netns_ip4 a), b: $(netns_ip4 b))"
NS_A=$(netns_name a) NS_B=$(netns_name b)

# show FILE: the last lines of a run's output, indented, on stderr
show() { tail -25 "$1" | sed 's/^/    /' >&2; }

# run NAME: traffic_test_lossy with the run's faults, sender in a
run() {
	local name=$1 out=$NETNS_T/$1.out blk=$NETNS_T/$1.case rc f t0=$SECONDS
	local n_ok n_fail got sent faults nuc nres deliv dups

	f=${FAULTS[$name]}
	[ -z "$f" ] || f="$f,seed=${SOFTHCA_LOSSY_SEED:-${SEED[$name]}}"
	echo "--- $name: SOFTHCA_FAULTS=${f:-(none)}"
	NETNS_EXEC_TIMEOUT=50 netns_exec a env \
		SHCA_TEST_NETNS_A="$NS_A" SHCA_TEST_NETNS_B="$NS_B" \
		SOFTHCA_FAULTS="$f" TEST_TIMEOUT=40 \
		"$BIN" </dev/null >"$out" 2>&1
	rc=$?
	# every case a check; a failure shows what its two sides said
	: >"$blk"
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "$name: ${line#ok * - }"; : >"$blk" ;;
		"not ok "*)
			fail "$name: ${line#not ok * - }"
			grep -E '^ *FAIL ' "$blk" | sed 's/^/    /' >&2
			: >"$blk"
			;;
		*) printf '%s\n' "$line" >>"$blk" ;;
		esac
	done <"$out"
	n_ok=$(grep -c '^ok ' "$out")
	n_fail=$(grep -c '^not ok ' "$out")
	case $rc in
	124|137) fail "$name: traffic_test_lossy did not finish within 50 s"; show "$out" ;;
	0|1) check "$name: ran to its end ($n_ok passed, $n_fail failed, $((SECONDS - t0)) s)" \
		grep -q '^# .* passed, ' "$out" ;;
	*) fail "$name: traffic_test_lossy ended with exit $rc"; show "$out" ;;
	esac
	check "$name: sender in a, receiver in b, each on softhca_$NETNS_IF with MTU 1024" \
		eval "grep -Eq '^  namespace A .*softhca_$NETNS_IF, GID.* ::ffff:$(netns_ip4 a), MTU 1024$' '$out' &&
		      grep -Eq '^  namespace B .*softhca_$NETNS_IF, GID.* ::ffff:$(netns_ip4 b), MTU 1024$' '$out'"
	# what arrived, summed over the run's cases
	got=$(sed -nE 's/^  result .* x([0-9]+): delivered ([0-9]+), duplicates ([0-9]+).*/\1 \2 \3/p' "$out" |
		awk '{ n++; s += $1; d += $2; u += $3 } END { printf "%d %d %d %d", n, s, d, u }')
	read -r nres sent deliv dups <<<"$got"
	# UD datagrams take drop and dup only: the UC senders say it
	nuc=$(grep -c '^  sender uc ' "$out")
	faults=$(sed -nE 's/^  sender .*faults_injected ([0-9]+).*/\1/p' "$out" | awk '{ s += $1 } END { print s + 0 }')
	echo "    $name: $deliv of $sent messages delivered in $nres cases, $dups UD duplicates, faults_injected $faults"
	sed -n 's/^  result /    /p' "$out"
	if [ "$n_fail" -eq 0 ] && [ "$rc" = 0 ]; then
		check "$name: a result line for each of the $CASES cases ($nres)" [ "$nres" -eq "$CASES" ]
	fi
	if [ -z "$f" ]; then
		check "$name: every message delivered without faults ($deliv of $sent)" [ "$deliv" -eq "$sent" ]
	else
		check "$name: some messages still delivered ($deliv of $sent)" [ "$deliv" -gt 0 ]
		if [ "$nuc" -gt 0 ]; then
			check "$name: the senders injected faults ($faults)" [ "$faults" -gt 0 ]
		else
			echo "    $name: no UC sender finished: faults_injected not checked"
		fi
	fi
}

for r in "${RUNS[@]}"; do
	run "$r"
	# a clean slate for the next run
	_netns_kill_in "$NETNS_RUN"
done

finish
