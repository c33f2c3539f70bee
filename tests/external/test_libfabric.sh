#!/bin/bash
# libfabric's verbs provider (Debian's libfabric-bin 1.17, unmodified) over
# softhca's libibverbs and librdmacm, on this host:
#  - fi_info with no address lists, as on hardware, FI_EP_MSG (and RDM over
#    ofi_rxm) for the device of every non-loopback interface with an
#    address, and FI_EP_DGRAM for every device.  libfabric itself leaves
#    loopback interfaces out of MSG (vrb_getifaddrs skips IFF_LOOPBACK):
#    softhca_lo has DGRAM only.  This needs librdmacm's kernel behaviour:
#    libfabric binds "localhost" and expects no device on id->verbs.
#  - fi_pingpong, default sizes and iterations, data checked (-c): MSG
#    (verbs), RDM (verbs;ofi_rxm, with its shared receive context) and
#    DGRAM (verbs).  MSG and RDM need a
#    non-loopback address (skipped with a note without one); the server
#    and client pick their domain themselves, the client names 127.0.0.1
#    for fi_pingpong's own TCP exchange only.
#  - fi_pingpong's -c can fail: a -c server facing a client that sends
#    unpatterned data (no -c) stops with "Error at iteration" (exit 255).
# shellcheck source=tests/external/lib.sh
. "$(dirname "$0")/lib.sh"
need fi_info fi_pingpong ss
unset FI_PROVIDER FI_VERBS_IFACE FI_VERBS_DEVICE_NAME

# the non-loopback interfaces that are up with an IPv4 address, and the
# first one's address
IFS=$'\n' read -r -d '' -a IFACES < <(ip -4 -o addr show up scope global \
	2>/dev/null | awk '{print $2}' | sort -u)
first=$(ip -4 -o addr show up scope global 2>/dev/null |
	awk '{sub(/\/.*/, "", $4); print $2, $4; exit}')
