#!/bin/bash
# The C traffic tests between two network namespaces ("hosts",
# tests/netns/lib.sh): traffic_test_matrix and traffic_test_errors run with
# SHCA_TEST_NETNS_A/B naming the namespaces a and b (tests/traffic/ep.h).
# Every two-process case runs its requester in a and its responder (the
# forked side) in b, each on its own softhca_veth0 and the GID of its veth
# IPv4 address, so the traffic takes softhca's net path (TCP for RC/UC,
# UDP for UD).  The one-process cases skip, and say so.
#
# Each case is one check: "ok" when it passed, "FAIL" with its output when
# it did not.  Besides: each binary ran to its end, each side said it was
# in its own namespace on its own address (ep.c prints it), and a's veth0
# carried the traffic (no shortcut between the namespaces).  Each binary
# is bounded (NETNS_EXEC_TIMEOUT) and so is each case (the harness's
# TEST_TIMEOUT); the namespaces, and whatever runs in them, are gone at
# exit (lib.sh).
#
# A case that skips for any reason but "one process:" (a one-process case
# has nothing to run between hosts) fails: a two-process case that starts
# skipping across namespaces is a regression, not a pass.  A FAIL line
# that shows up after a case reported "ok" (the forked side of that case,
# which ended after it) fails that case too.
#
# Runs: matrix and errors on the GIDs of the IPv4 addresses, matrix6
# (the matrix again) on those of the IPv6 addresses (SHCA_TEST_NETNS_GID),
# rcfaults (the RC matrix under drop/dup/reorder/delay faults), rcreset
# (the RC matrix while its TCP connection is broken now and then: RC
# opens it again and resumes by PSN, every byte checked; a's kernel must
# have opened more connections than the run needs without resets), stat
# (`softhca stat` and the counters across hosts: each side sees only
# itself, traffic counted exactly), exitflush (what a requester queued
# reaches the other host although it exits right after posting), xrc
# (XRC between the hosts: the XRCETH on the wire, the SRQ looked up and
# checked by the receiving process, traffic_test_xrc_traffic), tm (tag
# matching between the hosts, rendezvous included: the receiving QP's own
# READ of the sender's data and its FIN cross the veth pair; the net
# cases of traffic_test_tm), ackmerge (coalesced ACKs between the hosts:
# bursts of SENDs wait in the stopped receiver's socket, read at once and
# answered with fewer ACKs than SENDs, every completion in order; also
# under drop/dup, which the test sets itself; traffic_test_ackmerge),
# netdefer (small requests held for the other host's answer and written
# with it, no ACK timeout; a ping-pong never held; traffic_test_netdefer).
#
# Usage: test_traffic_netns.sh [matrix|errors|matrix6|rcfaults|rcreset|
# stat|exitflush|xrc|tm|ackmerge|netdefer [CASE...]] (default: every run,
# every case).
# Environment: SOFTHCA_BUILD (default: the source tree's build/), with the
# test binaries in $SOFTHCA_BUILD/tests.
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
TESTS=$SOFTHCA_BUILD/tests
LIB=$SOFTHCA_BUILD/lib
# softhca's library, not the system's (the binaries' RUNPATH would fall
# back to it when the build's is missing)
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS SHCA_TEST_NETNS_DEV

# each run: its binary, its GIDs, the bound of the run (s) and of each of
# its cases (TEST_TIMEOUT), what a's veth0 carries at least in a run of
# every case (the matrix moves ~30 MB, the errors ~35 KB)
declare -A BIN=([matrix]=matrix [errors]=errors [matrix6]=matrix
		[rcfaults]=matrix [rcreset]=matrix [stat]=stat
		[exitflush]=exitflush [xrc]=xrc_traffic [tm]=tm
		[ackmerge]=ackmerge [netdefer]=netdefer)
declare -A GID=([matrix]=ipv4 [errors]=ipv4 [matrix6]=ipv6 [rcfaults]=ipv4
		[rcreset]=ipv4 [stat]=ipv4 [exitflush]=ipv4 [xrc]=ipv4
		[tm]=ipv4 [ackmerge]=ipv4 [netdefer]=ipv4)
