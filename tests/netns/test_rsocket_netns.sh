#!/bin/bash
# rsockets between hosts: two network namespaces (a and b, tests/netns/
# lib.sh) joined by a bridge, softhca's net path between them.
#  - rstream (-T v: the data checked; blocking, and async non-blocking),
#    over IPv4 and IPv6, server in a, client in b;
#  - rcopy: a file from b to a, compared byte for byte;
#  - udpong: datagrams (echo, each reply awaited), messages within the
#    veth's 1024-byte path MTU;
#  - Debian's librspreload.so under iperf3, server in a, client in b:
#    the byte counts, and `softhca stat` in a showing megabytes in the
#    server's RC QPs while iperf3's TCP port carries CM messages only.
# Root only (77 otherwise); the namespaces are always deleted (lib.sh).
# Ports: 32300-32399 (this test's share of 32000-32999).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need rstream rcopy udpong cmp ss

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
TOOL=$SOFTHCA_BUILD/bin/softhca
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS

next_port=32300
P=0
port() { next_port=$((next_port + 1)); P=$next_port; }

: "${NETNS_WATCHDOG:=540}"
netns_setup 2 || { fail "netns_setup 2"; finish; }
A4=$(netns_ip4 a) A6=$(netns_ip6 a)
ok "namespaces a ($A4, $A6) and b"

pair_ok() {
	if [ "$NETNS_PAIR_SERVER_RC" = 0 ] && [ "$NETNS_PAIR_CLIENT_RC" = 0 ]; then
		ok "$1"
	else
		fail "$1 (server exit $NETNS_PAIR_SERVER_RC, client exit $NETNS_PAIR_CLIENT_RC)"
	fi
}

out_has() {	# NAME server|client ERE
	local f=$NETNS_PAIR_CLIENT_OUT
	[ "$2" = server ] && f=$NETNS_PAIR_SERVER_OUT
	if grep -Eq -- "$3" "$f"; then ok "$1: $2 /$3/"; else
		fail "$1: $2 output does not match /$3/"
		tail -5 "$f" | sed 's/^/    /' >&2
	fi
}

