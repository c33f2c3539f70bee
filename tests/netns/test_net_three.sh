#!/bin/bash
# Between hosts (issue 5), three of them: network namespaces a, b and c
# (tests/netns/lib.sh), over softhca's net path:
#  - three ping-pongs at once, one per pair of hosts (a <- b, b <- c,
#    c <- a: server <- client, each host runs one server and one client):
#    shca_pingpong (tests/pingpong: every byte checked on both sides) RC,
#    then UD, SRQ (-e -N -t) and UC together; then the same with Debian's
#    ping-pongs (smoke tests: -c checks one byte a page), then perftest's
#    ib_write_bw;
#  - one rdma_cm listener in a taking connections from b and c at once
#    (ucmatose);
#  - mckey with two receivers (a and c) and a sender (b), which starts
#    once both receivers said they joined.
# Each process is bounded in time; nothing is run twice.
# Environment: SOFTHCA_BUILD (default: the source tree's build/), the
# libraries in $SOFTHCA_BUILD/lib.  Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong \
	ibv_srq_pingpong ib_write_bw mckey ucmatose ss stdbuf

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }
PP=$SOFTHCA_BUILD/tests/shca_pingpong
[ -x "$PP" ] || { echo "FAIL: no $PP (build first)" >&2; exit 1; }
# the clients must see softhca only
export LD_LIBRARY_PATH=$LIB
unset LD_PRELOAD RDMAV_DRIVERS IBV_DRIVERS
LOADER_ERRORS='no version information available|symbol lookup error|undefined symbol|error while loading shared libraries'

DEV=softhca_$NETNS_IF
next_port=18800                 # the clients' own TCP ports, one per use
P=0
port() { next_port=$((next_port + 1)); P=$next_port; }
re() { printf '%s' "$1" | sed 's/[.[\*^$]/\\&/g'; }
started=$SECONDS

# under ctest's TIMEOUT (600, tests/CMakeLists.txt)
: "${NETNS_WATCHDOG:=540}"
netns_setup 3 || { fail "netns_setup 3"; finish; }
declare -A IP GID
for h in a b c; do IP[$h]=$(netns_ip4 "$h"); done
ok "namespaces a (${IP[a]}), b (${IP[b]}), c (${IP[c]})"

# the index of each host's IPv4-mapped GID on its softhca_veth0
for h in a b c; do
	GID[$h]=$(NETNS_EXEC_TIMEOUT=30 netns_exec "$h" ibv_devinfo -v -d "$DEV" 2>/dev/null |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:$(re "${IP[$h]}"), RoCE v2\$/\1/p" |
		head -1)
done
have_gids() { [ -n "${GID[a]}" ] && [ -n "${GID[b]}" ] && [ -n "${GID[c]}" ]; }
check "GID indexes of ::ffff:<veth address>: a '${GID[a]}', b '${GID[b]}', c '${GID[c]}'" have_gids
for h in a b c; do : "${GID[$h]:=0}"; done

# --- background processes -----------------------------------------------
declare -A PID=() RC=()

# bg NAME HOST SECONDS CMD...: CMD in HOST, in the background, bounded;
# its output (both streams) in $NETNS_T/NAME.out
bg() {
	local name=$1 ns secs=$3
	ns=$(netns_name "$2") || return 1
	shift 3
	timeout -k 5 "$secs" ip netns exec "$ns" "$@" \
		</dev/null >"$NETNS_T/$name.out" 2>&1 &
	PID[$name]=$!
}

# reap NAME...: wait for them; exit statuses in RC[NAME]
reap() {
	local n
	for n in "$@"; do
		wait "${PID[$n]}"
		RC[$n]=$?
	done
}

# bound SS_FLAGS HOST PORT SECONDS: wait (bounded) until a socket in HOST
# that `ss SS_FLAGS` lists is bound to PORT
bound() {
	local ns n
	ns=$(netns_name "$2") || return 1
	for ((n = $4 * 10; n > 0; n--)); do
		[ -n "$(ip netns exec "$ns" ss "$1" "sport = :$3" 2>/dev/null)" ] && return 0
		sleep 0.1
	done
	return 1
}
# listening HOST PORT SECONDS: a TCP listener
listening() { bound -Hltn "$@"; }

