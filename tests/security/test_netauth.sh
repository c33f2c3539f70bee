#!/bin/bash
# Net admission on one host (issue 11, docs/security.md "Net admission"):
# a legitimate RC pair over the net path on softhca_lo (SOFTHCA_NET=1),
# and a stranger with a plain Python socket on the same host, knowing the
# victim's QPN, R_Key, address and expected PSN, tries to write, read,
# read from the duplicate window, probe PSNs through NAKs, claim the
# peer's slot, pass as itself, and reach an address the victim does not
# use (tests/security/netauth_attack.py says how).  Then the same with
# SOFTHCA_NET_SECRET on both ends, and a client with the wrong secret.
# Nothing may come back, the victim's memory and QP stay as they were,
# the pair keeps working, and `softhca stat` counts the attempts.
# Environment: SOFTHCA_BUILD (default: build/), SOFTHCA_PORT_BASE.
set -u
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=${SOFTHCA_BUILD:-$SRC/build}
BUILD=$(cd "$BUILD" && pwd) || { echo "FAIL: no build directory"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
[ -x "$BUILD/tests/netauth_peer" ] || { echo "FAIL: no netauth_peer"; exit 1; }
if ! LD_LIBRARY_PATH=$BUILD/lib "$BUILD/bin/softhca" devices 2>/dev/null |
	grep -q softhca_lo; then
	echo "SKIP: no softhca_lo (the loopback interface has no address)"
	exit 77
fi
BASE=${SOFTHCA_PORT_BASE:-24000}
export SOFTHCA_PORT_BASE=$BASE
# an address of lo the device has no GID for, and the host's others that
# the victim (on softhca_lo only) does not use
UNUSED=127.0.0.2
for ip in $(ip -4 -o addr show scope global 2>/dev/null |
	awk '{ sub("/.*", "", $4); print $4 }' | head -3); do
	UNUSED="$UNUSED,$ip"
done
# a free TCP port for the pair's own exchange
CTL=${NETAUTH_CTL_PORT:-$(python3 -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')}
ATT="$SRC/tests/security/netauth_attack.py"
COMMON=(--build "$BUILD" --tool "$BUILD/bin/softhca" --target 127.0.0.1
	--base "$BASE" --attacker "=$UNUSED" --ctl-port "$CTL")
rc=0
echo "# without a secret"
timeout 300 python3 "$ATT" run "${COMMON[@]}" || rc=1
echo "# SOFTHCA_NET_SECRET on both ends"
timeout 300 python3 "$ATT" run "${COMMON[@]}" \
	--secret "netauth-test-$$-$RANDOM$RANDOM-secret" || rc=1
echo "# a client with another secret"
timeout 300 python3 "$ATT" run "${COMMON[@]}" \
	--secret "netauth-test-$$-right-secret-0001" \
	--client-secret "netauth-test-$$-wrong-secret-0002" || rc=1
[ $rc = 0 ] && echo "PASS test_netauth" || echo "FAIL test_netauth"
exit $rc
