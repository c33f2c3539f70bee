#!/bin/bash
# UCX (Debian's ucx-utils, unmodified) between two network namespaces
# ("hosts" a and b, tests/netns/lib.sh) over softhca's net path, run as a
# user would (`softhca run`): ucx_info lists rc_verbs and ud_verbs on
# softhca_veth0 in each host, and ucx_perftest's tag, put, get, active
# message and atomic tests pass with the server in b and the client in a,
# over UCX_TLS=rc_verbs,ud_verbs and over ud_verbs alone, 8 B to 4 MiB;
# UCX says it chose softhca_veth0 and a's veth0 carries the bytes.
#
# UCX_NET_DEVICES names the host's NIC, softhca_veth0, as on a cluster
# whose hosts have several ports: UCX assumes every RoCE v2 address
# reachable from every port (UCX_IB_ROCE_LOCAL_SUBNET=n is its default),
# so it would also open lanes on softhca_lo, whose 127.0.0.1 reaches no
# other host (as an rxe device on lo would not).  README says so.
# Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ucx_info ucx_perftest

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
TOOL=$SOFTHCA_BUILD/bin/softhca
[ -x "$TOOL" ] || { echo "FAIL: no $TOOL" >&2; exit 1; }
unset LD_PRELOAD LD_LIBRARY_PATH RDMAV_DRIVERS IBV_DRIVERS
DEV=softhca_$NETNS_IF

: "${NETNS_WATCHDOG:=540}"
netns_setup 2 || { fail "netns_setup 2"; finish; }
A4=$(netns_ip4 a) B4=$(netns_ip4 b)
ok "namespaces a ($A4) and b ($B4)"

for h in a b; do
	out=$NETNS_T/info.$h
	NETNS_EXEC_TIMEOUT=60 netns_exec "$h" "$TOOL" run ucx_info -d \
		>"$out" 2>&1
	awk '/Transport:/ { t = $3 } /Device:/ { print t, $3 }' "$out" \
		>"$out.pairs"
	for tl in rc_verbs ud_verbs; do
		check "host $h: ucx_info lists $tl on $DEV:1" \
			grep -qx "$tl $DEV:1" "$out.pairs"
	done
done

veth_bytes() {
	netns_exec a cat "/sys/class/net/$NETNS_IF/statistics/tx_bytes" \
		"/sys/class/net/$NETNS_IF/statistics/rx_bytes" 2>/dev/null |
		awk '{ s += $1 } END { print s + 0 }'
}

next_port=18800
# perf NAME TLS TEST SIZE ITERS: server in b, client in a
perf() {
	local name=$1 tls=$2 test=$3 size=$4 iters=$5 b0 b1 want
	local args=(-t "$test" -s "$size" -n "$iters" -w $((iters / 10 + 1)))
	next_port=$((next_port + 1))
	b0=$(veth_bytes)
	if NETNS_PAIR_PORT=$next_port netns_pair b a 120 \
		env UCX_TLS="$tls" UCX_NET_DEVICES="$DEV:1" \
		UCX_LOG_LEVEL=info \
		"$TOOL" run ucx_perftest -p "$next_port" "${args[@]}" -- \
		env UCX_TLS="$tls" UCX_NET_DEVICES="$DEV:1" \
		UCX_LOG_LEVEL=info \
		"$TOOL" run ucx_perftest -p "$next_port" "${args[@]}" "$B4"; then
		ok "$name"
		check "$name: UCX chose $DEV" grep -Eq \
			"ep_cfg.*(rc|ud)_verbs/$DEV:1" "$NETNS_PAIR_CLIENT_OUT"
		b1=$(veth_bytes)
		# the messages cross veth0 (at least once each way or back)
		want=$((size * iters))
		if [ $((b1 - b0)) -ge "$want" ]; then
			ok "$name: veth0 carried $((b1 - b0)) bytes (>= $want)"
		else
			fail "$name: veth0 carried $((b1 - b0)) bytes, < $want"
		fi
		grep -E '^Final:' "$NETNS_PAIR_CLIENT_OUT" | sed "s/^/  $name /"
	else
		fail "$name"
	fi
}

for tls in rc_verbs,ud_verbs ud_verbs; do
	for t in tag_lat tag_bw ucp_put_lat ucp_put_bw ucp_get ucp_am_lat; do
		perf "$t-8-${tls//,/+}" "$tls" "$t" 8 500
		perf "$t-4M-${tls//,/+}" "$tls" "$t" 4194304 10
	done
	for t in ucp_add ucp_fadd ucp_swap ucp_cswap; do
		perf "$t-8-${tls//,/+}" "$tls" "$t" 8 300
	done
done
finish
