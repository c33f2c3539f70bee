#!/bin/bash
# Between hosts (issue 5), three of them: network namespaces a, b and c
# (tests/netns/lib.sh), Debian's clients unmodified, over softhca's net path:
#  - three ping-pongs at once, one per pair of hosts (a <- b, b <- c,
#    c <- a: server <- client, each host runs one server and one client):
#    RC, then UD, SRQ and UC together, then perftest's ib_write_bw;
#  - one rdma_cm listener in a taking connections from b and c at once
#    (ucmatose);
#  - mckey with two receivers (a and c) and a sender (b).
# Each process is bounded in time.
# Environment: SOFTHCA_BUILD (default: the source tree's build/), the
# libraries in $SOFTHCA_BUILD/lib.  Root only (77 otherwise).
# shellcheck source=tests/netns/lib.sh
. "$(dirname "$0")/lib.sh"
netns_require_root
need ibv_devinfo ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong \
	ibv_srq_pingpong ib_write_bw mckey ucmatose ss

SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd) || { echo "FAIL: no build directory" >&2; exit 1; }
LIB=$SOFTHCA_BUILD/lib
[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$LIB/librdmacm.so.1" ] || { echo "FAIL: no $LIB/librdmacm.so.1" >&2; exit 1; }
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
# listening HOST PORT SECONDS: a TCP listener; udp_bound: a UDP socket
listening() { bound -Hltn "$@"; }
udp_bound() { bound -Huan "$@"; }

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
# Every server first (each waits for its port), then every client, all
# running at once; then one check per pair, and CHECK_RE in each client's
# output.  ARGS are words; "-g" and "-x" take the host's GID index (GIDX).
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
		listening "$s" "${pport[$pr]}" 10 || true   # the server's exit says why
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
		if both_ok "${progs[i]} ${argv[i]//GIDX/G}: $s <- $c, with the other two pairs at once" \
			"srv-$i-$s" "cli-$i-$c"; then
			if grep -Eq -- "$want" "$NETNS_T/cli-$i-$c.out"; then
				ok "${progs[i]}: $s <- $c: /$want/"
			else
				fail "${progs[i]}: $s <- $c: client output does not match /$want/"
				show "cli-$i-$c"
			fi
		fi
		i=$((i + 1))
	done
}

# RC everywhere
together 30 '^500 iters in' \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c" \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c" \
	ibv_rc_pingpong "-g GIDX -s 65536 -n 500 -c"
# three transports at once (UD: within the veth's 1024 MTU)
together 30 '^500 iters in' \
	ibv_ud_pingpong "-g GIDX -s 1024 -n 500 -c" \
	ibv_srq_pingpong "-g GIDX -s 4096 -n 500 -c" \
	ibv_uc_pingpong "-g GIDX -s 4096 -n 500 -c"
# bandwidth on every pair at once
together 60 '^ *[0-9]+ +[0-9]+ ' \
	ib_write_bw "-x GIDX -n 200" \
	ib_write_bw "-x GIDX -n 200" \
	ib_write_bw "-x GIDX -n 200"

# --- one rdma_cm listener, clients from two hosts at once -----------------
port
bg ucm-srv a 30 ucmatose -b "${IP[a]}" -p "$P" -c 2 -C 10
listening a "$P" 10 || true
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
# The receivers join first: softhca binds UDP port 4791 (RoCE v2's) just
# before it joins the IP group on the device's interface.  The sender
# starts once both are bound and waits 3 s after joining before it sends
# its 10 messages, one IP multicast datagram each.
# UD may lose datagrams, and a receiver that joined after the sender sent
# (a slow start on a loaded machine) waits for nothing: then the three run
# once more, and the note says so (two misses in a row fail).
for try in 1 2; do
	bg mc-a a 30 mckey -m 239.7.7.2 -b "${IP[a]}" -C 10
	bg mc-c c 30 mckey -m 239.7.7.2 -b "${IP[c]}" -C 10
	udp_bound a 4791 20 || echo "note: mckey: a not bound to 4791 after 20 s"
	udp_bound c 4791 20 || echo "note: mckey: c not bound to 4791 after 20 s"
	bg mc-b b 30 mckey -m 239.7.7.2 -b "${IP[b]}" -s -C 10
	reap mc-b mc-a mc-c
	[ "${RC[mc-a]}" = 0 ] && [ "${RC[mc-c]}" = 0 ] && break
	[ "$try" = 2 ] ||
		echo "note: mckey: a receiver missed the messages (exit a ${RC[mc-a]}, c ${RC[mc-c]}): once more"
done
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
