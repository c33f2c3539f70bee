#!/bin/bash
# libfabric between hosts: Debian's libfabric-bin 1.17 (verbs provider),
# unmodified, between two network namespaces ("hosts" a and b,
# tests/netns/lib.sh), over softhca's net path.
#  - fi_info in a, with no address: MSG and RDM (verbs;ofi_rxm) on
#    softhca_veth0, DGRAM on softhca_veth0 first, then softhca_lo; no MSG
#    on softhca_lo (libfabric leaves loopback interfaces out of MSG).
#  - fi_pingpong, server in a, client in b naming a's veth address for
#    fi_pingpong's own TCP exchange; default sizes and iterations, the data
#    checked (-c): MSG (verbs), RDM (verbs;ofi_rxm), DGRAM (verbs), and
#    RDM over ofi_rxd (UD).  The client's SOFTHCA_PCAP trace shows the
#    messages took softhca's net path.
# Environment: SOFTHCA_BUILD (default: the source tree's build/), the
# libraries in $SOFTHCA_BUILD/lib.  Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need fi_info fi_pingpong

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }
# the clients must see softhca only, and pick their domains themselves
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS FI_PROVIDER FI_VERBS_IFACE \
	FI_VERBS_DEVICE_NAME
LOADER_ERRORS='no version information available|symbol lookup error|undefined symbol|error while loading shared libraries'
DEV=softhca_$NETNS_IF
PY=/usr/bin/python3

# under ctest's TIMEOUT (600, tests/CMakeLists.txt)
: "${NETNS_WATCHDOG:=540}"
netns_setup 2 || { fail "netns_setup 2"; finish; }
A4=$(netns_ip4 a)
ok "namespaces a ($A4) and b ($(netns_ip4 b))"

# --- fi_info ------------------------------------------------------------
# "domain type" pairs of a listing, in its order
pairs() { awk '/^ *domain:/ { d = $2 } /^ *type:/ { print d, $2 }' "$1"; }
listing() { grep -Fxq -- "$2" <(pairs "$1"); }

info=$NETNS_T/fi_info
NETNS_EXEC_TIMEOUT=30 netns_exec a fi_info -p verbs >"$info" 2>&1
check "fi_info in a lists $DEV FI_EP_MSG" listing "$info" "$DEV FI_EP_MSG"
check "fi_info in a lists $DEV-dgram FI_EP_DGRAM" \
	listing "$info" "$DEV-dgram FI_EP_DGRAM"
check "fi_info in a lists softhca_lo-dgram FI_EP_DGRAM" \
	listing "$info" "softhca_lo-dgram FI_EP_DGRAM"
check_not "fi_info in a lists no softhca_lo FI_EP_MSG" \
	listing "$info" "softhca_lo FI_EP_MSG"
first_dgram=$(pairs "$info" | awk '$2 == "FI_EP_DGRAM" { print $1; exit }')
check "the first DGRAM domain is $DEV-dgram ($first_dgram)" \
	[ "$first_dgram" = "$DEV-dgram" ]
NETNS_EXEC_TIMEOUT=30 netns_exec a fi_info -p 'verbs;ofi_rxm' >"$info.rxm" 2>&1
check "fi_info -p 'verbs;ofi_rxm' in a lists $DEV FI_EP_RDM" \
	listing "$info.rxm" "$DEV FI_EP_RDM"

# --- fi_pingpong ----------------------------------------------------------
# packets NAME: the RoCE v2 frames in the client's pcap traces of case NAME
packets() {
	cat "$NETNS_T/$1".*.pcap 2>/dev/null | "$PY" -c '
import struct, sys
d = sys.stdin.buffer.read()
n, off = 0, 24
while len(d) >= off + 16:
    off += 16 + struct.unpack_from("<I", d, off + 8)[0]
    n += 1
print(n)'
}

# pp NAME PORT PROVIDER EP: server in a, client in b toward a; both exit
# 0, every size was acknowledged in full ("#sent =#ack", the 64-byte one
# at least), the data checked by fi_pingpong (-c), and the client's
# messages went over softhca's net path (its pcap trace)
pp() {
	local name=$1 port=$2 prov=$3 ep=$4 out rows bad n
	NETNS_PAIR_PORT=$port netns_pair a b 120 \
		fi_pingpong -p "$prov" -e "$ep" -c -B "$port" -- \
		env SOFTHCA_PCAP="$NETNS_T/$name.%p.pcap" \
		fi_pingpong -p "$prov" -e "$ep" -c -P "$port" "$A4"
	out=$NETNS_PAIR_CLIENT_OUT
	rows=$(grep -cE '^[0-9]+[kmg]? +[0-9]+ +=' "$out")
	bad=$(grep -E '^[0-9]+[kmg]? +[0-9]+ +=' "$out" |
		awk '$2 != substr($3, 2)' | wc -l)
	n=$(packets "$name")
	if [ "$NETNS_PAIR_SERVER_RC" = 0 ] && [ "$NETNS_PAIR_CLIENT_RC" = 0 ] &&
	   [ "$rows" -gt 0 ] && [ "$bad" = 0 ] &&
	   grep -qE '^64 +[0-9]+ +=' "$out" && [ "${n:-0}" -gt 0 ] &&
	   ! grep -Eq -- "$LOADER_ERRORS" "$NETNS_PAIR_SERVER_OUT" "$out"; then
		ok "$name: b -> a, $rows sizes, data checked, $n packets on the net path"
		return
	fi
	fail "$name: server exit $NETNS_PAIR_SERVER_RC, client exit" \
		"$NETNS_PAIR_CLIENT_RC, $rows sizes ($bad short), ${n:-0} packets"
	tail -5 "$NETNS_PAIR_SERVER_OUT" "$out" | sed 's/^/    /' >&2
}

pp msg 33101 verbs msg
pp rdm-rxm 33102 'verbs;ofi_rxm' rdm
pp dgram 33103 verbs dgram
pp rdm-rxd 33104 'verbs;ofi_rxd' rdm
finish