# The runs' bounds add up to 1,060 s, under the watchdog (1,150 s) and
# ctest's TIMEOUT (1,200 s, tests/CMakeLists.txt): keep them so when a
# run is added.  A whole run takes ~20 s, a case a few seconds.
declare -A SECS=([matrix]=120 [errors]=200 [matrix6]=120 [rcfaults]=150
		 [rcreset]=150 [stat]=60 [exitflush]=60 [xrc]=60 [tm]=60
		 [ackmerge]=40 [netdefer]=40)
declare -A CASE_SECS=([matrix]=90 [errors]=25 [matrix6]=90 [rcfaults]=150
		      [rcreset]=150 [stat]=40 [exitflush]=40 [xrc]=60 [tm]=40
		      [ackmerge]=25 [netdefer]=25)
declare -A MIN_BYTES=([matrix]=$((8 << 20)) [errors]=$((8 << 10))
		      [matrix6]=$((8 << 20)) [rcfaults]=$((8 << 20))
		      [rcreset]=$((8 << 20)) [stat]=$((4 << 20))
		      [exitflush]=$((4 << 20)) [xrc]=$((8 << 10))
		      [tm]=$((16 << 10)) [ackmerge]=$((16 << 10))
		      [netdefer]=$((16 << 10)))
# rcfaults: the RC matrix (every opcode, size to 1 MiB, SGEs, inline, all
# checked) with faults in both processes: RC must hide them all (go-back-N,
# READs asked again from a lost response, duplicates answered again).
# rcreset: the same with connection resets only, after a packet with
# probability P, in both processes: ~20,000 packets, so some 40 resets a
# run (RESETS_MIN at least); a 1 MiB message (1024 packets) is cut about
# twice, and goes on each time from the PSN the responder expects
declare -A FAULTS_OF=([rcfaults]=drop=0.02,dup=0.02,reorder=0.02,delay=0.01,delay_ms=2,seed=5
		      [rcreset]=reset=0.002,seed=11)
declare -A CASES_OF=([rcfaults]=rc_two_process [rcreset]=rc_two_process
		     [tm]="eager_matched_net unexpected_net tag_del_net
			   no_tag_net plain_net too_long_net rndv_net
			   rndv_bad_rkey_net rndv_bound_net rndv_flush_net
			   rndv_exact_net")
RESETS_MIN=10
# the watchdog outlives the runs (ctest's TIMEOUT for this test: 1200)
export NETNS_WATCHDOG=${NETNS_WATCHDOG:-1150}

case ${1:-} in
"") RUNS=(matrix errors matrix6 rcfaults rcreset stat exitflush xrc tm
	  ackmerge netdefer) ;;
matrix|errors|matrix6|rcfaults|rcreset|stat|exitflush|xrc|tm|ackmerge|netdefer)
	RUNS=("$1"); shift ;;
*) echo "usage: $0 [matrix|errors|matrix6|rcfaults|rcreset|stat|exitflush|xrc|tm" \
	"|ackmerge|netdefer [CASE...]]" >&2; exit 2 ;;
esac
CASES=("$@")
for r in "${RUNS[@]}"; do
	[ -x "$TESTS/traffic_test_${BIN[$r]}" ] ||
		{ echo "FAIL: no $TESTS/traffic_test_${BIN[$r]} (build first)" >&2; exit 1; }
done

netns_setup 2 || { fail "netns_setup 2"; finish; }
ok "namespaces ${NETNS_HOSTS[*]} (a: $(netns_ip4 a), b: $(netns_ip4 b))"
NS_A=$(netns_name a) NS_B=$(netns_name b)

# veth_bytes HOST: bytes sent and received on HOST's veth0 so far
veth_bytes() {
	netns_exec "$1" cat "/sys/class/net/$NETNS_IF/statistics/tx_bytes" \
		"/sys/class/net/$NETNS_IF/statistics/rx_bytes" 2>/dev/null |
		awk '{ s += $1 } END { print s + 0 }'
}