ip4=${first#* } if4=${first% *}

# domains NAME: "domain type" pairs of the fi_info listing in $T/NAME.out
domains() {
	awk '/^ *domain:/ { d = $2 } /^ *type:/ { print d, $2 }' "$T/$1.out" |
		sort -u
}

# has NAME "DOMAIN TYPE": the listing of NAME holds that pair
has() {
	if domains "$1" | grep -Fxq -- "$2"; then ok "$1 lists $2"; else
		fail "$1 does not list '$2'"
		domains "$1" | sed 's/^/    /' >&2
	fi
}

hasnt() {
	if domains "$1" | grep -Fxq -- "$2"; then
		fail "$1 lists '$2'"
	else
		ok "$1 does not list $2"
	fi
}

run fi_info 30 fi_info -p verbs
expect_rc fi_info 0
no_loader_errors fi_info
has fi_info "softhca_lo-dgram FI_EP_DGRAM"
hasnt fi_info "softhca_lo FI_EP_MSG"
for ifname in "${IFACES[@]}"; do
	has fi_info "softhca_$ifname FI_EP_MSG"
	has fi_info "softhca_$ifname-dgram FI_EP_DGRAM"
done

run fi_info_rxm 30 fi_info -p 'verbs;ofi_rxm'
if [ -n "$ip4" ]; then
	expect_rc fi_info_rxm 0
	for ifname in "${IFACES[@]}"; do
		has fi_info_rxm "softhca_$ifname FI_EP_RDM"
	done
	# an address names its own device
	run fi_info_msg 30 fi_info -p verbs -t FI_EP_MSG -n "$ip4"
	expect_rc fi_info_msg 0
	has fi_info_msg "softhca_$if4 FI_EP_MSG"
else
	# libfabric's own rule: no MSG on a loopback interface
	expect_rc fi_info_rxm 61
	echo "SKIP: no non-loopback IPv4 address: no MSG/RDM to list"
fi

# pingpong NAME SECONDS SERVER_ARGS -- CLIENT_ARGS: fi_pingpong's server,
# then, once it listens on its control port, its client toward 127.0.0.1.
# Outputs in $T/NAME.server and $T/NAME.client, exit statuses in $src and
# $crc.  The client is stopped when the server has failed.
pingpong() {
	local name=$1 secs=$2 srv=() cli=() spid cpid
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	port=$(free_port)
	timeout -k 5 "$secs" fi_pingpong -B "$port" "${srv[@]}" </dev/null \
		>"$T/$name.server" 2>&1 &
	spid=$!
	for _ in $(seq 100); do
		ss -Hltn "sport = :$port" | grep -q . && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	timeout -k 5 "$secs" fi_pingpong -P "$port" "${cli[@]}" 127.0.0.1 \
		</dev/null >"$T/$name.client" 2>&1 &
	cpid=$!
	wait "$spid"
	src=$?
	# a client left alone by a server that failed waits for a message
	# forever, as on hardware: the pair failed, the client is stopped.
	# Otherwise it ends by itself, bounded by its SECONDS only (no
	# "within 5 s after the server" threshold).
	[ "$src" = 0 ] || kill "$cpid" 2>/dev/null
	wait "$cpid"
	crc=$?
}

# pingpong_ok NAME: both exited 0, and every size the client ran was
# acknowledged in full ("#sent =#ack"), at least the 64-byte one
pingpong_ok() {
	local rows bad
	rows=$(grep -cE '^[0-9]+[kmg]? +[0-9]+ +=' "$T/$1.client")
	bad=$(grep -E '^[0-9]+[kmg]? +[0-9]+ +=' "$T/$1.client" |
		awk '$2 != substr($3, 2)' | wc -l)
	if [ "$src" = 0 ] && [ "$crc" = 0 ] && [ "$rows" -gt 0 ] &&
	   [ "$bad" = 0 ] && grep -qE '^64 +[0-9]+ +=' "$T/$1.client" &&
	   ! grep -Eq -- "$LOADER_ERRORS" "$T/$1.server" "$T/$1.client"; then
		ok "$1: $rows sizes, data checked"
		return
	fi
	fail "$1: server exit $src, client exit $crc, $rows sizes ($bad short)"
	# every line but the table's rows: what went wrong, and where
	# (a backtrace's lines come out before the table, which stdout
	# buffers to the end)
	echo "  --- server:" >&2
	grep -vE '^[0-9]+[kmg]? +[0-9]+ +=' "$T/$1.server" | head -40 |
		sed 's/^/    /' >&2
	echo "  --- client:" >&2
	grep -vE '^[0-9]+[kmg]? +[0-9]+ +=' "$T/$1.client" | head -40 |
		sed 's/^/    /' >&2
}

pingpong dgram 120 -p verbs -e dgram -c -- -p verbs -e dgram -c
pingpong_ok dgram

if [ -n "$ip4" ]; then
	pingpong msg 120 -p verbs -e msg -c -- -p verbs -e msg -c
	pingpong_ok msg
	# rxm with a shared receive context (FI_OFI_RXM_USE_SRX=1): without
	# one, libfabric 1.17's rxm can crash at fi_pingpong's end, a race
	# of its own (docs/librdmacm-loopback.md, "a peer that leaves")
	FI_OFI_RXM_USE_SRX=1 pingpong rdm 120 -p 'verbs;ofi_rxm' -e rdm \
		-c -- -p 'verbs;ofi_rxm' -e rdm -c
	pingpong_ok rdm
	corrupt=(-p verbs -e msg)
else
	echo "SKIP: no non-loopback IPv4 address: MSG and RDM (verbs;ofi_rxm) not run"
	corrupt=(-p verbs -e dgram)
fi

# The check can fail: the client sends what its buffer holds, not the -c
# pattern, and the -c server says so at the first message.
pingpong corrupt 60 "${corrupt[@]}" -c -- "${corrupt[@]}"
if [ "$src" = 255 ] && grep -q '^Error at iteration=' "$T/corrupt.server"; then
	ok "fi_pingpong -c fails on data that is not its pattern"
else
	fail "fi_pingpong -c: server exit $src on unpatterned data"
	tail -5 "$T/corrupt.server" | sed 's/^/    /' >&2
fi
finish
