#!/bin/bash
# softhca inside network namespaces ("hosts", tests/netns/lib.sh):
#  - in each namespace, `softhca devices` and Debian's ibv_devices and
#    ibv_devinfo list softhca_lo and softhca_veth0 and nothing else, with
#    that namespace's own addresses as GIDs (::ffff:10.231.X.i and
#    fd00:5348:X::i), every port PORT_ACTIVE;
#  - two processes in the SAME namespace run shca_pingpong (tests/pingpong:
#    every byte checked on both sides) over the namespace's veth address
#    and veth GIDs (the same-host path), IPv4 and IPv6; Debian's
#    ibv_rc_pingpong too, as a smoke test;
#  - the same between two DIFFERENT namespaces (the net path).
# Environment: SOFTHCA_BUILD (default: the source tree's build/), the
# libraries in $SOFTHCA_BUILD/lib, the tool $SOFTHCA_BUILD/bin/softhca.
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devices ibv_devinfo ibv_rc_pingpong

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
TOOL=$SOFTHCA_BUILD/bin/softhca
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -x "$TOOL" ] || { echo "FAIL: no $TOOL" >&2; exit 1; }
PP=$SOFTHCA_BUILD/tests/shca_pingpong
[ -x "$PP" ] || { echo "FAIL: no $PP (build first)" >&2; exit 1; }
# the clients must see softhca only
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS
LOADER_ERRORS='no version information available|symbol lookup error|undefined symbol|error while loading shared libraries'

DEV=softhca_$NETNS_IF
PORT=18515                      # ibv_rc_pingpong's own exchange; the
                                # namespaces are ours, nothing else listens

rc=0
# nsrun NAME HOST SECONDS CMD...: CMD in HOST; output in $NETNS_T/NAME.out
# (stdout) and .err, exit status in $rc.
nsrun() {
	local name=$1 host=$2 secs=$3
	shift 3
	NETNS_EXEC_TIMEOUT=$secs netns_exec "$host" "$@" \
		</dev/null >"$NETNS_T/$name.out" 2>"$NETNS_T/$name.err"
	rc=$?
}

show() {
	echo "  --- stdout of $1:" >&2
	head -40 "$NETNS_T/$1.out" | sed 's/^/    /' >&2
	echo "  --- stderr of $1:" >&2
	head -20 "$NETNS_T/$1.err" | sed 's/^/    /' >&2
}

# expect0 NAME MSG: nsrun NAME exited 0, with nothing from the loader
expect0() {
	if [ "$rc" = 0 ]; then ok "$2: exit 0"; else fail "$2: exit $rc"; show "$1"; fi
	check "$2: no loader errors" not_grep "$LOADER_ERRORS" "$NETNS_T/$1.err"
}

not_grep() { ! grep -Eq -- "$1" "$2"; }

# block FILE START_ERE NEXT_ERE: the lines from the one matching START to
# the next matching NEXT (excluded)
block() {
	awk -v s="$2" -v n="$3" '
		$0 ~ s { inb = 1; print; next }
		inb && $0 ~ n { inb = 0 }
		inb { print }' "$1"
}

re() { printf '%s' "$1" | sed 's/[.[\*^$]/\\&/g'; }

# --- devices, in every namespace ------------------------------------------
netns_setup 2 || { fail "netns_setup 2"; finish; }
ok "namespaces ${NETNS_HOSTS[*]} (10.231.$NETNS_X.0/24, fd00:5348:$NETNS_X::/64)"