# tcp_opens HOST: TCP connections HOST's kernel opened so far, actively
# or passively (its own /proc/net/snmp: one count per connection between
# a and b, whichever side opened it)
tcp_opens() {
	netns_exec "$1" cat /proc/net/snmp 2>/dev/null | awk '
		$1 == "Tcp:" && !h { for (i = 2; i <= NF; i++) f[$i] = i; h = 1; next }
		$1 == "Tcp:" && h { print $f["ActiveOpens"] + $f["PassiveOpens"]; exit }'
}

# show FILE: a case's output, indented, on stderr
show() { head -25 "$1" | sed 's/^/    /' >&2; }

# gid_of HOST GIDTYPE: HOST's veth address, as ep.c prints its GID
gid_of() {
	if [ "$2" = ipv6 ]; then netns_ip6 "$1"; else echo "::ffff:$(netns_ip4 "$1")"; fi
}

# late_fail RUN WHERE BLOCK: a FAIL line in BLOCK, the output between two
# case reports, when the case reported was no failure: it comes from a
# forked side (of that case, or of the one before it, which ended after
# its parent reported "ok").  A failure all the same.  1 when there was.
late_fail() {
	grep -q '^ *FAIL ' "$3" || return 0
	fail "$1: a forked side failed ($2):"
	grep '^ *FAIL ' "$3" | sed 's/^/    /' >&2
	return 1
}

