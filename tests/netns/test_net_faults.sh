#!/bin/bash
# The net path under transport faults, between two namespaces ("hosts"):
#
#  - SOFTHCA_FAULTS drop / dup / reorder / delay / reset, alone and all at
#    once: RC still delivers every message once and in order —
#    ibv_rc_pingpong -c checks every received buffer, small (one packet)
#    and 64 KiB (64 packets of 1 KiB) messages; both sides run with the
#    faults (the server may then end with RETRY_EXC_ERR once its client
#    had every message: the ACK of its last one was lost, see pp);
#  - the peer host disappears (its cable pulled, its process killed):
#    the other side's outstanding work completes with
#    IBV_WC_RETRY_EXC_ERR (status 12) within timeout x retry_cnt and the
#    program ends: nothing hangs (a side that only waits for a receive
#    waits, as on hardware: the killed-server check uses a client that
#    always has RDMA WRITEs outstanding, ib_write_bw -D);
#  - SOFTHCA_PCAP: every packet of an RC exchange (SEND, RDMA WRITE and
#    READ, atomics) is in the trace, and tshark's InfiniBand dissector
#    decodes them without a malformed packet.
#
# Root only (skips otherwise).  Environment: SOFTHCA_BUILD (default: the
# source tree's build/).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_rc_pingpong ibv_devinfo ib_read_lat ib_atomic_lat ib_write_lat \
	ib_write_bw stdbuf

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
[ -e "$SOFTHCA_BUILD/lib/libibverbs.so.1" ] || { echo "FAIL: no libibverbs.so.1 in $SOFTHCA_BUILD/lib" >&2; exit 1; }
export LD_LIBRARY_PATH=$SOFTHCA_BUILD/lib
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS SOFTHCA_FAULTS SOFTHCA_PCAP

netns_setup 2
DEV=softhca_$NETNS_IF
A=$(netns_ip4 a)
PORT=18515

# the GID index of this namespace's IPv4 address on $DEV
gid4() {
	netns_exec "$1" ibv_devinfo -v -d "$DEV" 2>/dev/null |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:$(netns_ip4 "$1" | sed 's/\./\\./g'), RoCE v2\$/\1/p" |
		head -1
}
GA=$(gid4 a)
GB=$(gid4 b)
check "GID indexes of the IPv4 addresses: a '$GA', b '$GB'" test -n "$GA" -a -n "$GB"
: "${GA:=0}" "${GB:=0}"

# pp SECONDS ARGS...: an ibv_rc_pingpong pair a <- b, $FAULTS in both.
# 0 when both sides ended well; or when the client did all its iterations
# (-c: it checked every message it received) and the server ended with
# RETRY_EXC_ERR on a send (wr_id 2): a fault took the ACK of its last
# message and the client, which had it, was gone, as it can be over a
# lossy wire.  Only the last one can be unacknowledged then: a side posts
# its next send once the one before completed.
pp() {
	local secs=$1 n=1000 a
	shift
	for a in "$@"; do
		case $a in -n) n=next ;; *) [ "$n" = next ] && n=$a ;; esac
	done
	NETNS_PAIR_QUIET=1 NETNS_PAIR_PORT=$PORT netns_pair a b "$secs" \
		env SOFTHCA_FAULTS="$FAULTS" ibv_rc_pingpong -d "$DEV" -g "$GA" -p $PORT "$@" -- \
		env SOFTHCA_FAULTS="$FAULTS" ibv_rc_pingpong -d "$DEV" -g "$GB" -p $PORT "$@" "$A" &&
		return 0
	if [ "$NETNS_PAIR_CLIENT_RC" = 0 ] && [ "$NETNS_PAIR_SERVER_RC" = 1 ] &&
	   grep -q "^$n iters in" "$NETNS_PAIR_CLIENT_OUT" &&
	   grep -q '^Failed status transport retry counter exceeded (12) for wr_id 2$' \
		"$NETNS_PAIR_SERVER_OUT"; then
		echo "note: faults $FAULTS: the ACK of the server's last message was lost" \
			"(RETRY_EXC_ERR after its client had all $n)"
		return 0
	fi
	echo "pp: server exit $NETNS_PAIR_SERVER_RC, client exit $NETNS_PAIR_CLIENT_RC" >&2
	tail -4 "$NETNS_PAIR_SERVER_OUT" | sed 's/^/    server: /' >&2
	tail -4 "$NETNS_PAIR_CLIENT_OUT" | sed 's/^/    client: /' >&2
	return 1
}

# --- faults: every message once, in order, intact -----------------------
for f in drop=0.03 dup=0.05 reorder=0.05 delay=0.03,delay_ms=3 reset=0.01 \
	drop=0.02,dup=0.02,reorder=0.02,delay=0.02,reset=0.005; do
	FAULTS=$f,seed=7
	check "RC pingpong -c, 4 KiB x 300, faults $f" pp 90 -c -n 300
	check "RC pingpong -c, 64 KiB x 50 (64 packets each), faults $f" \
		pp 90 -c -n 50 -s 65536 -m 1024
done
FAULTS=

# --- the peer disappears -------------------------------------------------
# retry_exc FILE...: a side saw status 12 (RETRY_EXC_ERR), as
# ibv_rc_pingpong or perftest says it
retry_exc() {
	grep -Eqh 'status transport retry counter exceeded \(12\)|Failed status 12:' "$@"
}

