#!/bin/bash
# bench/tcpzc.sh: plain TCP on the net path's own paths, for issue 15's
# bulk-transfer ideas: a stream sent with MSG_ZEROCOPY beside the same
# stream copied, and two streams beside one (bench/tcpzc.c), 64 KiB and
# 1 MiB writes, over 127.0.0.1 and (root only) between two network
# namespaces over a veth pair this script creates and removes.  The cases
# alternate within each round, so every figure has its baseline beside
# it at the same load; the load is printed at the start and the end.  A
# benchmark, not a test.
#
#   bench/tcpzc.sh [ROUNDS [SECONDS]]     (default 2 rounds of 3 s cases)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-2}
secs=${2:-3}
port=19650
tmp=$(mktemp -d)
ns_a=softhca-zc-a.$$
ns_b=softhca-zc-b.$$
cleanup() {
	[ -n "${srv:-}" ] && kill "$srv" 2>/dev/null
	if [ "$(id -u)" = 0 ]; then
		ip netns del "$ns_a" 2>/dev/null || true
		ip netns del "$ns_b" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
cc -O2 -Wall -Wextra -o "$tmp/tcpzc" "$root/bench/tcpzc.c" -lpthread

# run WHERE HOST [SERVER_PREFIX CLIENT_PREFIX]: every case, rounds times
run() {
	local where=$1 host=$2 spre=${3:-} cpre=${4:-} r size mode n
	port=$((port + 1))
	$spre timeout $((rounds * 8 * (secs + 2) + 30)) "$tmp/tcpzc" server \
		"$port" >"$tmp/srv.$port" 2>&1 &
	srv=$!
	for _ in $(seq 50); do
		grep -q listening "$tmp/srv.$port" 2>/dev/null && break
		sleep 0.1
	done
	for r in $(seq "$rounds"); do
		for size in 65536 1048576; do
			for n in 1 2; do
				for mode in copy zc; do
					echo "$where round $r: $($cpre timeout $((secs + 10)) \
						"$tmp/tcpzc" client "$host" "$port" "$size" \
						"$secs" "$mode" "$n")"
				done
			done
		done
	done
	kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	srv=
}

echo "# $(date -u +%F) $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
run lo 127.0.0.1
if [ "$(id -u)" = 0 ]; then
	ip netns add "$ns_a"
	ip netns add "$ns_b"
	ip link add zc-a.$$ netns "$ns_a" type veth peer name zc-b.$$ \
		netns "$ns_b"
	ip -n "$ns_a" addr add 10.213.77.1/24 dev zc-a.$$
	ip -n "$ns_b" addr add 10.213.77.2/24 dev zc-b.$$
	ip -n "$ns_a" link set zc-a.$$ up
	ip -n "$ns_b" link set zc-b.$$ up
	ip -n "$ns_a" link set lo up
	ip -n "$ns_b" link set lo up
	run netns 10.213.77.1 "ip netns exec $ns_a" "ip netns exec $ns_b"
else
	echo "netns: skipped (needs root)"
fi
echo "# load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
