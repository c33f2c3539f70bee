#!/bin/bash
# rsockets (rdma/rsocket.h) on softhca, with unmodified Debian programs:
#  - rdmacm-utils' rstream (blocking, -T b/n/a/v/r and combinations),
#    riostream (riowrite into riomapped buffers; -T b/n/a/v), rcopy (a
#    file copied and compared byte for byte) and udpong (datagrams:
#    echo, and the bandwidth mode's count), two processes on 127.0.0.1;
#  - Debian's librspreload.so (librdmacm1) under plain TCP programs:
#    iperf3 (its byte counts, and `softhca stat` of the server showing at
#    least as many bytes received by its RC QPs: the data went over
#    softhca, not TCP), nc (a file through nc.traditional -l and
#    openbsd nc, compared byte for byte), and the preload's fallbacks: a
#    Unix socket through nc, select and poll on ordinary descriptors;
#  - softhca's own socket calls never go through a preload: the
#    libraries import none of the names librspreload defines.
# Ports: 32200-32299 (this test's share of 32000-32999).
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need rstream riostream rcopy udpong cmp nm
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }

next_port=32200
port() { next_port=$((next_port + 1)); P=$next_port; }

# --- softhca's libraries reach the kernel without interposable symbols
PRELOAD_NAMES='socket bind listen accept connect shutdown getsockname
getpeername getsockopt setsockopt send sendto sendmsg recv recvfrom
recvmsg read write readv writev close poll select dup2 sendfile fcntl'
for lib in "$LIB/libibverbs.so.1" "$LIB/librdmacm.so.1"; do
	imported=$(nm -D --undefined-only "$lib" | awk '{ sub(/@.*/, "", $2); print $2 }')
	bad=
	for n in $PRELOAD_NAMES; do
		printf '%s\n' "$imported" | grep -qx "$n" && bad="$bad $n"
	done
	[ -z "$bad" ] && ok "$(basename "$lib") imports no preloadable call" ||
		fail "$(basename "$lib") imports$bad (see src/common/sys.c)"
done

# --- rstream: 100 transfers of 64 KiB each way, verified (-T v) in
# every mode but the plain one, whose byte count is checked
expect_line() {	# NAME SIDE REGEX
	if grep -Eq -- "$3" "$T/$1.$2"; then ok "$1 $2 /$3/"; else
		fail "$1: $2 output does not match /$3/"
		tail -5 "$T/$1.$2" | sed 's/^/    /' >&2
	fi
}
for opts in "" "-T v" "-T b -T v" "-T n -T v" "-T a -T v" "-T a -T n -T v" \
	    "-T a -T b -T v" "-T r -T v"; do
	port
	name="rstream${opts// /}"
	# shellcheck disable=SC2086
	PAIR_PORT=$P pair "$name" 90 rstream -p "$P" -S 65536 -C 100 $opts -- \
		rstream -s 127.0.0.1 -p "$P" -S 65536 -C 100 $opts
	expect_line "$name" client '^custom +64k +100 +1 +12m '
	expect_line "$name" server '^custom +64k +100 +1 +12m '
done
# small transfers: the latency path (one message in flight)
port
PAIR_PORT=$P pair rstream-small 90 rstream -p "$P" -S 64 -I 2000 -C 1 -T v -- \
	rstream -s 127.0.0.1 -p "$P" -S 64 -I 2000 -C 1 -T v
expect_line rstream-small client '^custom +64 +1 +2k '

# --- riostream: the data lands by riowrite in the peer's riomap buffer
for opts in "" "-T b" "-T n" "-T a" "-T v" "-T a -T n -T v"; do
	port
	name="riostream${opts// /}"
	# shellcheck disable=SC2086
	PAIR_PORT=$P pair "$name" 90 riostream -p "$P" -S 65536 -C 100 $opts -- \
		riostream -s 127.0.0.1 -p "$P" -S 65536 -C 100 $opts
	expect_line "$name" client '^custom +64k +100 +1 +12m '
done

# --- rcopy: a 6 MB file, byte for byte; the server keeps listening
head -c 6000001 /dev/urandom >"$T/rcopy.src"
port
timeout -k 5 60 rcopy -p "$P" </dev/null >"$T/rcopy.server" 2>&1 &
spid=$!
wait_ready 60 "$spid" tcp_listening "$P"
run rcopy 60 rcopy "$T/rcopy.src" "127.0.0.1:$T/rcopy.dst" -p "$P"
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null
expect_rc rcopy 0
expect_out rcopy '6000001 bytes in'
cmp -s "$T/rcopy.src" "$T/rcopy.dst" && ok "rcopy: the copy is identical" ||
	fail "rcopy: $T/rcopy.dst differs from the source"

