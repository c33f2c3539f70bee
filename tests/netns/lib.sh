# shellcheck shell=bash
# Network-namespace harness for tests/netns/test_*.sh (sourced, not run).
#
# "Hosts" are network namespaces that the test creates itself, joined by
# veth pairs to a bridge that lives in a namespace of its own:
#
#     shca-<pid>-<rnd>-a   shca-<pid>-<rnd>-b   shca-<pid>-<rnd>-c  ...
#       lo, veth0            lo, veth0            lo, veth0
#           \                    |                    /
#            pa ---------------- br0 --------------- pc      shca-<pid>-<rnd>-br
#
# The root namespace is never touched beyond creating the namespaces
# (`ip netns add`): no interface, address or route is added to it; every
# veth pair is created inside the bridge namespace with its peer created
# directly in its host namespace.  Addresses are private and exist only
# inside the namespaces: host i (a = 1, b = 2, ...) has 10.231.X.i/24 and
# fd00:5348:X::i/64 on veth0, X chosen per run.  Nothing else is a target.
#
#   netns_require_root          exit 77 (skip) unless root and `ip netns`,
#                               veth and bridge work here
#   netns_setup N               N host namespaces (1..26) and the bridge;
#                               sets NETNS_HOSTS (full names), NETNS_BR,
#                               NETNS_RUN (the per-run prefix), NETNS_IF
#   netns_name NAME             full name of a (a, b, ... or the full name)
#   netns_ip4 NAME, netns_ip6 NAME    the host's veth0 addresses
#   netns_exec NAME CMD...      ip netns exec, bounded by NETNS_EXEC_TIMEOUT
#                               seconds (default 60)
#   netns_pair SRV CLI SECONDS SERVER_CMD... -- CLIENT_CMD...
#                               server in SRV, then client in CLI, each
#                               bounded; 0 when both exit 0.  Outputs in
#                               $NETNS_PAIR_SERVER_OUT/$NETNS_PAIR_CLIENT_OUT,
#                               exit codes in $NETNS_PAIR_SERVER_RC/_CLIENT_RC.
#                               NETNS_PAIR_PORT=P: start the client once the
#                               server listens on TCP port P;
#                               NETNS_PAIR_READY=CMD: once CMD (eval'd; the
#                               server's output is $NETNS_PAIR_SERVER_OUT)
#                               succeeds; either bounded by SECONDS and by
#                               the server's life (else after 0.3 s);
#                               NETNS_PAIR_QUIET=1: print nothing
#   netns_link_down NAME        pull NAME's cable: its bridge port goes down,
#                               its veth0 loses carrier (NO-CARRIER)
#   netns_link_up NAME          plug it back; returns once forwarding again
#   netns_netem NAME "SPEC"     tc netem SPEC as veth0's root qdisc; 77 with
#                               a message when the kernel has no netem
#   netns_netem_clear NAME      back to the default qdisc
#   netns_teardown              kill every process in the namespaces, delete
#                               them; idempotent, also run by the traps
#
# Safety: a trap on EXIT, INT, TERM and HUP tears everything down, and a
# watchdog (its own session, a child of init: it survives a SIGKILL of the
# test, of its process group, and ctest's kill of the test's process tree
# after a TIMEOUT) does it when the test outlives NETNS_WATCHDOG seconds
# (default 300) or dies without tearing down.  The test script
# owns no EXIT trap of its own: add cleanup commands to NETNS_CLEANUP.
#
# Checks: ok MSG, fail MSG, check MSG CMD..., check_not MSG CMD...,
# skip MSG (exit 77), need CMD..., finish.
# Exit status of a test: 0 pass, 1 fail, 77 skip.
set -u

if [ "${1:-}" != --watchdog ]; then

