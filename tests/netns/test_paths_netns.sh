#!/bin/bash
# Discovery by path follows the network namespace and its interfaces as
# they are at each look (docs/discovery.md).  In a namespace of its own
# with lo and veth0 ("host" a, tests/netns/lib.sh), under the path shim:
#  - /sys/class/infiniband lists softhca_lo and softhca_veth0, nothing of
#    the root namespace, as ibv_devices does there; /dev/infiniband and
#    /sys/class/infiniband_verbs hold uverbs<ifindex> of these two;
#  - softhca_veth0's GID 0 is a's IPv4 address, on veth0, RoCE v2, and
#    device/net/ lists veth0;
#  - an interface given an address appears (softhca_vx0), its port DOWN
#    and Polling without carrier, ACTIVE and LinkUp once its peer is up,
#    and it disappears when the interface goes down (the list is then
#    ibv_devices' again);
#  - the root namespace's view does not list softhca_veth0.
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devices

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
SHIM=$LIB/libsofthca_path.so
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$SHIM" ] || { echo "FAIL: no $SHIM" >&2; exit 1; }
# as under `softhca run`
export LD_LIBRARY_PATH=$LIB LD_PRELOAD=$SHIM
unset RDMAV_DRIVERS IBV_DRIVERS

DEV=softhca_$NETNS_IF
S=/sys/class/infiniband

# nsx HOST CMD...: CMD's stdout (stderr to $NETNS_T/err)
nsx() {
	local h=$1
	shift
	NETNS_EXEC_TIMEOUT=30 netns_exec "$h" "$@" </dev/null 2>>"$NETNS_T/err"
}
# words CMD...: CMD's output as one line of sorted words
words() { "$@" | tr -s ' \n' '\n' | sed '/^$/d' | sort | tr '\n' ' '; }
# expect_eq MSG GOT WANT
expect_eq() {
	if [ "$2" = "$3" ]; then ok "$1: $2"; else fail "$1: '$2', expected '$3'"; fi
}

netns_setup 1 || { fail "netns_setup 1"; finish; }
ok "namespace ${NETNS_HOSTS[0]} (10.231.$NETNS_X.0/24)"
a=a

# --- the namespace's devices, not the root namespace's
expect_eq "a: ls $S" "$(words nsx $a ls $S)" "softhca_lo $DEV "
expect_eq "a: ibv_devices agrees" \
	"$(nsx $a ibv_devices | awk 'NR > 2 && NF {print $1}' | sort | tr '\n' ' ')" \
	"softhca_lo $DEV "
idx_lo=$(nsx $a cat /sys/class/net/lo/ifindex)
idx_veth=$(nsx $a cat "/sys/class/net/$NETNS_IF/ifindex")
expect_eq "a: ls /dev/infiniband" "$(words nsx $a ls /dev/infiniband)" \
	"$(printf 'uverbs%s\n' "$idx_lo" "$idx_veth" | sort | tr '\n' ' ')"
expect_eq "a: ls /sys/class/infiniband_verbs" \
	"$(words nsx $a ls /sys/class/infiniband_verbs)" \
	"$(printf '%s\n' abi_version "uverbs$idx_lo" "uverbs$idx_veth" | sort | tr '\n' ' ')"
expect_eq "a: uverbs$idx_veth is $DEV" \
	"$(nsx $a cat "/sys/class/infiniband_verbs/uverbs$idx_veth/ibdev")" "$DEV"
check "a: /dev/infiniband/uverbs$idx_veth is a character device" \
	nsx $a /usr/bin/test -c "/dev/infiniband/uverbs$idx_veth"

v4=$(netns_ip4 $a)
want=$(/usr/bin/python3 -c 'import ipaddress, sys
print(ipaddress.IPv6Address("::ffff:" + sys.argv[1]).exploded)' "$v4")
expect_eq "a: $DEV GID 0 (a's $v4)" "$(nsx $a cat "$S/$DEV/ports/1/gids/0")" "$want"
expect_eq "a: $DEV GID 0 on" "$(nsx $a cat "$S/$DEV/ports/1/gid_attrs/ndevs/0")" "$NETNS_IF"
expect_eq "a: $DEV GID 0 type" "$(nsx $a cat "$S/$DEV/ports/1/gid_attrs/types/0")" "RoCE v2"
expect_eq "a: $DEV device/net/" "$(nsx $a ls "$S/$DEV/device/net/")" "$NETNS_IF"
expect_eq "a: $DEV port" "$(nsx $a cat "$S/$DEV/ports/1/state")" "4: ACTIVE"

# --- the root namespace's view is its own
root=$(words ls $S)
case " $root" in
*" $DEV "*) [ -e "/sys/class/net/$NETNS_IF" ] &&
		ok "the root namespace has a $NETNS_IF of its own" ||
		fail "the root namespace's view lists $DEV: $root" ;;
*) ok "the root namespace's view: $root" ;;
esac

# --- interfaces as they are now: a veth pair inside a, one end addressed
nsx $a ip link add vx0 type veth peer name vx1
nsx $a ip addr add "10.232.$NETNS_X.1/24" dev vx0
nsx $a ip link set vx0 up        # vx1 down: no carrier
expect_eq "a: vx0 up with an address: ls $S" "$(words nsx $a ls $S)" \
	"softhca_lo $DEV softhca_vx0 "
expect_eq "a: softhca_vx0 without carrier" \
	"$(nsx $a cat "$S/softhca_vx0/ports/1/state" "$S/softhca_vx0/ports/1/phys_state" | tr '\n' '|')" \
	"1: DOWN|2: Polling|"
nsx $a ip link set vx1 up
good=0
for _ in $(seq 50); do           # the peer's carrier comes within ms
	st=$(nsx $a cat "$S/softhca_vx0/ports/1/state" "$S/softhca_vx0/ports/1/phys_state" | tr '\n' '|')
	[ "$st" = "4: ACTIVE|5: LinkUp|" ] && { good=1; break; }
	sleep 0.1
done
[ $good = 1 ] && ok "a: softhca_vx0 with carrier: $st" ||
	fail "a: softhca_vx0 with carrier: '$st', expected 4: ACTIVE|5: LinkUp|"
expect_eq "a: softhca_vx0 GID 0 on" \
	"$(nsx $a cat "$S/softhca_vx0/ports/1/gid_attrs/ndevs/0")" vx0
nsx $a ip link set vx0 down
# (vx1, up, has an IPv6 link-local address now: softhca_vx1 is listed)
expect_eq "a: vx0 down: ls $S as ibv_devices" "$(words nsx $a ls $S)" \
	"$(nsx $a ibv_devices | awk 'NR > 2 && NF {print $1}' | sort | tr '\n' ' ')"
check_not "a: vx0 down: $S/softhca_vx0 is gone" \
	nsx $a /usr/bin/test -e "$S/softhca_vx0"
nsx $a ip link del vx0

if grep -Eq 'cannot be preloaded|ld\.so' "$NETNS_T/err"; then
	fail "the loader complained:"
	grep -E 'cannot be preloaded|ld\.so' "$NETNS_T/err" | head -3 >&2
fi
finish
