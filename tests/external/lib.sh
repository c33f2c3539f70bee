# shellcheck shell=bash disable=SC2034
# Helpers for tests/external/test_*.sh (sourced, not run).
#
# Each test_*.sh is one ctest case (tests/CMakeLists.txt), run with
# SOFTHCA_BUILD (the build directory) and SOFTHCA_SRC (the source tree) in
# the environment; it can also be run by hand:
#     SOFTHCA_BUILD=build tests/external/test_devinfo.sh
# Exit status: 0 pass, 1 fail, 77 skip (a client is not installed).
# Only loopback is used, and every command runs under `timeout`.
set -u

SOFTHCA_SRC=${SOFTHCA_SRC:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
SOFTHCA_BUILD=${SOFTHCA_BUILD:-$SOFTHCA_SRC/build}
SOFTHCA_BUILD=$(cd "$SOFTHCA_BUILD" && pwd)
LIB=$SOFTHCA_BUILD/lib
TOOL=$SOFTHCA_BUILD/bin/softhca
# The clients see softhca only, as under `softhca run`: its libraries
# first (no user library path of their own) and its path shim preloaded,
# so that what looks for devices in /dev/infiniband and /sys/class finds
# them (docs/discovery.md); nothing else is preloaded.
export LD_LIBRARY_PATH=$LIB
export LD_PRELOAD=$LIB/libsofthca_path.so
unset RDMAV_DRIVERS IBV_DRIVERS
PY=/usr/bin/python3     # pyverbs exists only for Debian's python3

T=$(mktemp -d "${TMPDIR:-/tmp}/softhca-ext.XXXXXX")
trap 'rm -rf "$T"' EXIT

failures=0
checks=0
rc=0            # exit status of the last run()

# What ld.so prints when our exports do not satisfy a client.
LOADER_ERRORS='no version information available|symbol lookup error|version `[^'"'"']*'"'"' not found|undefined symbol|error while loading shared libraries'
# What rdma-core's ping-pongs print when -c finds a wrong byte (the server
# checks, and still exits 0): a pair whose output has it fails.
DATA_ERRORS='invalid data in page'

fail() {
	echo "FAIL: $*" >&2
	failures=$((failures + 1))
}

ok() {
	checks=$((checks + 1))
	[ -n "${VERBOSE:-}" ] && echo "ok: $*"
	return 0
}

skip() {
	echo "SKIP: $*"
	exit 77
}

# need CMD...: skip the whole test when a client is not installed.
need() {
	local c
	for c in "$@"; do
		command -v "$c" >/dev/null 2>&1 ||
			skip "$c is not installed (scripts/install-deps.sh)"
	done
}

[ -e "$LIB/libibverbs.so.1" ] || { echo "FAIL: no $LIB/libibverbs.so.1" >&2; exit 1; }
[ -e "$LD_PRELOAD" ] || { echo "FAIL: no $LD_PRELOAD" >&2; exit 1; }

# run NAME SECONDS CMD...: run CMD with a timeout; stdout in $T/NAME.out,
# stderr in $T/NAME.err, exit status in $rc.  Never fails by itself.
run() {
	local name=$1 secs=$2
	shift 2
	timeout -k 5 "$secs" "$@" </dev/null >"$T/$name.out" 2>"$T/$name.err"
	rc=$?
	if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
		echo "note: '$*' timed out after ${secs}s" >&2
	fi
	return 0
}

# expect_rc NAME WANT: $rc must be WANT ("nonzero" accepted).
expect_rc() {
	local name=$1 want=$2
	if [ "$want" = nonzero ]; then
		# an error exit, not a timeout (124, 137) or a signal (128 + n)
		case "$rc" in
		0|124|137|129|13[0-9]|1[4-5][0-9]) ;;
		*) ok "$name exit $rc"; return ;;
		esac
	else
		[ "$rc" = "$want" ] && { ok "$name exit $rc"; return; }
	fi
	fail "$name: exit status $rc, expected $want"
	show "$name"
}

# expect_out NAME REGEX [stdout|stderr]: output must match the ERE.
expect_out() {
	local name=$1 re=$2 stream=${3:-out}
	[ "$stream" = stderr ] && stream=err
	[ "$stream" = stdout ] && stream=out
	if grep -Eq -- "$re" "$T/$name.$stream"; then
		ok "$name matches /$re/"
	else
		fail "$name: std$stream does not match /$re/"
		show "$name"
	fi
}

# no_loader_errors NAME: stderr must hold no dynamic-loader complaint.
no_loader_errors() {
	local name=$1
	if grep -Eq -- "$LOADER_ERRORS" "$T/$name.err"; then
		fail "$name: the dynamic loader complains:"
		grep -E -- "$LOADER_ERRORS" "$T/$name.err" | head -5 | sed 's/^/    /' >&2
	else
		ok "$name: no loader errors"
	fi
}

