#!/bin/bash
# Debian's ibverbs-utils ping-pongs, unmodified, between two processes on
# softhca_lo: every transport, events, sizes from 1 B to 1 MiB (UD up to
# the MTU), a long run, the new post-send API (-N) and the extended CQ
# with timestamps (-t).  The clients check the data themselves (-c).
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong

pp() {
	local name=$1 prog=$2 port
	shift 2
	port=$(free_port)
	pair "$name" 60 "$prog" -d softhca_lo -g 0 -p "$port" "$@" -- \
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
expect_out_pair() { grep -Eq -- "$2" "$T/$1.client" && ok "$1 /$2/" || fail "$1: no /$2/"; }
expect_out_pair rc-100000 '^100000 iters in'
expect_out_pair rc-timestamps 'Average receive completion clock cycles'
finish