# run NAME: the run NAME (traffic_test_${BIN[NAME]}) in a with the
# variables set, bounded; each case a check
run() {
	local name=$1 out=$NETNS_T/$1.out blk=$NETNS_T/$1.case rc line
	local n_ok=0 n_fail=0 n_skip=0 n_late=0 last="" oneproc=() reason=""
	local t0=$SECONDS
	local bytes0 bytes min opens0 opens
	local secs=${SECS[$1]} bin=traffic_test_${BIN[$1]} gid=${GID[$1]}
	local faults=${FAULTS_OF[$1]:-} cases=("${CASES[@]}")

	[ "${#cases[@]}" -gt 0 ] || [ -z "${CASES_OF[$1]:-}" ] ||
		read -ra cases <<<"${CASES_OF[$1]//$'\n'/ }"
	# (exitflush: the requester that exits is the forked side, in b)
	echo "--- $name: $bin, parent in $NS_A, forked side in $NS_B, $gid GIDs" \
		"(bounded: ${secs} s, ${CASE_SECS[$name]} s a case)" \
		"${faults:+, SOFTHCA_FAULTS=$faults}"
	bytes0=$(veth_bytes a)
	opens0=$(tcp_opens a)
	NETNS_EXEC_TIMEOUT=$secs netns_exec a env \
		SHCA_TEST_NETNS_A="$NS_A" SHCA_TEST_NETNS_B="$NS_B" \
		SHCA_TEST_NETNS_GID="$gid" TEST_TIMEOUT="${CASE_SECS[$name]}" \
		${faults:+SOFTHCA_FAULTS=$faults} \
		"$TESTS/$bin" "${cases[@]}" </dev/null >"$out" 2>&1
	rc=$?
	: >"$blk"
	while IFS= read -r line; do
		case $line in
		"ok "*" # SKIP")
			line=${line#ok * - }
			last=${line% # SKIP}
			reason=$(sed -n 's/^ *skip reason: //p' "$blk" | tail -1)
			late_fail "$name" "around '$last', which skipped" \
				"$blk" || n_late=$((n_late + 1))
			if [[ $reason == "one process:"* ]]; then
				oneproc+=("$last")
				n_skip=$((n_skip + 1))
			else
				# a two-process case has no reason to skip here
				fail "$name $last skipped: ${reason:-no reason given}"
				show "$blk"
				n_fail=$((n_fail + 1))
			fi
			: >"$blk"
			;;
		"ok "*)
			late_fail "$name" "'${line#ok * - }', or the case before it, '${last:-none}'" \
				"$blk" || n_late=$((n_late + 1))
			last=${line#ok * - }
			ok "$name $last"
			n_ok=$((n_ok + 1))
			: >"$blk"
			;;
		"not ok "*)
			line=${line#not ok * - }
			last=${line%% # *}
			fail "$name $last (${line#"$last" # })"
			show "$blk"
			n_fail=$((n_fail + 1))
			: >"$blk"
			;;
		"# "*" passed, "*)
			;;
		*)
			printf '%s\n' "$line" >>"$blk"
			;;
		esac
	done <"$out"
	# after the last case: its forked side's late output (the output of a
	# binary that did not finish is shown below)
	if [ "$rc" = 0 ] || [ "$rc" = 1 ] || [ "$rc" = 77 ]; then
		late_fail "$name" "after the last case, '${last:-none}'" \
			"$blk" || n_late=$((n_late + 1))
	fi
	[ "${#oneproc[@]}" -eq 0 ] ||
		echo "skip: $name: ${#oneproc[@]} one-process cases: ${oneproc[*]}"
	# the run itself: it ended by itself, within its bound
	case $rc in
	124|137)
		fail "$name: $bin did not finish within $secs s" \
			"(the last case that ended: '${last:-none}'); its output since:"
		show "$blk"
		;;
	0|1|77)	# 77: cases skipped (one-process ones, here)
		check "$name: $bin ran to its end (exit $rc, $((SECONDS - t0)) s)" \
			grep -q '^# .* passed, ' "$out"
		;;
	*)
		fail "$name: $bin ended with exit $rc; its last output:"
		tail -20 "$out" | sed 's/^/    /' >&2
		;;
	esac
	# something did cross: at least one two-process case, each side in
	# its own namespace on its own address
	check "$name: two-process cases ran: $n_ok passed, $n_fail failed" \
		[ $((n_ok + n_fail)) -gt 0 ]
	if [ "$n_ok" -gt 0 ] || [ "$n_fail" -gt 0 ]; then
		check "$name: requesters in a, on softhca_$NETNS_IF and $(gid_of a "$gid")" \
			grep -Eq "^  namespace A .*softhca_$NETNS_IF, GID\[[0-9]+\] $(gid_of a "$gid")," "$out"
		check "$name: responders in b, on softhca_$NETNS_IF and $(gid_of b "$gid")" \
			grep -Eq "^  namespace B .*softhca_$NETNS_IF, GID\[[0-9]+\] $(gid_of b "$gid")," "$out"
	fi
	# and it went over the wire: a's veth0 carried the traffic (the
	# matrix moves tens of megabytes), no shortcut between the namespaces
	if [ "$n_ok" -gt 0 ]; then
		bytes=$(( $(veth_bytes a) - bytes0 ))
		min=0
		[ "${#CASES[@]}" -gt 0 ] || min=${MIN_BYTES[$name]}
		check "$name: a's $NETNS_IF carried the traffic: $bytes bytes (> $min)" \
			[ "$bytes" -gt "$min" ]
	fi
	# resets: a's kernel opened connections again (its own counters,
	# not softhca's): the one a two-process case needs, and RESETS_MIN
	if [[ $faults == *reset=* ]] && [ "$n_ok" -gt 0 ]; then
		opens=$(( $(tcp_opens a) - opens0 ))
		check "$name: the connection was reset and opened again: a's kernel opened $opens TCP connections for $((n_ok + n_fail)) case(s) (> $RESETS_MIN + cases)" \
			[ "$opens" -gt $((n_ok + n_fail + RESETS_MIN)) ]
	fi
	# what the run left in the namespaces (a case that failed may leave
	# its other side behind; teardown ends it)
	local left
	left=$( (ip netns pids "$NS_A"; ip netns pids "$NS_B") 2>/dev/null | tr '\n' ' ')
	[ -z "$left" ] || echo "note: $name: processes left in the namespaces: $left"
	echo "--- $name: $n_ok passed, $n_fail failed, $n_skip skipped" \
		"(one process), $n_late failures of a forked side after its case"
}

for r in "${RUNS[@]}"; do
	run "$r"
	# a clean slate for the next run
	_netns_kill_in "$NETNS_RUN"
done

finish