show() {
	local name=$1
	echo "  --- stdout of $name:" >&2
	head -40 "$T/$name.out" | sed 's/^/    /' >&2
	echo "  --- stderr of $name:" >&2
	head -20 "$T/$name.err" | sed 's/^/    /' >&2
}

finish() {
	if [ "$failures" -ne 0 ]; then
		echo "$(basename "$0"): $failures of $((checks + failures)) checks failed"
		exit 1
	fi
	echo "$(basename "$0"): all $checks checks passed"
	exit 0
}

# free_port: a TCP port nobody listens on now (for a client's own
# out-of-band exchange; softhca's own ports are elsewhere).
free_port() {
	"$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# tcp_listening PORT: someone listens on TCP port PORT of this host
# (softhca's rdma_listen too: its CM ports are host ports,
# tests/cm/test_claims_cm.c cm_ports_are_host_ports)
tcp_listening() {
	[ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# udp_bound PORT: UDP port PORT of this host is bound (an rsocket
# datagram server: what comes before it reads is queued on that port and
# read by rsocket's service thread, which makes the QP then)
udp_bound() {
	[ -n "$(ss -Huln "sport = :$1" 2>/dev/null)" ]
}

# udp_waiting PORT: UDP port PORT is bound, and the main thread of the
# process that bound it sleeps in read(2) or poll(2) (x86-64 system calls
# 0, 7), i.e. waits for what comes next: rdma_get_cm_event after its
# rdma_listen (udaddy binds before it listens, and does not block between)
udp_waiting() {
	local pid
	pid=$(ss -Hulnp "sport = :$1" 2>/dev/null |
		sed -n 's/.*pid=\([0-9]*\),.*/\1/p' | head -1)
	[ -n "$pid" ] || return 1
	case $(cut -d' ' -f1 "/proc/$pid/syscall" 2>/dev/null) in
	0|7) return 0 ;;
	esac
	return 1
}

# wait_ready SECONDS PID CMD...: poll CMD (every 0.1 s) until it succeeds
# or process PID has ended, at most SECONDS.  A bound that ends a hung
# wait, not a timing check: what follows checks the outcome.
wait_ready() {
	local n=$(($1 * 10)) pid=$2
	shift 2
	for ((; n > 0; n--)); do
		"$@" && return 0
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# pair NAME SECONDS SERVER_CMD... -- CLIENT_CMD...: run a server, then its
# client, each bounded; both must exit 0.  Outputs in $T/NAME.{server,client}.
# The client starts once the server is ready (or has ended), within
# SECONDS: PAIR_PORT=P, once it listens on TCP port P; PAIR_READY=CMD,
# once CMD (evaluated) succeeds.  One of them is required: a client
# started after a fixed sleep races its server (issue 16: wait for a
# state, not a time).
pair() {
	local name=$1 secs=$2 srv=() cli=() spid src crc
	shift 2
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	if [ -z "${PAIR_PORT:-}${PAIR_READY:-}" ]; then
		fail "$name: pair without PAIR_PORT or PAIR_READY (test bug)"
		return 1
	fi
	timeout -k 5 "$secs" "${srv[@]}" </dev/null >"$T/$name.server" 2>&1 &
	spid=$!
	if [ -n "${PAIR_PORT:-}" ]; then
		wait_ready "$secs" "$spid" tcp_listening "$PAIR_PORT"
	else
		wait_ready "$secs" "$spid" eval "$PAIR_READY" 2>/dev/null
	fi
	timeout -k 5 "$secs" "${cli[@]}" </dev/null >"$T/$name.client" 2>&1
	crc=$?
	wait "$spid"
	src=$?
	if [ "$crc" = 0 ] && [ "$src" = 0 ] &&
	   ! grep -Eq -- "$LOADER_ERRORS|$DATA_ERRORS" "$T/$name.server" \
		"$T/$name.client"; then
		ok "$name"
		return 0
	fi
	fail "$name: server exit $src, client exit $crc$(grep -qs -- \
		"$DATA_ERRORS" "$T/$name.server" "$T/$name.client" &&
		echo ", data mismatch reported")"
	echo "  --- server:" >&2; show_output "$T/$name.server"
	echo "  --- client:" >&2; show_output "$T/$name.client"
	return 1
}

# show_output FILE: a failed program's output, indented: its first lines
# too, since what it wrote to stderr (unbuffered) lands there, before the
# stdout it flushed at exit.
show_output() {
	if [ "$(wc -l <"$1")" -le 40 ]; then
		sed 's/^/    /' "$1" >&2
	else
		{ head -20 "$1"; echo "[...]"; tail -20 "$1"; } |
			sed 's/^/    /' >&2
	fi
}
