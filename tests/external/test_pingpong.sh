#!/bin/bash
# Ping-pongs between two processes on softhca_lo (the same-host path).
#
#  - shca_pingpong (tests/pingpong), softhca's own: the evidence that the
#    data move intact.  RC, UC, UD and an SRQ shared by four RC QPs; with
#    completion events (-e), the ibv_wr_* API (-N), an ibv_cq_ex with
#    completion timestamps (-t), all three at once; 1 B to 1 MiB (UD up to
#    the MTU); a long run.  Each side checks every byte of every message
#    it receives (a pattern of sender, iteration and offset, never 0 nor
#    the sentinel the slot was filled with), the bytes around it, and UD's
#    GRH; each says "shca_pingpong: ok" with its iteration count.
#  - Debian's ibv_{rc,uc,ud,srq}_pingpong, unmodified: smoke tests.  They
#    run to their end with every transport, -e, the sizes, -N and -t;
#    their -c reads one byte per page on the server only and still exits
#    0 on a wrong one, so a pair whose output says "invalid data in page"
#    fails, and that is all they say about the data.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong ibv_xsrq_pingpong ss
need tshark
PP=$SOFTHCA_BUILD/tests/shca_pingpong
[ -x "$PP" ] || { echo "FAIL: no $PP (build first)" >&2; exit 1; }

# spp NAME ARGS...: a shca_pingpong pair on softhca_lo; both sides exit 0
# and each says it checked its -n (default 1000) messages.  The server
# listens on a port the kernel picks (-p 0) and says which; its client
# starts once it did (a port picked beforehand may be taken meanwhile).
spp() {
	local name=shca-$1 n=1000 a side spid port src crc
	shift
	for a in "$@"; do
		case $a in -n) n=next ;; *) [ "$n" = next ] && n=$a ;; esac
	done
	timeout -k 5 120 "$PP" -d softhca_lo -g 0 -p 0 "$@" \
		</dev/null >"$T/$name.server" 2>&1 &
	spid=$!
	port=
	while [ -z "$port" ] && kill -0 "$spid" 2>/dev/null; do
		port=$(sed -n 's/^listening on TCP port //p' "$T/$name.server")
		[ -n "$port" ] || sleep 0.1
	done
	timeout -k 5 120 "$PP" -d softhca_lo -g 0 -p "${port:-0}" "$@" \
		127.0.0.1 </dev/null >"$T/$name.client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	if [ "$src" != 0 ] || [ "$crc" != 0 ] ||
	   grep -Eq -- "$LOADER_ERRORS" "$T/$name.server" "$T/$name.client"
	then
		fail "$name: server exit $src, client exit $crc"
		echo "  --- server:" >&2; show_output "$T/$name.server"
		echo "  --- client:" >&2; show_output "$T/$name.client"
		return 1
	fi
	ok "$name"
	for side in server client; do
		if grep -q "^shca_pingpong: ok: .*, $n iters of " \
			"$T/$name.$side"; then
			ok "$name: the $side checked its $n messages"
		else
			fail "$name: the $side did not say it checked $n messages"
			show_output "$T/$name.$side"
		fi
	done
}

# --- shca_pingpong: the data checked -------------------------------------
for t in rc uc ud srq; do
	spp "$t" -T "$t"
	spp "$t-events" -T "$t" -e
	spp "$t-new-send" -T "$t" -N
	spp "$t-timestamps" -T "$t" -t
	spp "$t-ext" -T "$t" -e -N -t
done
for s in 1 4096 65536 1048576; do
	n=200
	[ "$s" = 1048576 ] && n=50
	for t in rc uc srq; do
		spp "$t-$s" -T "$t" -s "$s" -n "$n"
	done
	spp "rc-ext-$s" -T rc -e -N -t -s "$s" -n "$n"
done
for s in 1 1024 4096; do
	spp "ud-$s" -T ud -s "$s" -n 200
	spp "ud-ext-$s" -T ud -e -N -t -s "$s" -n 200