for h in a b; do
	v4=$(netns_ip4 "$h") v6=$(netns_ip6 "$h")
	o=b; [ "$h" = b ] && o=a
	o4=$(netns_ip4 "$o") o6=$(netns_ip6 "$o")

	# softhca devices
	nsrun "$h-tool" "$h" 30 "$TOOL" devices
	expect0 "$h-tool" "$h: softhca devices"
	f=$NETNS_T/$h-tool.out
	devs=$(awk '/^softhca_/ { print $1 }' "$f" | sort | tr '\n' ' ')
	check "$h: softhca devices lists softhca_lo and $DEV only: $devs" \
		[ "$devs" = "softhca_lo $DEV " ]
	block "$f" "^$DEV " '^[^ ]' >"$NETNS_T/$h-tool.veth"
	block "$f" '^softhca_lo ' '^[^ ]' >"$NETNS_T/$h-tool.lo"
	check "$h: softhca devices: $DEV port 1 active" \
		grep -q 'port 1: active' "$NETNS_T/$h-tool.veth"
	check "$h: softhca devices: $DEV GID $v4" \
		grep -Eq "GID\[ *[0-9]+\] $(re "$v4") " "$NETNS_T/$h-tool.veth"
	check "$h: softhca devices: $DEV GID $v6" \
		grep -Eq "GID\[ *[0-9]+\] $(re "$v6") " "$NETNS_T/$h-tool.veth"
	check "$h: softhca devices: softhca_lo port 1 active, GIDs 127.0.0.1 and ::1" \
		eval "grep -q 'port 1: active' $NETNS_T/$h-tool.lo &&
		      grep -Eq 'GID\[ *[0-9]+\] 127\.0\.0\.1 ' $NETNS_T/$h-tool.lo &&
		      grep -Eq 'GID\[ *[0-9]+\] ::1 ' $NETNS_T/$h-tool.lo"
	check_not "$h: softhca devices: not $o's addresses" \
		grep -Eq "$(re "$o4") |$(re "$o6") " "$f"

	# ibv_devices
	nsrun "$h-devices" "$h" 30 ibv_devices
	expect0 "$h-devices" "$h: ibv_devices"
	devs=$(awk 'NR > 2 { print $1 }' "$NETNS_T/$h-devices.out" | sort | tr '\n' ' ')
	check "$h: ibv_devices lists softhca_lo and $DEV only: $devs" \
		[ "$devs" = "softhca_lo $DEV " ]

	# ibv_devinfo -v
	nsrun "$h-devinfo" "$h" 30 ibv_devinfo -v
	expect0 "$h-devinfo" "$h: ibv_devinfo -v"
	f=$NETNS_T/$h-devinfo.out
	devs=$(awk '/^hca_id:/ { print $2 }' "$f" | sort | tr '\n' ' ')
	check "$h: ibv_devinfo lists softhca_lo and $DEV only: $devs" \
		[ "$devs" = "softhca_lo $DEV " ]
	block "$f" "^hca_id:[[:space:]]+$DEV\$" '^hca_id:' >"$NETNS_T/$h-devinfo.veth"
	block "$f" '^hca_id:[[:space:]]+softhca_lo$' '^hca_id:' >"$NETNS_T/$h-devinfo.lo"
	check "$h: ibv_devinfo: $DEV PORT_ACTIVE" \
		grep -Eq 'state:[[:space:]]+PORT_ACTIVE' "$NETNS_T/$h-devinfo.veth"
	check "$h: ibv_devinfo: $DEV GID ::ffff:$v4, RoCE v2" \
		grep -Eq "GID\[ *[0-9]+\]:[[:space:]]+::ffff:$(re "$v4"), RoCE v2" "$NETNS_T/$h-devinfo.veth"
	check "$h: ibv_devinfo: $DEV GID $v6, RoCE v2" \
		grep -Eq "GID\[ *[0-9]+\]:[[:space:]]+$(re "$v6"), RoCE v2" "$NETNS_T/$h-devinfo.veth"
	check "$h: ibv_devinfo: softhca_lo PORT_ACTIVE" \
		grep -Eq 'state:[[:space:]]+PORT_ACTIVE' "$NETNS_T/$h-devinfo.lo"
	check "$h: ibv_devinfo: softhca_lo GID ::ffff:127.0.0.1" \
		grep -Eq 'GID\[ *[0-9]+\]:[[:space:]]+::ffff:127\.0\.0\.1, RoCE v2' "$NETNS_T/$h-devinfo.lo"
	check_not "$h: ibv_devinfo: not $o's addresses" \
		grep -Eq "::ffff:$(re "$o4"),|[[:space:]]$(re "$o6")," "$f"
done

# gid_index HOST ADDR: the index of GID ADDR in HOST's softhca_veth0
gid_index() {
	sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+$(re "$2"), RoCE v2\$/\1/p" \
		"$NETNS_T/$1-devinfo.veth" | head -1
}
ga4=$(gid_index a "::ffff:$(netns_ip4 a)")
ga6=$(gid_index a "$(netns_ip6 a)")
gb4=$(gid_index b "::ffff:$(netns_ip4 b)")
have_gids() { [ -n "$ga4" ] && [ -n "$ga6" ] && [ -n "$gb4" ]; }
check "GID indexes of the veth addresses: a IPv4 '$ga4', a IPv6 '$ga6', b IPv4 '$gb4'" have_gids
: "${ga4:=0}" "${ga6:=1}" "${gb4:=0}"

