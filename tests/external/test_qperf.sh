#!/bin/bash
# qperf (Debian's, unmodified) over softhca with rdma_cm (-cm1): the RC
# latency, bandwidth, RDMA WRITE latency, RDMA READ bandwidth and
# compare-and-swap tests, round after round against one server, as a user
# runs it.  qperf ends each timed test with SIGALRM, installed without
# SA_RESTART, and relies on it to interrupt a blocking ibv_get_cq_event:
# a wait that does not end with EINTR hangs the server (the client then
# times out) and the next test is REJECTED.  Every test of every round
# must print its figure and no round may hang.
#
# qperf's shortest test is 1 s (-t takes whole seconds: alarm()), so a
# round takes ~6 s; QPERF_ROUNDS sets the number of rounds (default 20;
# the issue's acceptance run used 100).  qperf's other RC/UC/UD tests
# cannot run on a RoCE port with or without softhca: without -cm1 it
# builds LID-only addresses, and its UD/UC tests have no rdma_cm mode.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need qperf

ROUNDS=${QPERF_ROUNDS:-20}
TESTS=(rc_lat rc_bw rc_rdma_write_lat rc_rdma_read_bw rc_compare_swap_mr)
# what each test prints when it ran
declare -A FIGURE=([rc_lat]='latency *=' [rc_bw]='bw *='
		   [rc_rdma_write_lat]='latency *=' [rc_rdma_read_bw]='bw *='
		   [rc_compare_swap_mr]='msg_rate *=')

port=$(free_port)
"$TOOL" run qperf -lp "$port" </dev/null >"$T/server.out" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; rm -rf "$T"' EXIT
wait_ready 60 "$server" tcp_listening "$port"

bad=0
for r in $(seq 1 "$ROUNDS"); do
	run "round$r" 60 "$TOOL" run qperf -lp "$port" -cm1 -t 1 \
		127.0.0.1 "${TESTS[@]}"
	for t in "${TESTS[@]}"; do
		# the figure that follows the test's name
		if awk -v t="$t:" -v re="${FIGURE[$t]}" \
			'$1 == t { s = 1; next } /^[a-z_]+:$/ { s = 0 }
			 s && $0 ~ re { f = 1 } END { exit !f }' \
			"$T/round$r.out"; then
			ok "round $r: $t"
		else
			fail "round $r: $t printed no figure (exit $rc)"
			bad=$((bad + 1))
		fi
	done
	if [ "$rc" != 0 ]; then
		fail "round $r: qperf exit $rc"
		show "round$r"
	fi
	[ "$bad" -gt 4 ] && { echo "note: stopping after $bad failed tests"; break; }
	kill -0 "$server" 2>/dev/null ||
		{ fail "the qperf server is gone after round $r"; break; }
done
echo "qperf -cm1: $ROUNDS rounds of ${#TESTS[@]} tests, $bad failed"
finish