done
spp srq-16qp -T srq -q 16 -n 500
spp rc-long -T rc -n 20000
# both_have NAME ERE: both sides' output has a line matching ERE
both_have() {
	local side
	for side in server client; do
		grep -Eq -- "$2" "$T/$1.$side" && ok "$1: $side /$2/" ||
			fail "$1: the $side's output has no /$2/"
	done
}
# -e: the side waited on the channel; -t: every completion (1000 sends,
# 1000 receives a side) had its timestamp checked
both_have shca-rc-events '^events: [1-9][0-9]* CQ events'
both_have shca-rc-timestamps '^timestamps: 2000 completions'
both_have shca-ud-ext-1024 '^timestamps: 400 completions'

# --- Debian's clients: smoke tests ----------------------------------------
pp() {
	local name=$1 prog=$2 port
	shift 2
	port=$(free_port)
	PAIR_PORT=$port pair "$name" 60 \
		"$prog" -d softhca_lo -g 0 -p "$port" "$@" -- \
		"$prog" -d softhca_lo -g 0 -p "$port" "$@" 127.0.0.1
}

for t in rc uc ud srq; do
	pp "$t" "ibv_${t}_pingpong"
	pp "$t-events" "ibv_${t}_pingpong" -e
done
for s in 1 4096 65536 1048576; do
	pp "rc-$s" ibv_rc_pingpong -s "$s" -n 200 -c
	pp "uc-$s" ibv_uc_pingpong -s "$s" -n 200 -c
	pp "srq-$s" ibv_srq_pingpong -s "$s" -n 200 -c
done
for s in 1 1024 4096; do
	pp "ud-$s" ibv_ud_pingpong -s "$s" -n 200 -c
done
pp rc-100000 ibv_rc_pingpong -n 100000
pp rc-events-sizes ibv_rc_pingpong -e -s 65536 -n 500 -c
pp rc-new-send ibv_rc_pingpong -N
pp rc-timestamps ibv_rc_pingpong -t
# on-demand paging (explicit, implicit, prefetched) and device memory
# (docs/dm-odp.md): the clients refuse to start on a device without them
pp rc-odp ibv_rc_pingpong -o -n 200 -c
pp rc-odp-implicit ibv_rc_pingpong -o -O -n 200 -c
pp rc-odp-prefetch ibv_rc_pingpong -o -P -n 200 -c
pp rc-odp-implicit-prefetch ibv_rc_pingpong -o -O -P -n 200 -c
pp rc-dm ibv_rc_pingpong -j -n 200
# XRC on the same host (docs/xrc.md): the client's XRC_SEND QPs send into
# the server's XRC SRQs through its XRC_RECV QPs, and back; each side
# prints "success" only when every message of its pass came in
pp xsrq ibv_xsrq_pingpong
# ... and on the net path (SOFTHCA_NET=1: TCP over lo, the XRCETH on the
# wire): each process's SOFTHCA_PCAP trace must hold XRC frames (BTH
# opcode 0xa0..0xbd, as tshark decodes it)
SOFTHCA_NET=1 SOFTHCA_PCAP=$T/xsrq-net.%p.pcap pp xsrq-net ibv_xsrq_pingpong
xrc_frames() {
	tshark -r "$1" -T fields -e infiniband.bth.opcode 2>/dev/null |
		awk '$1 >= 160 && $1 <= 189 { n++ } END { print n + 0 }'
}
n_traces=0
for f in "$T"/xsrq-net.*.pcap; do
	[ -e "$f" ] || continue
	n_traces=$((n_traces + 1))
	n=$(xrc_frames "$f")
	[ "$n" -gt 0 ] && ok "xsrq-net: $n XRC frames in $(basename "$f")" ||
		fail "xsrq-net: no XRC frame in $(basename "$f")"
done
[ "$n_traces" -ge 2 ] && ok "xsrq-net: $n_traces traces" ||
	fail "xsrq-net: $n_traces traces (want one per process)"
expect_out_pair() { grep -Eq -- "$2" "$T/$1.client" && ok "$1 /$2/" || fail "$1: no /$2/"; }
expect_out_pair rc-100000 '^100000 iters in'
both_have xsrq '^success$'
both_have xsrq-net '^success$'
expect_out_pair rc-timestamps 'Average receive completion clock cycles'
for t in rc-odp rc-odp-implicit rc-odp-prefetch rc-odp-implicit-prefetch \
	 rc-dm; do
	expect_out_pair "$t" '^200 iters in'
done
finish