NETNS_LIB=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
SOFTHCA_SRC=${SOFTHCA_SRC:-$(cd "$(dirname "$NETNS_LIB")/../.." && pwd)}
NETNS_IF=veth0                  # the hosts' interface: device softhca_veth0
NETNS_HOSTS=()                  # full names of the host namespaces
NETNS_BR=""                     # the bridge namespace
NETNS_RUN=""                    # per-run prefix of every name, shca-<pid>-<rnd>
NETNS_X=""                      # 10.231.X.0/24, fd00:5348:X::/64
NETNS_CLEANUP=()                # commands run (eval) at exit, before teardown
NETNS_PAIR_SERVER_OUT="" NETNS_PAIR_CLIENT_OUT=""
NETNS_PAIR_SERVER_RC="" NETNS_PAIR_CLIENT_RC=""
_netns_npair=0
_netns_run_owner=""             # the shell that created $NETNS_RUN
_netns_owner=$BASHPID           # the shell that owns $NETNS_T
NETNS_T=$(mktemp -d "${TMPDIR:-/tmp}/softhca-netns.XXXXXX")

failures=0
checks=0

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

ok() {
	checks=$((checks + 1))
	echo "ok: $*"
}

# check MSG CMD...: ok MSG when CMD succeeds, fail MSG otherwise.
check() {
	local msg=$1
	shift
	if "$@"; then ok "$msg"; else fail "$msg"; fi
}

# check_not MSG CMD...: ok MSG when CMD fails, fail MSG otherwise.
check_not() {
	local msg=$1
	shift
	if "$@"; then fail "$msg"; else ok "$msg"; fi
}

skip() {
	echo "SKIP: $*"
	exit 77
}

# need CMD...: skip the whole test when a command is not installed.
need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			skip "$c is not installed (scripts/install-deps.sh)"
	done
}

finish() {
	if [ "$failures" -ne 0 ]; then
		echo "$(basename "$0"): $failures of $((checks + failures)) checks failed"
		exit 1
	fi
	echo "$(basename "$0"): all $checks checks passed"
	exit 0
}

fi # not --watchdog

# --- teardown, shared by the test and the watchdog ---------------------

# _netns_list PREFIX: the namespaces named PREFIX-*.
_netns_list() {
	ip netns list 2>/dev/null | awk -v p="$1-" 'index($1, p) == 1 { print $1 }'
}

# _netns_kill_in PREFIX: end every process in the PREFIX-* namespaces,
# TERM first, KILL what is left after 3 s.
_netns_kill_in() {
	local ns pids i
	for i in 1 2 3 4 5 6 7; do
		pids=()
		for ns in $(_netns_list "$1"); do
			mapfile -t -O "${#pids[@]}" pids < <(ip netns pids "$ns" 2>/dev/null)
		done
		[ "${#pids[@]}" -gt 0 ] || return 0
		case $i in
		1) kill -TERM "${pids[@]}" 2>/dev/null ;;
		7) kill -KILL "${pids[@]}" 2>/dev/null; return 0 ;;
		*) sleep 0.5 ;;
		esac
	done
}

# _netns_destroy PREFIX: kill, then delete the PREFIX-* namespaces, and
# remove the per-namespace shared-memory tables softhca left in /dev/shm
# (named after the namespace's inode, src/shm/host.c).  Idempotent.
_netns_destroy() {
	local prefix=$1 ns ino f
	[ -n "$prefix" ] || return 0
	_netns_kill_in "$prefix"
	for ns in $(_netns_list "$prefix"); do
		ino=$(stat -L -c %i "/run/netns/$ns" 2>/dev/null)
		# hosts first, the bridge last: the order does not matter to
		# the kernel, it does to a reader of the log
		[ "$ns" = "$prefix-br" ] && continue
		ip netns delete "$ns" 2>/dev/null ||
			echo "netns: could not delete namespace $ns" >&2
		if [ -n "$ino" ]; then
			for f in /dev/shm/softhca-*-"$ino"-v*; do
				[ -e "$f" ] && rm -f -- "$f"
			done
		fi
	done
	if ip netns list 2>/dev/null | awk '{print $1}' | grep -qx -- "$prefix-br"; then
		ip netns delete "$prefix-br" 2>/dev/null ||
			echo "netns: could not delete namespace $prefix-br" >&2
	fi
	return 0
}

