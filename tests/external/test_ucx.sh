#!/bin/bash
# UCX (Debian's ucx-utils and libucx0, unmodified) over softhca, run as a
# user would, through `softhca run`: ucx_info lists rc_verbs and ud_verbs
# on every softhca device, and ucx_perftest's tag, put, get, active
# message and atomic tests pass between two processes over
# UCX_TLS=rc_verbs,ud_verbs and over ud_verbs alone, 8 B to 4 MiB.
# No UCX workaround variable is set; UCX_TLS only picks the transports,
# and each run shows (UCX_LOG_LEVEL=info, "ep_cfg") that UCX chose a
# softhca device.  ucx_perftest compares no data; tests/external/
# test_mpi.sh checks every byte of UCX's tag and RMA traffic.
#
# Usage: test_ucx.sh [quick]   (quick: 8 B only; make check runs it all)
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need ucx_info ucx_perftest ibv_devices

# (no "--" after run: pair() splits its two commands at "--")
RUN=("$TOOL" run)

# the softhca devices, as Debian's ibv_devices lists them through softhca
run devices 20 "${RUN[@]}" ibv_devices
expect_rc devices 0
mapfile -t DEVS < <(awk '$1 ~ /^softhca_/ { print $1 }' "$T/devices.out")
[ "${#DEVS[@]}" -gt 0 ] || { fail "ibv_devices lists no softhca device"; finish; }

run info 60 "${RUN[@]}" ucx_info -d
expect_rc info 0
no_loader_errors info
# "Transport: T" then "Device: D:1" lines: every device has both
awk '/Transport:/ { t = $3 } /Device:/ { print t, $3 }' "$T/info.out" \
	>"$T/info.pairs"
for d in "${DEVS[@]}"; do
	for tl in rc_verbs ud_verbs; do
		if grep -qx "$tl $d:1" "$T/info.pairs"; then
			ok "ucx_info -d: $tl on $d:1"
		else
			fail "ucx_info -d lists no $tl on $d:1"
			grep -E 'verbs' "$T/info.pairs" | head -8 | sed 's/^/    /' >&2
		fi
	done
done

# perf NAME TLS TEST SIZE ITERS: ucx_perftest server and client over
# 127.0.0.1 (the out-of-band exchange; the data goes over UCX's choice
# among TLS), both exit 0, UCX chose a softhca device for TLS
perf() {
	local name=$1 tls=$2 test=$3 size=$4 iters=$5 port
	port=$(free_port)
	if PAIR_PORT=$port pair "$name" 120 \
		env UCX_TLS="$tls" UCX_LOG_LEVEL=info \
		"${RUN[@]}" ucx_perftest -p "$port" -t "$test" -s "$size" \
		-n "$iters" -w $(( iters / 10 + 1 )) -- \
		env UCX_TLS="$tls" UCX_LOG_LEVEL=info \
		"${RUN[@]}" ucx_perftest -p "$port" -t "$test" -s "$size" \
		-n "$iters" -w $(( iters / 10 + 1 )) 127.0.0.1; then
		if grep -Eq 'ep_cfg.*(rc|ud)_verbs/softhca_[^ ]*:1' \
			"$T/$name.client" &&
		   ! grep -Eq 'ep_cfg.*(tcp|posix|sysv|cma|knem|xpmem)/' \
			"$T/$name.client"; then
			ok "$name: over softhca"
		else
			fail "$name: UCX did not say it chose a softhca device"
			grep 'ep_cfg' "$T/$name.client" | head -4 | sed 's/^/    /' >&2
		fi
		grep -E '^Final:' "$T/$name.client" | sed "s/^/  $name /"
	fi
}

SIZES=(8 65536 4194304)
[ "${1:-}" = quick ] && SIZES=(8)
iters_of() {
	case $1 in
	8) echo 2000 ;;
	65536) echo 200 ;;
	*) echo 20 ;;
	esac
}

for tls in rc_verbs,ud_verbs ud_verbs; do
	for t in tag_lat tag_bw ucp_put_lat ucp_put_bw ucp_get ucp_am_lat; do
		for s in "${SIZES[@]}"; do
			perf "$t-$s-${tls//,/+}" "$tls" "$t" "$s" "$(iters_of "$s")"
		done
	done
	for t in ucp_add ucp_fadd ucp_swap ucp_cswap; do
		perf "$t-8-${tls//,/+}" "$tls" "$t" 8 1000
	done
done
finish