# --- rstream
for spec in "$A4|" "$A4|-T a -T n" "$A6|"; do
	addr=${spec%%|*} opts=${spec#*|}
	port
	name="rstream $opts toward $addr"
	# shellcheck disable=SC2086
	NETNS_PAIR_PORT=$P netns_pair a b 120 \
		rstream -b "$addr" -p "$P" -S 65536 -C 100 -T v $opts -- \
		rstream -s "$addr" -p "$P" -S 65536 -C 100 -T v $opts
	pair_ok "$name"
	out_has "$name" client '^custom +64k +100 +1 +12m '
	out_has "$name" server '^custom +64k +100 +1 +12m '
done

# --- rcopy: the server keeps listening; stopped once the copy is done
head -c 3000001 /dev/urandom >"$NETNS_T/rcopy.src"
port
timeout -k 5 90 ip netns exec "$(netns_name a)" rcopy -p "$P" \
	</dev/null >"$NETNS_T/rcopy.server" 2>&1 &
spid=$!
for _ in $(seq 100); do _netns_listening "$(netns_name a)" "$P" && break; sleep 0.1; done
NETNS_EXEC_TIMEOUT=90 netns_exec b rcopy "$NETNS_T/rcopy.src" \
	"$A4:$NETNS_T/rcopy.dst" -p "$P" >"$NETNS_T/rcopy.client" 2>&1
crc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
[ "$crc" = 0 ] && ok "rcopy b -> a exit 0" || fail "rcopy b -> a: exit $crc"
cmp -s "$NETNS_T/rcopy.src" "$NETNS_T/rcopy.dst" && ok "rcopy: identical" ||
	fail "rcopy: the copy differs"

# --- udpong: the server never exits
port
timeout -k 5 90 ip netns exec "$(netns_name a)" udpong -b "$A4" -p "$P" -T b \
	</dev/null >"$NETNS_T/udpong.server" 2>&1 &
spid=$!
# until the server's UDP port is bound: what comes before it reads is
# queued there and read by rsocket's service thread, which makes the QP
for _ in $(seq 100); do
	[ -n "$(ip netns exec "$(netns_name a)" ss -Huln "sport = :$P")" ] &&
		break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.1
done
NETNS_EXEC_TIMEOUT=90 netns_exec b udpong -s "$A4" -p "$P" -C 200 -S 1000 \
	-T e -T b >"$NETNS_T/udpong.client" 2>&1
crc=$?
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
[ "$crc" = 0 ] && ok "udpong b -> a exit 0" || fail "udpong b -> a: exit $crc"
grep -Eq '^custom +1000 +400 ' "$NETNS_T/udpong.client" &&
	ok "udpong: 200 echoes of 1000 bytes" ||
	{ fail "udpong: no result line"; tail -5 "$NETNS_T/udpong.client" >&2; }

# --- librspreload under iperf3
RSPRELOAD=
for f in /usr/lib/*/rsocket/librspreload.so /usr/lib/rsocket/librspreload.so; do
	[ -e "$f" ] && { RSPRELOAD=$f; break; }
done
if [ -n "$RSPRELOAD" ] && command -v iperf3 >/dev/null; then
	port
	NA=$(netns_name a)
	timeout -k 5 90 ip netns exec "$NA" env LD_PRELOAD="$RSPRELOAD" \
		iperf3 -s -p "$P" </dev/null >"$NETNS_T/iperf3.server" 2>&1 &
	tpid=$!
	for _ in $(seq 100); do _netns_listening "$NA" "$P" && break; sleep 0.1; done
	timeout -k 5 60 ip netns exec "$(netns_name b)" env \
		LD_PRELOAD="$RSPRELOAD" iperf3 -c "$A4" -p "$P" -t 3 -J \
		</dev/null >"$NETNS_T/iperf3.out" 2>"$NETNS_T/iperf3.err" &
	cpid=$!
	spid=$(ip netns pids "$NA" | while read -r p; do
		[ "$(cat /proc/"$p"/comm 2>/dev/null)" = iperf3 ] && echo "$p"
	done | head -1)
	qp=0 tcp=0
	while [ -n "$spid" ] && kill -0 "$cpid" 2>/dev/null; do
		ip netns exec "$NA" "$TOOL" stat --pid "$spid" >"$NETNS_T/stat" 2>&1
		qp=$(awk '/ qp 0x/ && / type RC / {
			for (i = 1; i < NF; i++) if ($i == "rcvd_bytes") t += $(i + 1)
		} END { print t + 0 }' "$NETNS_T/stat")
		tcp=$(ip netns exec "$NA" ss -tinH "( sport = :$P or dport = :$P )" |
		      grep -o 'bytes_received:[0-9]*' |
		      awk -F: '{ t += $2 } END { print t + 0 }')
		[ "$qp" -gt $((1 << 20)) ] && break
		sleep 0.2
	done
	wait "$cpid"
	crc=$?
	kill "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null
	[ "$crc" = 0 ] && ok "iperf3 b -> a under librspreload: exit 0" ||
		fail "iperf3 b -> a: exit $crc"
	sr=$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["end"]["sum_sent"]["bytes"], d["end"]["sum_received"]["bytes"])' "$NETNS_T/iperf3.out" 2>/dev/null)
	s=${sr% *} r=${sr#* }
	if [ -n "$sr" ] && [ "$r" -gt 0 ] && [ "$r" -le "$s" ]; then
		ok "iperf3: $s bytes sent, $r received"
	else
		fail "iperf3: sent/received '$sr'"
	fi
	if [ "$qp" -gt $((1 << 20)) ] && [ "$tcp" -lt 65536 ]; then
		ok "iperf3: $qp bytes through a's RC QPs, $tcp through TCP port $P"
	else
		fail "iperf3: a's RC QPs received $qp bytes, TCP port $P $tcp"
		head -10 "$NETNS_T/stat" | sed 's/^/    /' >&2
	fi
else
	echo "SKIP: no librspreload.so or iperf3: the preload check is skipped"
fi

finish