show() {
	echo "  --- $1 (exit ${RC[$1]:-?}):" >&2
	tail -8 "$NETNS_T/$1.out" | sed 's/^/    /' >&2
}

# both_ok MSG SERVER CLIENT: both exited 0, no loader complaint
both_ok() {
	if [ "${RC[$2]}" = 0 ] && [ "${RC[$3]}" = 0 ] &&
	   ! grep -Eq -- "$LOADER_ERRORS" "$NETNS_T/$2.out" "$NETNS_T/$3.out"; then
		ok "$1"
		return 0
	fi
	fail "$1 (server exit ${RC[$2]}, client exit ${RC[$3]})"
	show "$2"
	show "$3"
	return 1
}

# Three pairs at once: server <- client.
PAIRS="a:b b:c c:a"

# together SECONDS CHECK_RE PROG_a:b ARGS_a:b PROG_b:c ARGS_b:c PROG_c:a ARGS_c:a
# Every server first, then every client once its server listens (bounded
# by SECONDS), all running at once; then one check per pair, and CHECK_RE
# in each client's output (TOGETHER_BOTH=1: in each server's too).  ARGS
# are words; "-g" and "-x" take the host's GID index (GIDX).
together() {
	local secs=$1 want=$2 pr s c prog args i=0 progs=() argv=() names=()
	shift 2
	while [ $# -gt 0 ]; do progs+=("$1"); argv+=("$2"); shift 2; done
	declare -A pport=()
	for pr in $PAIRS; do
		s=${pr%:*} c=${pr#*:} prog=${progs[i]} args=${argv[i]}
		port
		pport[$pr]=$P
		# shellcheck disable=SC2086  # ARGS are words
		bg "srv-$i-$s" "$s" "$secs" $prog -d "$DEV" -p "$P" ${args//GIDX/${GID[$s]}}
		i=$((i + 1))
	done
	i=0
	for pr in $PAIRS; do
		s=${pr%:*} c=${pr#*:} prog=${progs[i]} args=${argv[i]}
		listening "$s" "${pport[$pr]}" "$secs" || true   # its exit says why
		# shellcheck disable=SC2086
		bg "cli-$i-$c" "$c" "$secs" $prog -d "$DEV" -p "${pport[$pr]}" \
			${args//GIDX/${GID[$c]}} "${IP[$s]}"
		i=$((i + 1))
	done
	i=0
	for pr in $PAIRS; do
		names+=("srv-$i-${pr%:*}" "cli-$i-${pr#*:}")
		i=$((i + 1))
	done
	reap "${names[@]}"
	i=0
	for pr in $PAIRS; do
		s=${pr%:*} c=${pr#*:}
		if both_ok "${progs[i]##*/} ${argv[i]//GIDX/G}: $s <- $c, with the other two pairs at once" \
			"srv-$i-$s" "cli-$i-$c"; then
			if grep -Eq -- "$want" "$NETNS_T/cli-$i-$c.out"; then
				ok "${progs[i]##*/}: $s <- $c: /$want/"
			else
				fail "${progs[i]##*/}: $s <- $c: client output does not match /$want/"
				show "cli-$i-$c"
			fi
			if [ -n "${TOGETHER_BOTH:-}" ]; then
				if grep -Eq -- "$want" "$NETNS_T/srv-$i-$s.out"; then
					ok "${progs[i]##*/}: $s <- $c: server /$want/"
				else
					fail "${progs[i]##*/}: $s <- $c: server output does not match /$want/"
					show "srv-$i-$s"
				fi
			fi
		fi
		i=$((i + 1))
	done
}

# shca_pingpong: RC everywhere, then three transports at once (UD within
# the veth's 1024 MTU); each side checks every byte it receives
TOGETHER_BOTH=1 together 60 '^shca_pingpong: ok: .*, 500 iters of ' \
	"$PP" "-g GIDX -T rc -s 65536 -n 500" \
	"$PP" "-g GIDX -T rc -s 65536 -n 500" \
	"$PP" "-g GIDX -T rc -s 65536 -n 500"
TOGETHER_BOTH=1 together 60 '^shca_pingpong: ok: .*, 500 iters of ' \
	"$PP" "-g GIDX -T ud -s 1024 -n 500" \
	"$PP" "-g GIDX -T srq -s 4096 -n 500 -e -N -t" \
	"$PP" "-g GIDX -T uc -s 4096 -n 500"
# Debian's ping-pongs (smoke tests): RC everywhere
together 30 '^500 iters in' \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c" \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c" \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c"
# three transports at once (UD: within the veth's 1024 MTU)
together 30 '^500 iters in' \
	ibv_ud_pingpong "-g GIDX -s 1024 -n 500 -c" \
	ibv_srq_pingpong "-g GIDX -s 4096 -n 500 -c" \
	ibv_uc_pingpong "-g GIDX -s 4096 -n 500 -c"
# bandwidth on every pair at once (-F: a report even when perftest's own
# sampling of the CPU clock is disturbed by the load)
together 60 '^ *[0-9]+ +[0-9]+ ' \
	ib_write_bw "-F -x GIDX -n 200" \
	ib_write_bw "-F -x GIDX -n 200" \
	ib_write_bw "-F -x GIDX -n 200"

# --- one rdma_cm listener, clients from two hosts at once -----------------
port
bg ucm-srv a 30 ucmatose -b "${IP[a]}" -p "$P" -c 2 -C 10
listening a "$P" 30 || true	# the server's exit says why
bg ucm-b b 30 ucmatose -s "${IP[a]}" -p "$P" -c 1 -C 10
bg ucm-c c 30 ucmatose -s "${IP[a]}" -p "$P" -c 1 -C 10
reap ucm-srv ucm-b ucm-c
if both_ok "ucmatose: a's listener, client b" ucm-srv ucm-b; then
	check "ucmatose: client b: return status 0" grep -q 'return status 0' "$NETNS_T/ucm-b.out"
fi
if both_ok "ucmatose: a's listener, client c" ucm-srv ucm-c; then
	check "ucmatose: client c: return status 0" grep -q 'return status 0' "$NETNS_T/ucm-c.out"
fi

# --- multicast: two receivers, one sender ------------------------------
# Each receiver (stdout line-buffered) posts its receives, joins, and
# says "joined dgid" once its QP is attached (the join event retrieved).
# The sender starts once both said so (each wait bounded by that
# receiver's life), then sends its 10 messages, one IP multicast datagram
# each: no datagram can go before a receiver is in the group.
# joined NAME: wait until background process NAME said it joined, or ended
joined() {
	until grep -q 'joined dgid' "$NETNS_T/$1.out"; do
		kill -0 "${PID[$1]}" 2>/dev/null || return 1
		sleep 0.1
	done
}
bg mc-a a 30 stdbuf -oL mckey -m 239.7.7.2 -b "${IP[a]}" -C 10
bg mc-c c 30 stdbuf -oL mckey -m 239.7.7.2 -b "${IP[c]}" -C 10
check "mckey: receiver a joined" joined mc-a
check "mckey: receiver c joined" joined mc-c
bg mc-b b 30 mckey -m 239.7.7.2 -b "${IP[b]}" -s -C 10
reap mc-b mc-a mc-c
for h in a c; do
	if both_ok "mckey: receiver $h, sender b" "mc-$h" mc-b; then
		check "mckey: receiver $h: data transfers complete" \
			grep -q 'data transfers complete' "$NETNS_T/mc-$h.out"
	fi
done
check "mckey: sender b joined ::ffff:239.7.7.2" \
	grep -q 'joined dgid: ::ffff:239\.7\.7\.2' "$NETNS_T/mc-b.out"

echo "$(basename "$0"): $((SECONDS - started)) s"
finish
