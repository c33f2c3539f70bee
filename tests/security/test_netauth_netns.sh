#!/bin/bash
# Net admission between hosts (issue 11, docs/security.md "Net
# admission"): network namespaces a, b and c (tests/netns/lib.sh).  The
# victim's RC QP is in a on softhca_veth0, its legitimate peer in b.  A
# stranger with a plain Python socket (tests/security/netauth_attack.py)
# attacks from c (another host), from b (the peer's own host and address,
# claiming the peer's slot) and from a (the victim's host: the victim's
# slot port on 127.0.0.1, an address it does not use, must refuse).
# Then the same with SOFTHCA_NET_SECRET.  Nothing may come back, the
# victim's memory and QP stay as they were, the pair keeps working, and
# `softhca stat` counts the attempts.  Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/../netns/lib.sh"
netns_require_root
need python3

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
[ -x "$SOFTHCA_BUILD/tests/netauth_peer" ] || { echo "FAIL: no netauth_peer" >&2; exit 1; }
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS SOFTHCA_NET_SECRET
BASE=${SOFTHCA_PORT_BASE:-24000}
export SOFTHCA_PORT_BASE=$BASE

: "${NETNS_WATCHDOG:=400}"
netns_setup 3 || { fail "netns_setup 3"; finish; }
declare -A IP NS
for h in a b c; do
	IP[$h]=$(netns_ip4 "$h")
	NS[$h]=$(netns_name "$h")
done
ok "namespaces a (${IP[a]}), b (${IP[b]}), c (${IP[c]})"
# the pair brings up lo in its namespaces too: 127.0.0.1 exists in a
for h in a b c; do ip -n "${NS[$h]}" link set lo up 2>/dev/null; done

ATT="$SOFTHCA_SRC/tests/security/netauth_attack.py"
COMMON=(--build "$SOFTHCA_BUILD" --tool "$SOFTHCA_BUILD/bin/softhca"
	--target "${IP[a]}" --base "$BASE" --ctl-port 31002
	--server-ns "${NS[a]}" --client-ns "${NS[b]}"
	--server-dev "softhca_$NETNS_IF" --client-dev "softhca_$NETNS_IF"
	--attacker "${NS[c]}=" --attacker "${NS[b]}="
	--attacker "${NS[a]}=127.0.0.1")
check "no secret: the attacks from c, b and a get nothing" \
	timeout 300 python3 "$ATT" run "${COMMON[@]}"
check "SOFTHCA_NET_SECRET: the attacks from c, b and a get nothing" \
	timeout 300 python3 "$ATT" run "${COMMON[@]}" \
	--secret "netauth-netns-$$-$RANDOM$RANDOM-secret"
finish