# _netns_proc_start PID: the start time of PID (field 22 of stat), empty
# when PID does not exist or is a zombie.
_netns_proc_start() {
	local s
	s=$(cat "/proc/$1/stat" 2>/dev/null) || return 0
	s=${s##*) }
	# shellcheck disable=SC2086  # split the fields
	set -- $s
	[ "$1" = Z ] || echo "${20}"
}

# --- the watchdog: `bash lib.sh --watchdog PID START SECS PREFIX TMPDIR OWNS`
# (OWNS = 1: TMPDIR is PID's own, to remove when PID is gone)
if [ "${1:-}" = --watchdog ]; then
	shift
	main=$1 start=$2 secs=$3 prefix=$4 tdir=$5 owns=$6
	echo "$BASHPID" >"$tdir/watchdog-$prefix.pid"
	# INT, HUP: not ours.  PIPE: the test's stderr, where this writes,
	# may be a pipe that closed with the test (ctest after a timeout):
	# a write there must fail, not kill the watchdog before its work.
	trap '' INT HUP PIPE
	trap 'exit 0' TERM
	deadline=$((SECONDS + secs))
	while [ "$(_netns_proc_start "$main")" = "$start" ]; do
		if [ "$SECONDS" -ge "$deadline" ]; then
			echo "netns watchdog: test $main still running after ${secs}s" \
				"(NETNS_WATCHDOG): ending it and its namespaces $prefix-*" >&2
			trap '' TERM
			# TERM first: the test runs its trap (teardown) as soon
			# as its current command, most likely one in a
			# namespace, ends, which the kill of those makes happen
			kill -TERM "$main" 2>/dev/null
			_netns_kill_in "$prefix"
			for _ in $(seq 1 30); do
				[ "$(_netns_proc_start "$main")" = "$start" ] || break
				sleep 0.5
			done
			[ "$(_netns_proc_start "$main")" = "$start" ] &&
				kill -KILL "$main" 2>/dev/null
			break
		fi
		sleep 1
	done
	# the test is gone: whatever it left behind goes too
	trap '' TERM
	if [ -n "$(_netns_list "$prefix")" ]; then
		echo "netns watchdog: test $main ended without teardown; deleting $prefix-*" >&2
		_netns_destroy "$prefix"
	fi
	rm -f "$tdir/watchdog-$prefix.pid"
	[ "$owns" = 1 ] && rm -rf -- "$tdir"
	exit 0
fi

# --- setup ----------------------------------------------------------------

# netns_require_root: skip (exit 77) unless this process can create network
# namespaces with veth pairs and a bridge in them.  The probe happens in a
# namespace of its own, deleted at once.
netns_require_root() {
	local probe err
	[ "$(id -u)" = 0 ] ||
		skip "not root: the namespace tests create network namespaces (run as root; CI does)"
	command -v ip >/dev/null 2>&1 || skip "ip (iproute2) is not installed"
	command -v timeout >/dev/null 2>&1 || skip "timeout (coreutils) is not installed"
	command -v setsid >/dev/null 2>&1 || skip "setsid (util-linux) is not installed"
	probe=shca-probe-$BASHPID-$RANDOM
	if ! err=$(timeout 20 ip netns add "$probe" 2>&1); then
		skip "'ip netns add' is not permitted here (an unprivileged container?): $err"
	fi
	if ! err=$(timeout 20 ip -n "$probe" link add pr0 type veth peer name pr1 2>&1); then
		timeout 20 ip netns delete "$probe" 2>/dev/null
		skip "no veth pairs in this kernel: $err"
	fi
	if ! err=$(timeout 20 ip -n "$probe" link add br0 type bridge 2>&1); then
		timeout 20 ip netns delete "$probe" 2>/dev/null
		skip "no bridges in this kernel: $err"
	fi
	timeout 20 ip netns delete "$probe" 2>/dev/null
	return 0
}

_netns_on_exit() {
	local rc=$? c
	trap - EXIT INT TERM HUP
	for c in "${NETNS_CLEANUP[@]}"; do
		eval "$c" || true
	done
	netns_teardown
	[ "$BASHPID" = "$_netns_owner" ] && rm -rf -- "$NETNS_T"
	exit "$rc"
}

_netns_on_signal() {
	echo "netns: SIG$1: tearing down" >&2
	trap - "$1"
	exit $((128 + $2))     # runs _netns_on_exit
}

_netns_traps() {
	trap _netns_on_exit EXIT
	trap '_netns_on_signal INT 2' INT
	trap '_netns_on_signal TERM 15' TERM
	trap '_netns_on_signal HUP 1' HUP
}
_netns_traps

# _netns_run CMD...: a setup step, bounded; its failure is said and aborts setup.
_netns_run() {
	local err
	if ! err=$(timeout -k 5 20 "$@" 2>&1); then
		echo "netns_setup: '$*' failed: $err" >&2
		return 1
	fi
}

# _netns_wait SECONDS CMD...: poll CMD (every 0.1 s) until it succeeds,
# at most SECONDS.  A bound, not a timing assertion.
_netns_wait() {
	local n=$(($1 * 10))
	shift
	while [ "$n" -gt 0 ]; do
		"$@" >/dev/null 2>&1 && return 0
		sleep 0.1
		n=$((n - 1))
	done
	return 1
}

_netns_port_forwarding() {      # BR-NS PORT
	ip -n "$1" -d link show "$2" 2>/dev/null | grep -q 'bridge_slave state forwarding'
}

_netns_carrier() {              # NS
	ip -n "$1" link show "$NETNS_IF" 2>/dev/null | grep -q 'LOWER_UP'
}

# netns_setup N
netns_setup() {
	local n=${1:?netns_setup N} i ns port letters=abcdefghijklmnopqrstuvwxyz start me
	if [ "$n" -lt 1 ] || [ "$n" -gt 26 ]; then
		echo "netns_setup: 1 to 26 namespaces, not $n" >&2
		return 1
	fi
	me=$BASHPID             # (inside $(...) or (...), BASHPID is another)
	# namespaces of an earlier setup: ours go; a subshell forgets the
	# ones of the shell it came from (that shell tears them down)
	if [ -n "$NETNS_RUN" ] && [ "$_netns_run_owner" = "$me" ]; then
		netns_teardown
	fi
	_netns_traps            # again: a subshell starts without them
	_netns_run_owner=$me
	# unique per run: the pid of this shell and a random tag, checked free
	while :; do
		NETNS_RUN=$(printf 'shca-%d-%04x' "$me" $((RANDOM)))
		[ -z "$(_netns_list "$NETNS_RUN")" ] && break
	done
	NETNS_X=$(( (me + RANDOM) % 250 + 1 ))
	NETNS_BR=$NETNS_RUN-br
	NETNS_HOSTS=()
	for ((i = 0; i < n; i++)); do
		NETNS_HOSTS+=("$NETNS_RUN-${letters:i:1}")
	done

	# the watchdog first, so that a test killed during setup leaves
	# nothing behind either.  Its own session, and a child of init (the
	# subshell around it ends at once): a kill of the test's process
	# group or process tree does not reach it.
	start=$(_netns_proc_start "$me")
	(setsid bash "$NETNS_LIB" --watchdog "$me" "$start" \
		"${NETNS_WATCHDOG:-300}" "$NETNS_RUN" "$NETNS_T" \
		"$([ "$me" = "$_netns_owner" ] && echo 1 || echo 0)" </dev/null >/dev/null &)
	for _ in $(seq 1 50); do
		[ -s "$NETNS_T/watchdog-$NETNS_RUN.pid" ] && break
		sleep 0.1
	done
	[ -s "$NETNS_T/watchdog-$NETNS_RUN.pid" ] ||
		{ echo "netns_setup: the watchdog did not start" >&2; return 1; }

	# the bridge, in its own namespace; no IPv6 there: it only switches
	_netns_run ip netns add "$NETNS_BR" || return 1
	_netns_run ip netns exec "$NETNS_BR" sh -c \
		'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 &&
		 echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6' || return 1
	_netns_run ip -n "$NETNS_BR" link add br0 type bridge \
		stp_state 0 forward_delay 0 mcast_snooping 0 || return 1
	_netns_run ip -n "$NETNS_BR" link set br0 up || return 1

	for ((i = 0; i < n; i++)); do
		ns=${NETNS_HOSTS[i]}
		port=p${letters:i:1}
		_netns_run ip netns add "$ns" || return 1
		_netns_run ip -n "$ns" link set lo up || return 1
		# addresses usable at once: no duplicate address detection
		_netns_run ip netns exec "$ns" sh -c \
			'echo 0 >/proc/sys/net/ipv6/conf/all/accept_dad &&
			 echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad' || return 1
		_netns_run ip -n "$NETNS_BR" link add "$port" type veth \
			peer name "$NETNS_IF" netns "$ns" || return 1
		_netns_run ip -n "$NETNS_BR" link set "$port" master br0 up || return 1
		_netns_run ip -n "$ns" addr add "10.231.$NETNS_X.$((i + 1))/24" dev "$NETNS_IF" || return 1
		_netns_run ip -n "$ns" addr add "fd00:5348:$NETNS_X::$((i + 1))/64" dev "$NETNS_IF" nodad || return 1
		_netns_run ip -n "$ns" link set "$NETNS_IF" up || return 1
	done
	for ((i = 0; i < n; i++)); do
		_netns_wait 10 _netns_port_forwarding "$NETNS_BR" "p${letters:i:1}" ||
			{ echo "netns_setup: bridge port p${letters:i:1} is not forwarding" >&2; return 1; }
		_netns_wait 10 _netns_carrier "${NETNS_HOSTS[i]}" ||
			{ echo "netns_setup: ${NETNS_HOSTS[i]} $NETNS_IF has no carrier" >&2; return 1; }
	done
	return 0
}

# netns_teardown: kill every process in this run's namespaces and delete
# them (hosts and bridge).  Idempotent; the traps call it too.
netns_teardown() {
	local wd
	[ -n "$NETNS_RUN" ] || return 0
	if [ -s "$NETNS_T/watchdog-$NETNS_RUN.pid" ]; then
		wd=$(cat "$NETNS_T/watchdog-$NETNS_RUN.pid")
		kill -TERM "$wd" 2>/dev/null
		rm -f "$NETNS_T/watchdog-$NETNS_RUN.pid"
	fi
	_netns_destroy "$NETNS_RUN"
	NETNS_RUN="" NETNS_BR="" NETNS_HOSTS=()
	return 0
}

# --- using the namespaces ---------------------------------------------

# netns_name NAME: the full name of host NAME (a, b, ... or already full).
netns_name() {
	local h
	for h in "${NETNS_HOSTS[@]}" "$NETNS_BR"; do
		[ "$1" = "$h" ] && { echo "$h"; return 0; }
	done
	for h in "${NETNS_HOSTS[@]}"; do
		[ "$NETNS_RUN-$1" = "$h" ] && { echo "$h"; return 0; }
	done
	echo "netns: no namespace '$1' in this run ($NETNS_RUN)" >&2
	return 1
}

# _netns_index NAME: 1 for a, 2 for b, ...
_netns_index() {
	local full i
	full=$(netns_name "$1") || return 1
	for i in "${!NETNS_HOSTS[@]}"; do
		[ "${NETNS_HOSTS[i]}" = "$full" ] && { echo $((i + 1)); return 0; }
	done
	echo "netns: '$1' is not a host namespace" >&2
	return 1
}

netns_ip4() {
	local i
	i=$(_netns_index "$1") || return 1
	echo "10.231.$NETNS_X.$i"
}

netns_ip6() {
	local i
	i=$(_netns_index "$1") || return 1
	echo "fd00:5348:$NETNS_X::$i"
}

# netns_exec NAME CMD...: CMD inside NAME, bounded by NETNS_EXEC_TIMEOUT.
netns_exec() {
	local ns
	ns=$(netns_name "$1") || return 1
	shift
	timeout -k 5 "${NETNS_EXEC_TIMEOUT:-60}" ip netns exec "$ns" "$@"
}

_netns_listening() {            # NS PORT
	[ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]
}

# netns_pair SRV CLI SECONDS SERVER_CMD... -- CLIENT_CMD...: both bounded;
# 0 if both exit 0.  A side whose output reports a data mismatch of
# rdma-core's ping-pongs ("invalid data in page N") counts as exit 65.
netns_pair() {
	local srv_ns cli_ns secs=$3 srv=() cli=() pre=() crash spid n
	srv_ns=$(netns_name "$1") || return 1
	cli_ns=$(netns_name "$2") || return 1
	shift 3
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	[ $# -gt 0 ] || { echo "netns_pair: no -- CLIENT_CMD" >&2; return 1; }
	shift
	cli=("$@")
	_netns_npair=$((_netns_npair + 1))
	NETNS_PAIR_SERVER_OUT=$NETNS_T/pair$_netns_npair.server
	NETNS_PAIR_CLIENT_OUT=$NETNS_T/pair$_netns_npair.client
	# a side that dies on a signal prints its stack (tests/lib/crash.c);
	# not in a sanitizer build: its runtime must come first in the
	# library list (ASan refuses to start behind a preloaded library
	# linked with it) and prints its own report
	crash=${SOFTHCA_BUILD:-}/tests/libshca_crash.so
	if [ -e "$crash" ] && ! ldd "$crash" 2>/dev/null |
		grep -qE 'lib(a|t|ub)san\.so'; then
		pre=(env "LD_PRELOAD=$crash${LD_PRELOAD:+ $LD_PRELOAD}")
	fi
	timeout -k 5 "$secs" ip netns exec "$srv_ns" "${pre[@]}" "${srv[@]}" \
		</dev/null >"$NETNS_PAIR_SERVER_OUT" 2>&1 &
	spid=$!
	if [ -n "${NETNS_PAIR_PORT:-}${NETNS_PAIR_READY:-}" ]; then
		# until the server listens (is ready), or has ended, within
		# SECONDS
		for ((n = secs * 10; n > 0; n--)); do
			if [ -n "${NETNS_PAIR_PORT:-}" ]; then
				_netns_listening "$srv_ns" "$NETNS_PAIR_PORT" &&
					break
			elif eval "$NETNS_PAIR_READY" >/dev/null 2>&1; then
				break
			fi
			kill -0 "$spid" 2>/dev/null || break
			sleep 0.1
		done
	else
		sleep 0.3
	fi
	timeout -k 5 "$secs" ip netns exec "$cli_ns" "${pre[@]}" "${cli[@]}" \
		</dev/null >"$NETNS_PAIR_CLIENT_OUT" 2>&1
	NETNS_PAIR_CLIENT_RC=$?
	wait "$spid"
	NETNS_PAIR_SERVER_RC=$?
	# rdma-core's ping-pongs report a wrong byte (-c, checked by the
	# server) on their output and still exit 0: such a side failed
	grep -qs 'invalid data in page' "$NETNS_PAIR_SERVER_OUT" &&
		NETNS_PAIR_SERVER_RC=65
	grep -qs 'invalid data in page' "$NETNS_PAIR_CLIENT_OUT" &&
		NETNS_PAIR_CLIENT_RC=65
	[ "$NETNS_PAIR_SERVER_RC" = 0 ] && [ "$NETNS_PAIR_CLIENT_RC" = 0 ] && return 0
	if [ -z "${NETNS_PAIR_QUIET:-}" ]; then
		echo "netns_pair: server ($srv_ns) exit $NETNS_PAIR_SERVER_RC," \
			"client ($cli_ns) exit $NETNS_PAIR_CLIENT_RC" >&2
		echo "  --- server: ${srv[*]}" >&2
		tail -8 "$NETNS_PAIR_SERVER_OUT" | sed 's/^/    /' >&2
		echo "  --- client: ${cli[*]}" >&2
		tail -8 "$NETNS_PAIR_CLIENT_OUT" | sed 's/^/    /' >&2
	fi
	return 1
}

# --- link faults ----------------------------------------------------------

_netns_port() {
	local i
	i=$(_netns_index "$1") || return 1
	echo "p$(printf '%s' abcdefghijklmnopqrstuvwxyz | cut -c"$i")"
}

# netns_link_down NAME: the bridge side of NAME's veth goes down, as if its
# cable were pulled: NAME's veth0 stays up, with its addresses, and loses
# carrier.
netns_link_down() {
	local port
	port=$(_netns_port "$1") || return 1
	timeout 20 ip -n "$NETNS_BR" link set "$port" down || return 1
	_netns_wait 10 eval "! _netns_carrier $(netns_name "$1")"
}

# netns_link_up NAME: the cable back; returns once the port forwards and
# NAME's veth0 has carrier again.  Neighbour (ARP, ND) entries that failed
# or are still being resolved while the cable was out are dropped in every
# host, so that the first packet after this resolves afresh instead of
# dying with a resolution that was started while the cable was out.
netns_link_up() {
	local port ns h
	port=$(_netns_port "$1") || return 1
	ns=$(netns_name "$1") || return 1
	timeout 20 ip -n "$NETNS_BR" link set "$port" up || return 1
	_netns_wait 10 _netns_port_forwarding "$NETNS_BR" "$port" &&
		_netns_wait 10 _netns_carrier "$ns" || return 1
	for h in "${NETNS_HOSTS[@]}"; do
		timeout 20 ip -n "$h" neigh flush dev "$NETNS_IF" nud failed 2>/dev/null
		timeout 20 ip -n "$h" neigh flush dev "$NETNS_IF" nud incomplete 2>/dev/null
	done
	return 0
}

# netns_netem NAME "SPEC": netem SPEC (e.g. "delay 5ms loss 1%") as the root
# qdisc of NAME's veth0.  77 with a message when tc or the kernel's netem
# (sch_netem) is missing, so that callers can skip; 1 for a bad SPEC.
netns_netem() {
	local ns spec=${2:?netns_netem NAME SPEC} err
	ns=$(netns_name "$1") || return 1
	if ! command -v tc >/dev/null 2>&1; then
		echo "netns_netem: tc is not installed (package iproute2)" >&2
		return 77
	fi
	# bare netem first: if that fails, netem itself is missing
	if ! err=$(timeout 20 ip netns exec "$ns" tc qdisc replace dev "$NETNS_IF" root netem 2>&1); then
		echo "netns_netem: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM," \
			"module sch_netem): $err" >&2
		return 77
	fi
	# shellcheck disable=SC2086  # SPEC is words for tc
	if ! err=$(timeout 20 ip netns exec "$ns" tc qdisc replace dev "$NETNS_IF" root netem $spec 2>&1); then
		echo "netns_netem: 'netem $spec' refused: $err" >&2
		netns_netem_clear "$1"
		return 1
	fi
}

netns_netem_clear() {
	local ns
	ns=$(netns_name "$1") || return 1
	timeout 20 ip netns exec "$ns" tc qdisc del dev "$NETNS_IF" root 2>/dev/null
	return 0
}