# --- the same namespace: two processes, the veth address and GID ----------
# pp PROG SERVER_HOST CLIENT_HOST SERVER_GID CLIENT_GID SERVER_ADDR [ARGS]:
# a PROG pair (netns_pair), PROG shca_pingpong or ibv_rc_pingpong
pp() {
	local prog=$1 sh=$2 ch=$3 sg=$4 cg=$5 addr=$6
	shift 6
	NETNS_PAIR_PORT=$PORT netns_pair "$sh" "$ch" 60 \
		"$prog" -d "$DEV" -g "$sg" -p "$PORT" "$@" -- \
		"$prog" -d "$DEV" -g "$cg" -p "$PORT" "$@" "$addr"
}

# both_say N: each side of the last pair said it did N iterations
# (shca_pingpong: and checked every byte of what it received)
both_say() {
	grep -q "^shca_pingpong: ok: .*, $1 iters of " "$NETNS_PAIR_CLIENT_OUT" &&
		grep -q "^shca_pingpong: ok: .*, $1 iters of " "$NETNS_PAIR_SERVER_OUT"
}

# uses_gid GID: both sides of the last pair named GID as their peer's
uses_gid() {
	grep -q "remote address: .*GID $1\$" "$NETNS_PAIR_CLIENT_OUT" &&
		grep -q "remote address: .*GID $1\$" "$NETNS_PAIR_SERVER_OUT"
}

for h in a b; do
	g=$ga4; [ "$h" = b ] && g=$gb4
	v4=$(netns_ip4 "$h")
	if pp "$PP" "$h" "$h" "$g" "$g" "$v4" -n 200 -s 4096 -e -N -t; then
		ok "$h: shca_pingpong -g $g, two processes in $h over $v4"
		check "$h: the pair used the veth GID ::ffff:$v4" uses_gid "::ffff:$v4"
		check "$h: 200 iters, every byte checked on both sides" both_say 200
	else
		fail "$h: shca_pingpong -g $g, two processes in $h over $v4"
	fi
	if pp "$PP" "$h" "$h" "$g" "$g" "$v4" -T ud -n 200 -s 1024; then
		ok "$h: shca_pingpong UD -g $g, two processes in $h"
		check "$h: UD: 200 iters, every byte (and the GRH) checked" both_say 200
	else
		fail "$h: shca_pingpong UD -g $g, two processes in $h"
	fi
	# Debian's, a smoke test (-c: one byte a page, on the server)
	if pp ibv_rc_pingpong "$h" "$h" "$g" "$g" "$v4" -n 200 -s 4096 -c; then
		ok "$h: ibv_rc_pingpong -g $g, two processes in $h over $v4"
		check "$h: ibv_rc_pingpong used the veth GID ::ffff:$v4" uses_gid "::ffff:$v4"
		check "$h: ibv_rc_pingpong: 200 iters done" grep -q '^200 iters in' "$NETNS_PAIR_CLIENT_OUT"
		check "$h: no loader errors" not_grep "$LOADER_ERRORS" "$NETNS_PAIR_CLIENT_OUT"
	else
		fail "$h: ibv_rc_pingpong -g $g, two processes in $h over $v4"
	fi
done
# the IPv6 GID too (the pair's own TCP exchange stays on IPv4)
if pp "$PP" a a "$ga6" "$ga6" "$(netns_ip4 a)" -n 200; then
	ok "a: shca_pingpong -g $ga6 (GID $(netns_ip6 a)), two processes in a"
	check "a: the pair used the veth GID $(netns_ip6 a)" uses_gid "$(netns_ip6 a)"
	check "a: IPv6 GID: 200 iters, every byte checked on both sides" both_say 200
else
	fail "a: shca_pingpong -g $ga6 (GID $(netns_ip6 a)), two processes in a"
fi

# --- two namespaces -------------------------------------------------------
# Server in a, client in b, each on its own veth IPv4 GID: the net path.
if pp "$PP" a b "$ga4" "$gb4" "$(netns_ip4 a)" -n 200 -s 4096 -e -N -t; then
	ok "a <-> b: shca_pingpong between two namespaces"
	check "a <-> b: 200 iters, every byte checked on both sides" both_say 200
	check "a <-> b: the client's peer is a's GID" \
		grep -q "remote address: .*GID ::ffff:$(netns_ip4 a)\$" "$NETNS_PAIR_CLIENT_OUT"
else
	fail "a <-> b: shca_pingpong between two namespaces"
fi
if pp ibv_rc_pingpong a b "$ga4" "$gb4" "$(netns_ip4 a)" -n 200 -s 4096 -c; then
	ok "a <-> b: ibv_rc_pingpong between two namespaces"
	check "a <-> b: ibv_rc_pingpong: 200 iters done" grep -q '^200 iters in' "$NETNS_PAIR_CLIENT_OUT"
else
	fail "a <-> b: ibv_rc_pingpong between two namespaces"
fi

finish
