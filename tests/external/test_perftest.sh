#!/bin/bash
# perftest, unmodified, over softhca_lo between two processes: the RC
# latency and bandwidth tests over all sizes (-a; atomics have one size),
# the UC, UD and XRC variants perftest offers, and its --odp.  A test that
# completes and
# reports passes; the figures are the benchmark's business (bench/).
# -F: perftest estimates the CPU's clock before its report and, when the
# estimate is noisy (r^2 < 0.9 on a loaded machine), stops with "Can't
# produce a report" and exit 1 after the traffic was done; -F lets it
# print the report anyway (its figures may then be wrong), so the pair's
# status says what softhca did, not how busy the machine was.
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ib_send_lat ib_send_bw ib_write_lat ib_write_bw ib_read_lat ib_read_bw \
	ib_atomic_lat ib_atomic_bw

pt() {
	local name=$1 prog=$2 port
	shift 2
	port=$(free_port)
	PAIR_PORT=$port pair "$name" 120 "$prog" -d softhca_lo -p "$port" -F "$@" -- \
		"$prog" -d softhca_lo -p "$port" -F "$@" 127.0.0.1 &&
		{ grep -Eq '^ *[0-9]+ +[0-9]+ ' "$T/$name.client" ||
		  fail "$name: no result line"; }
}

for p in ib_send_lat ib_send_bw ib_write_lat ib_write_bw ib_read_lat \
	 ib_read_bw; do
	pt "$p" "$p" -a -n 100
done
# perftest itself refuses -a for atomics ("Message size cannot be changed")
pt ib_atomic_lat ib_atomic_lat -n 1000
pt ib_atomic_bw ib_atomic_bw -n 1000
pt ib_send_lat-UC ib_send_lat -c UC -a -n 100
pt ib_send_bw-UC ib_send_bw -c UC -a -n 100
pt ib_write_lat-UC ib_write_lat -c UC -a -n 100
pt ib_write_bw-UC ib_write_bw -c UC -a -n 100
pt ib_send_lat-UD ib_send_lat -c UD -a -n 100
pt ib_send_bw-UD ib_send_bw -c UD -a -n 100
# XRC (docs/xrc.md): perftest's XRC_SEND and XRC_RECV QPs, its SRQ in a
# domain of a file; it sets RC's attributes on both halves, which the
# kernel's uverbs drops for XRC (qp_modify.c xrc_mask_strip)
pt ib_send_lat-XRC ib_send_lat -c XRC -n 100
pt ib_send_bw-XRC ib_send_bw -c XRC -n 100
pt ib_write_bw-XRC ib_write_bw -c XRC -n 100
pt ib_read_bw-XRC ib_read_bw -c XRC -n 100
# On-demand paging (docs/dm-odp.md): perftest registers its buffers with
# IBV_ACCESS_ON_DEMAND after checking the device's per-transport ODP
# capabilities.  (Debian's perftest 4.5 has no --use_dm.)
pt ib_send_lat-odp ib_send_lat --odp -n 100
pt ib_write_bw-odp ib_write_bw --odp -n 100
pt ib_read_bw-odp ib_read_bw --odp -n 100
finish