# cable pulled: a long run, then b's cable goes; the side with a send
# outstanding gives up within timeout x retry_cnt (ibv_rc_pingpong: 67 ms
# x 7) and ends.  (A side that only waits for a receive waits, as it
# would on hardware; the teardown ends it.)
# first_retry_exc SECONDS: how long until RETRY_EXC_ERR shows in a pair
# output, or nothing after SECONDS
first_retry_exc() {
	local i
	for ((i = 0; i < $1 * 10; i++)); do
		if retry_exc "$NETNS_T"/pair*.client "$NETNS_T"/pair*.server 2>/dev/null; then
			echo $((i / 10))
			return 0
		fi
		sleep 0.1
	done
	return 1
}
NETNS_PAIR_QUIET=1 NETNS_PAIR_PORT=$PORT netns_pair a b 30 \
	ibv_rc_pingpong -d "$DEV" -g "$GA" -p $PORT -n 100000000 -- \
	ibv_rc_pingpong -d "$DEV" -g "$GB" -p $PORT -n 100000000 "$A" &
pair=$!
sleep 2
netns_link_down b
if secs=$(first_retry_exc 10); then
	ok "cable pulled: RETRY_EXC_ERR after ${secs} s"
else
	fail "cable pulled: no RETRY_EXC_ERR within 10 s"
fi
netns_link_up b
ip netns pids "$(netns_name a)" | xargs -r kill -9
ip netns pids "$(netns_name b)" | xargs -r kill -9
wait $pair
rm -f "$NETNS_T"/pair*.client "$NETNS_T"/pair*.server

# process killed: the server is killed mid-run, while its client writes
# all the time (ib_write_bw -D: RDMA WRITEs are outstanding at any
# moment): the client's connection is refused from then on, its
# outstanding WRITE completes with RETRY_EXC_ERR and it ends by itself,
# non-zero, long before its 30 s are over.  (A client that only waits
# for a receive would wait, as on hardware: ibv_rc_pingpong cannot say.)
# (the pair runs in the background: the client says its own exit status;
# its stdout line-buffered, for its table's header)
NETNS_PAIR_QUIET=1 NETNS_PAIR_PORT=$PORT netns_pair a b 60 \
	ib_write_bw -d "$DEV" -x "$GA" -p $PORT -D 30 -- \
	sh -c '"$@"; echo "client exit status $?"' sh \
	stdbuf -oL ib_write_bw -d "$DEV" -x "$GB" -p $PORT -D 30 "$A" &
pair=$!
# until the client measures (its table's header), at most 20 s
for ((n = 0; n < 200; n++)); do
	grep -qs '#bytes' "$NETNS_T"/pair*.client && break
	sleep 0.1
done
ip netns pids "$(netns_name a)" | xargs -r kill -9
wait $pair
last_client=$(ls -t "$NETNS_T"/pair*.client | head -1)
check "server killed: the writing client reports RETRY_EXC_ERR" retry_exc "$last_client"
rc=$(sed -n 's/^client exit status //p' "$last_client")
check "server killed: the client ended by itself, with an error (${rc:-killed})" \
	test "${rc:-0}" -ge 1 -a "${rc:-0}" -lt 124
rm -f "$NETNS_T"/pair*.client "$NETNS_T"/pair*.server

# --- SOFTHCA_PCAP: tshark decodes every packet ------------------------------
if command -v tshark >/dev/null 2>&1; then
	PCAP=$NETNS_T/trace
	for t in "ibv_rc_pingpong -n 20 -s 4096 -m 1024" "ib_write_lat -n 20 -s 4096" \
		"ib_read_lat -n 20 -s 4096" "ib_atomic_lat -n 20"; do
		set -- $t
		prog=$1
		shift
		if [ "$prog" = ibv_rc_pingpong ]; then
			g=(-g) p=(-p $PORT)
		else
			g=(-x) p=(-p $PORT -F)
		fi
		rm -f "$PCAP".*
		NETNS_PAIR_PORT=$PORT netns_pair a b 60 \
			"$prog" -d "$DEV" "${g[@]}" "$GA" "${p[@]}" "$@" -- \
			env SOFTHCA_PCAP="$PCAP.%p" "$prog" -d "$DEV" "${g[@]}" "$GB" "${p[@]}" "$@" "$A"
		check "$prog: ran with SOFTHCA_PCAP" test $? = 0
		f=$(ls "$PCAP".* 2>/dev/null | head -1)
		check "$prog: a trace was written" test -s "${f:-/nonexistent}"
		[ -n "$f" ] || continue
		tshark -r "$f" -V >"$NETNS_T/tshark.out" 2>&1
		n=$(tshark -r "$f" 2>/dev/null | wc -l)
		nib=$(grep -c '^InfiniBand$' "$NETNS_T/tshark.out")
		check "$prog: $n frames, $nib decoded as InfiniBand" test "$n" -gt 20 -a "$nib" = "$n"
		check_not "$prog: no malformed packet" grep -q 'Malformed' "$NETNS_T/tshark.out"
		case $prog in
		ib_read_lat) check "$prog: RETH and AETH decoded" \
			grep -q 'RETH - RDMA Extended Transport Header' "$NETNS_T/tshark.out" ;;
		ib_atomic_lat) check "$prog: AtomicETH decoded" \
			grep -q 'AtomicETH' "$NETNS_T/tshark.out" ;;
		esac
		grep -q 'AETH - ACK Extended Transport Header' "$NETNS_T/tshark.out" ||
			fail "$prog: no ACK (AETH) in the trace"
	done
else
	echo "tshark is not installed: the pcap checks are skipped (scripts/install-deps.sh)"
fi

finish
