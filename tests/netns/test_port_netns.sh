#!/bin/bash
# The port follows its interface's link, as a RoCE port follows its netdev
# (rxe): in namespace b (tests/netns/lib.sh), netns_port_events
# (tests/netns/port_events.c) holds two contexts of softhca_veth0 and one
# of softhca_lo while this script
#   1. pulls b's cable (netns_link_down: veth0 up, no carrier):
#      IBV_EVENT_PORT_ERR on both contexts, PORT_DOWN, phys_state 2
#      (Polling); ibv_devinfo and `softhca devices` in b say so too;
#   2. plugs it back (netns_link_up): IBV_EVENT_PORT_ACTIVE, PORT_ACTIVE,
#      phys_state 5 (LinkUp); ibv_devinfo says PORT_ACTIVE again;
#   3. sets veth0 administratively down: PORT_ERR, phys_state 3 (Disabled);
#   4. up again: PORT_ACTIVE.
# softhca_lo hears nothing of it, nor does a's softhca_veth0 (PORT_ACTIVE
# all along).  The helper bounds each wait for an event (PORT_EVENTS_WAIT)
# and the whole run (NETNS_EXEC_TIMEOUT); this script bounds each wait for
# the helper's cue.  Bounds, not timing checks.
# Environment: SOFTHCA_BUILD (default: the source tree's build/), with the
# libraries in $SOFTHCA_BUILD/lib and the helper in $SOFTHCA_BUILD/tests.
# Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devinfo

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
TOOL=$SOFTHCA_BUILD/bin/softhca
HELPER=$SOFTHCA_BUILD/tests/netns_port_events
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -x "$TOOL" ] || { echo "FAIL: no $TOOL" >&2; exit 1; }
[ -x "$HELPER" ] || { echo "FAIL: no $HELPER (build first)" >&2; exit 1; }
# the clients must see softhca only
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS

DEV=softhca_$NETNS_IF
CUE_SECS=60                     # the longest wait for one of the helper's cues
export PORT_EVENTS_WAIT=30      # the helper's wait for one event
: "${NETNS_WATCHDOG:=540}"      # under ctest's TIMEOUT (600)

# devinfo HOST NAME: ibv_devinfo -v -d $DEV in HOST, into $NETNS_T/NAME
devinfo() {
	NETNS_EXEC_TIMEOUT=30 netns_exec "$1" ibv_devinfo -v -d "$DEV" \
		</dev/null >"$NETNS_T/$2" 2>&1
}

# port_is FILE STATE PHYS: ibv_devinfo's port 1 is STATE (PORT_ACTIVE,
# PORT_DOWN), physical state PHYS (LINK_UP, POLLING, DISABLED)
port_is() {
	grep -Eq "state:[[:space:]]+$2 " "$1" &&
		grep -Eq "phys_state:[[:space:]]+$3 " "$1"
}

show() { sed 's/^/    /' "$1" >&2; }

# try MSG CMD...: check, and CMD's status for the caller to go on or not
try() {
	local msg=$1
	shift
	if "$@"; then ok "$msg"; return 0; fi
	fail "$msg"
	return 1
}

netns_setup 2 || { fail "netns_setup 2"; finish; }
ok "namespaces a and b ($(netns_ip4 a), $(netns_ip4 b))"

devinfo b devinfo.before
try "b: ibv_devinfo: $DEV PORT_ACTIVE, LINK_UP" \
	port_is "$NETNS_T/devinfo.before" PORT_ACTIVE LINK_UP ||
	show "$NETNS_T/devinfo.before"

# the helper, in b, in the background: its output is the script's cue
OUT=$NETNS_T/helper.out
: >"$OUT"
NETNS_EXEC_TIMEOUT=300 netns_exec b "$HELPER" "$DEV" down:2 up down:3 up \
	</dev/null >"$OUT" 2>&1 &
helper=$!
NETNS_CLEANUP+=("kill $helper 2>/dev/null")

# cue LINE: wait until the helper printed LINE (true), or ended, or
# CUE_SECS passed (false)
cue() {
	local n
	for ((n = CUE_SECS * 10; n > 0; n--)); do
		grep -qx -- "$1" "$OUT" && return 0
		kill -0 "$helper" 2>/dev/null || break
		sleep 0.1
	done
	grep -qx -- "$1" "$OUT"
}

# phase_done N: wait until the helper printed "phase N done (...)" (true),
# or ended, or CUE_SECS passed (false)
phase_done() {
	local n
	for ((n = CUE_SECS * 10; n > 0; n--)); do
		grep -q "^phase $1 done " "$OUT" && return 0
		kill -0 "$helper" 2>/dev/null || break
		sleep 0.1
	done
	grep -q "^phase $1 done " "$OUT"
}

if cue ready; then
	ok "the helper opened $DEV twice and softhca_lo, port 1 active"
	# 1. the cable out
	if try "netns_link_down b" netns_link_down b &&
	   try "the helper: PORT_ERR on both contexts, PORT_DOWN/Polling" phase_done 1; then
		devinfo b devinfo.down
		try "b: ibv_devinfo: $DEV PORT_DOWN, POLLING" \
			port_is "$NETNS_T/devinfo.down" PORT_DOWN POLLING ||
			show "$NETNS_T/devinfo.down"
		NETNS_EXEC_TIMEOUT=30 netns_exec b "$TOOL" devices \
			</dev/null >"$NETNS_T/tool.down" 2>&1
		try "b: softhca devices: $DEV port 1: down" \
			eval "grep -A1 '^$DEV ' '$NETNS_T/tool.down' | grep -q 'port 1: down'"
		devinfo a devinfo.a
		try "a: ibv_devinfo: $DEV PORT_ACTIVE while b's cable is out" \
			port_is "$NETNS_T/devinfo.a" PORT_ACTIVE LINK_UP
	fi
	# 2. the cable back
	if try "netns_link_up b" netns_link_up b &&
	   try "the helper: PORT_ACTIVE on both contexts, PORT_ACTIVE/LinkUp" phase_done 2; then
		devinfo b devinfo.up
		try "b: ibv_devinfo: $DEV PORT_ACTIVE, LINK_UP again" \
			port_is "$NETNS_T/devinfo.up" PORT_ACTIVE LINK_UP ||
			show "$NETNS_T/devinfo.up"
	fi
	# 3. administratively down, 4. up
	try "b: ip link set $NETNS_IF down" \
		timeout 20 ip -n "$(netns_name b)" link set "$NETNS_IF" down &&
		try "the helper: PORT_ERR, PORT_DOWN/Disabled" phase_done 3
	try "b: ip link set $NETNS_IF up" \
		timeout 20 ip -n "$(netns_name b)" link set "$NETNS_IF" up &&
		try "the helper: PORT_ACTIVE, PORT_ACTIVE/LinkUp" phase_done 4
else
	fail "the helper did not get ready"
fi

# after a failure the helper may still wait for events that will not
# come: it goes, rather than run out its bounds
if [ "$failures" != 0 ]; then
	# shellcheck disable=SC2046  # the pids, one word each
	kill $(ip netns pids "$(netns_name b)") 2>/dev/null
fi
wait "$helper"
rc=$?
check "the helper passed every check (exit $rc)" [ "$rc" = 0 ]
check "the helper said so" grep -qx passed "$OUT"
if [ "$rc" != 0 ] || grep -q '^FAIL' "$OUT"; then
	echo "  --- helper:" >&2
	show "$OUT"
fi
finish