# --- udpong: echo (each reply awaited) and the bandwidth mode, whose
# count is what the server received (UD may drop: at most what was sent).
# The server never exits: stopped once its client is done.
udpong_pair() {	# NAME SERVER_OPTS -- CLIENT_OPTS
	local name=$1 sopts=$2 copts=$3 spid
	port
	# shellcheck disable=SC2086
	timeout -k 5 60 udpong -b 127.0.0.1 -p "$P" $sopts </dev/null \
		>"$T/$name.server" 2>&1 &
	spid=$!
	wait_ready 60 "$spid" udp_bound "$P"
	# shellcheck disable=SC2086
	run "$name" 60 udpong -s 127.0.0.1 -p "$P" $copts
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	expect_rc "$name" 0
	cp "$T/$name.out" "$T/$name.client"
}
udpong_pair udpong-echo "-T b" "-C 500 -S 1000 -T e -T b"
expect_line udpong-echo client '^custom +1000 +1k '
udpong_pair udpong-bw "-T b" "-C 500 -S 1000 -T b"
n=$(awk '$1 == "custom" { print $3 }' "$T/udpong-bw.client")
if [ -n "$n" ] && [ "$n" -gt 0 ] && [ "$n" -le 500 ]; then
	ok "udpong-bw: the server counted $n of 500"
else
	fail "udpong-bw: count '$n' (expected 1..500)"
fi
udpong_pair udpong-async "-T a" "-C 200 -S 100 -T e -T a"
expect_line udpong-async client '^custom +100 +400 '
udpong_pair udpong-nonblock "-T n" "-C 200 -S 2000 -T e"
expect_line udpong-nonblock client '^custom +1.9k +400 '

# --- librspreload: Debian's, whichever multiarch directory holds it
RSPRELOAD=
for f in /usr/lib/*/rsocket/librspreload.so /usr/lib/rsocket/librspreload.so; do
	[ -e "$f" ] && { RSPRELOAD=$f; break; }
done
if [ -z "$RSPRELOAD" ]; then
	echo "SKIP: no librspreload.so (package librdmacm1): preload checks skipped"
	finish
fi
pre() { LD_PRELOAD=$RSPRELOAD "$@"; }

# iperf3: the byte counts of both ends; then again over softhca's net
# path (SOFTHCA_NET=1, whose QPs count their bytes in `softhca stat`):
# while it runs, the server's RC QPs receive megabytes while the TCP
# connections on iperf3's port (rdma_cm's, since softhca's CM ports are
# TCP ports) carry a few hundred bytes of CM messages
iperf_pair() {	# NAME EXTRA_ENV
	local name=$1 extra=$2 tpid spid cpid sent s r
	port
	env $extra LD_PRELOAD="$RSPRELOAD" timeout -k 5 90 iperf3 -s -p "$P" \
		</dev/null >"$T/$name.server" 2>&1 &
	tpid=$!
	wait_ready 60 "$tpid" tcp_listening "$P"
	spid=$(pgrep -P "$tpid" -x iperf3 | head -1)
	env $extra LD_PRELOAD="$RSPRELOAD" timeout -k 5 60 iperf3 \
		-c 127.0.0.1 -p "$P" -t 3 -J </dev/null >"$T/$name.out" \
		2>"$T/$name.err" &
	cpid=$!
	qp_bytes=0
	tcp_bytes=0
	while [ -n "$extra" ] && [ -n "$spid" ] && kill -0 "$cpid" 2>/dev/null
	do
		"$TOOL" stat --pid "$spid" >"$T/$name.stat" 2>&1
		qp_bytes=$(awk '/ qp 0x/ && / type RC / {
			for (i = 1; i < NF; i++) if ($i == "rcvd_bytes") t += $(i + 1)
		} END { print t + 0 }' "$T/$name.stat")
		ss -tinH "( sport = :$P or dport = :$P )" >"$T/$name.ss"
		tcp_bytes=$(grep -o 'bytes_received:[0-9]*' "$T/$name.ss" |
			    awk -F: '{ t += $2 } END { print t + 0 }')
		[ "$qp_bytes" -gt $((1 << 20)) ] && break
		sleep 0.2
	done
	wait "$cpid"
	rc=$?
	expect_rc "$name" 0
	sent=$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1])); print(d["end"]["sum_sent"]["bytes"], d["end"]["sum_received"]["bytes"])' "$T/$name.out" 2>/dev/null)
	s=${sent% *} r=${sent#* }
	# the server counts what it read by the end of the test: at most
	# what was sent, short by what was still on the way
	if [ -n "$sent" ] && [ "$r" -gt 0 ] && [ "$r" -le "$s" ]; then
		ok "$name: $s bytes sent, $r received"
	else
		fail "$name: sent/received '$sent'"
		show "$name"
	fi
	kill "$tpid" 2>/dev/null
	wait "$tpid" 2>/dev/null
	if grep -q 'getsockopt\|select failed\|error' "$T/$name.err"; then
		fail "$name complained"; show "$name"
	else
		ok "$name: no complaint"
	fi
}
if command -v iperf3 >/dev/null && command -v ss >/dev/null; then
	iperf_pair iperf3 ""
	iperf_pair iperf3-net SOFTHCA_NET=1
	if [ "$qp_bytes" -gt $((1 << 20)) ] && [ "$tcp_bytes" -lt 65536 ]; then
		ok "iperf3-net: $qp_bytes bytes through the server's RC QPs," \
		   "$tcp_bytes through TCP port $P"
	else
		fail "iperf3-net: RC QPs received $qp_bytes bytes, TCP port $P $tcp_bytes"
		head -20 "$T/iperf3-net.stat" "$T/iperf3-net.ss" 2>/dev/null |
			sed 's/^/    /' >&2
	fi
else
	echo "SKIP: iperf3 or ss not installed: the iperf3 run over rsockets skipped"
fi

# nc: nc.traditional listens (accept(2), which the preload converts;
# openbsd nc -l uses accept4, which it does not), openbsd nc sends
head -c 4000003 /dev/urandom >"$T/nc.src"
if command -v nc.traditional >/dev/null && command -v nc.openbsd >/dev/null; then
	port
	# nc.traditional handles descriptors below 16 only (its own
	# FD_SETSIZE): what the test's parent left open is closed first
	timeout -k 5 60 bash -c 'for f in /proc/$$/fd/*; do
		f=${f##*/}; [ "$f" -gt 2 ] && eval "exec $f>&-"; done
		exec env LD_PRELOAD="$2" nc.traditional -v -l -p "$1" \
			-s 127.0.0.1' nc "$P" "$RSPRELOAD" \
		</dev/null >"$T/nc.dst" 2>"$T/nc.server.err" &
	spid=$!
	wait_ready 60 "$spid" tcp_listening "$P"
	run nc-send 60 env LD_PRELOAD="$RSPRELOAD" sh -c \
		"nc.openbsd -N 127.0.0.1 $P < '$T/nc.src'"
	wait "$spid" 2>/dev/null
	expect_rc nc-send 0
	if cmp -s "$T/nc.src" "$T/nc.dst"; then
		ok "nc: the file arrived intact"
	else
		fail "nc: $(stat -c %s "$T/nc.dst" 2>/dev/null) bytes arrived, differing"
		sed 's/^/    server: /' "$T/nc.server.err" >&2
		show nc-send
	fi
