#!/bin/bash
# The completion-thread pattern of the classic rdma_cm samples, 500 runs
# (issue 11): tests/security/cq_thread.c, a server and a client whose
# completion threads loop on ibv_get_cq_event / ibv_ack_cq_events /
# ibv_req_notify_cq / ibv_poll_cq while their main threads handle rdma_cm
# events, disconnect and tear down.
#
# Variants: send/recv ping-pong (send), RDMA WRITE + READ rounds on an
# advertised buffer (rdma), and WRITE, READ and DONE posted in one call
# (pipe); the completion thread stopped by
# pthread_cancel (cancel), by a flag and an eventfd (flag), or never
# (none: the QP, MRs and id destroyed under it, the process exits with it
# asleep); the client or the server disconnecting.  Each of those 18
# combinations over the same-host path (shm) and over the net path on
# loopback (SOFTHCA_NET=1), 14 runs each: 504 runs on one host.  As root,
# also 3 runs of each combination between two network namespaces (netns,
# tests/netns/lib.sh), skipped with a message otherwise.
#
# Every run is bounded by `timeout`: a hang counts as a failure, as does
# a crash (a signal) or any unexpected completion status (cq_thread exits
# 1).  The counts per variant are printed; any failure fails the test.
# Listener ports: 31500-31599.
set -u

SOFTHCA_SRC=${SOFTHCA_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}
SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) ||
	{ echo "FAIL: no build directory" >&2; exit 1; }
BIN=$SOFTHCA_BUILD/tests/cq_thread
[ -x "$BIN" ] || { echo "FAIL: no $BIN (build the tree first)" >&2; exit 1; }
export LD_LIBRARY_PATH=$SOFTHCA_BUILD/lib
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS SOFTHCA_NET

RUNS=${CQ_THREAD_RUNS:-14}	# per combination and path, one host
NS_RUNS=${CQ_THREAD_NS_RUNS:-3}	# per combination, two namespaces
RUN_SECS=30			# a run that lasts longer is a hang
SIZES=(4096 65536 1048576)	# rdma, pipe: buffer sizes, in turn

OUT=$(mktemp -d "${TMPDIR:-/tmp}/softhca-cqthread.XXXXXX")
trap 'rm -rf "$OUT"' EXIT

declare -A ok fail hang crash
order=()
total=0 bad=0 shown=0
port_i=0

next_port() {
	port_i=$(((port_i + 1) % 100))
	P=$((31500 + port_i))
}

# args for run number i of a combination
combo_args() {	# MODE TEARDOWN DISC I
	local a="-m $1 -t $2 -d $3"
	if [ "$1" = send ]; then
		a+=" -n 200"
	else
		a+=" -n 20 -s ${SIZES[$(($4 % ${#SIZES[@]}))]}"
	fi
	echo "$a"
}

# record VARIANT RC [RC2] LOGFILE...: classify one run
record() {
	local v=$1 rc=$2 rc2=$3 kind=ok r
	shift 3
	for r in "$rc" "$rc2"; do
		case $r in
		0 | "") ;;
		124 | 137) kind=hang ;;
		1 | 2) [ "$kind" = ok ] && kind=fail ;;
		*) [ "$kind" != hang ] && kind=crash ;;
		esac
	done
	[ -n "${ok[$v]+x}" ] || { order+=("$v"); ok[$v]=0 fail[$v]=0 hang[$v]=0 crash[$v]=0; }
	total=$((total + 1))
	case $kind in
	ok) ok[$v]=$((ok[$v] + 1)); return ;;
	fail) fail[$v]=$((fail[$v] + 1)) ;;
	hang) hang[$v]=$((hang[$v] + 1)) ;;
	crash) crash[$v]=$((crash[$v] + 1)) ;;
	esac
	bad=$((bad + 1))
	if [ $shown -lt 10 ]; then
		shown=$((shown + 1))
		echo "FAIL: $v run $total: $kind (exit $rc${rc2:+/$rc2})" >&2
		cat "$@" 2>/dev/null | tail -8 | sed 's/^/    /' >&2
	fi
}

run_one_host() {	# PATH(shm|net)
	local path=$1 m t d i args rc
	for m in send rdma pipe; do
		for t in cancel flag none; do
			for d in client server; do
				for ((i = 0; i < RUNS; i++)); do
					next_port
					args=$(combo_args $m $t $d $i)
					# shellcheck disable=SC2086
					if [ "$path" = net ]; then
						SOFTHCA_NET=1 timeout -k 5 $RUN_SECS \
							"$BIN" pair -p $P $args \
							>"$OUT/run" 2>&1
					else
						timeout -k 5 $RUN_SECS \
							"$BIN" pair -p $P $args \
							>"$OUT/run" 2>&1
					fi
					rc=$?
					record "$path $m $t $d" $rc "" "$OUT/run"
				done
			done
		done
	done
}

# Two hosts: server in namespace a, client in b (a subshell, so that
# lib.sh's skip and teardown stay in it).  Prints "netns V RC RC2" lines.
run_netns() (
	# shellcheck source=tests/netns/lib.sh
	. "$SOFTHCA_SRC/tests/netns/lib.sh"
	netns_require_root
	: "${NETNS_WATCHDOG:=300}"
	netns_setup 2 || { echo "FAIL: netns_setup 2" >&2; exit 1; }
	A4=$(netns_ip4 a)
	local m t d i args
	for m in send rdma pipe; do
		for t in cancel flag none; do
			for d in client server; do
				for ((i = 0; i < NS_RUNS; i++)); do
					next_port
					args=$(combo_args $m $t $d $i)
					# shellcheck disable=SC2086
					NETNS_PAIR_PORT=$P NETNS_PAIR_QUIET=1 \
					netns_pair a b $RUN_SECS \
						"$BIN" server -a "$A4" -p $P $args -- \
						"$BIN" client -a "$A4" -p $P $args
					cat "$NETNS_PAIR_SERVER_OUT" \
						"$NETNS_PAIR_CLIENT_OUT" >"$OUT/ns.$m$t$d$i"
					echo "netns $m $t $d|$NETNS_PAIR_SERVER_RC|$NETNS_PAIR_CLIENT_RC|$OUT/ns.$m$t$d$i"
				done
			done
		done
	done
	exit 0
)

start=$SECONDS
run_one_host shm
run_one_host net

ns_note=""
run_netns >"$OUT/netns" 2>"$OUT/netns.err"
ns_rc=$?
if [ $ns_rc = 77 ]; then
	ns_note="two-namespace runs skipped: $(grep -m1 '^SKIP' "$OUT/netns" ||
		echo "SKIP: needs root")"
	: >"$OUT/netns"
elif [ $ns_rc != 0 ]; then
	echo "FAIL: the two-namespace runs did not complete (exit $ns_rc)" >&2
	tail -5 "$OUT/netns.err" | sed 's/^/    /' >&2
	bad=$((bad + 1))
fi
while IFS='|' read -r v rs rcl log; do
	record "$v" "$rs" "$rcl" "$log"
done <"$OUT/netns"

printf '%-28s %5s %5s %5s %5s\n' variant ok fail hang crash
for v in "${order[@]}"; do
	printf '%-28s %5d %5d %5d %5d\n' "$v" "${ok[$v]}" "${fail[$v]}" \
		"${hang[$v]}" "${crash[$v]}"
done
[ -n "$ns_note" ] && echo "$ns_note"
echo "cq_thread: $total runs, $((total - bad)) clean, $bad failed ($((SECONDS - start)) s)"
# every run counted (504 on one host by default)
[ $bad = 0 ] && [ $total -ge $((36 * RUNS)) ] || exit 1
exit 0