else
	echo "SKIP: nc.traditional or nc.openbsd missing: nc over rsockets skipped"
fi

# fallback: a Unix socket is not an rsocket; nc still moves the file
if command -v nc.openbsd >/dev/null; then
	pre timeout -k 5 60 nc.openbsd -lU "$T/u.sock" </dev/null \
		>"$T/nc-unix.dst" 2>"$T/nc-unix.err" &
	spid=$!
	for _ in $(seq 50); do [ -S "$T/u.sock" ] && break; sleep 0.1; done
	run nc-unix 60 env LD_PRELOAD="$RSPRELOAD" sh -c \
		"nc.openbsd -NU '$T/u.sock' < '$T/nc.src'"
	wait "$spid" 2>/dev/null
	expect_rc nc-unix 0
	cmp -s "$T/nc.src" "$T/nc-unix.dst" &&
		ok "nc over a Unix socket under the preload: intact" ||
		fail "nc over a Unix socket: the copy differs"
fi

# fallback: select and poll on ordinary descriptors (the preload sends
# every select to rselect, and every poll with an rsocket to rpoll)
run select-poll 30 env LD_PRELOAD="$RSPRELOAD" "$PY" -c '
import os, select, socket
r, w = os.pipe()
assert select.select([r], [], [], 0.05) == ([], [], [])
os.write(w, b"x")
assert select.select([r], [w], [], 5) == ([r], [w], [])
p = select.poll(); p.register(r, select.POLLIN)
assert p.poll(5000) == [(r, select.POLLIN)]
a, b = socket.socketpair()
b.send(b"hello")
assert select.select([a], [], [], 5)[0] == [a] and a.recv(5) == b"hello"
print("select-poll ok")'
expect_rc select-poll 0
expect_out select-poll '^select-poll ok$'

finish
