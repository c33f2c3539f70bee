#!/bin/bash
# Run rdma-core's pyverbs test suite (Debian: rdma-core + python3-pyverbs)
# against softhca's libibverbs.
#
#   scripts/pyverbs.sh BUILD_DIR [OPTIONS] [MODULES...]
#
#   MODULES        test modules, e.g. test_pd test_qp (default: all 44)
#   --gate         apply tests/external/pyverbs-gate.conf (its header, and
#                  docs/pyverbs-gate.md): the gated tests run first and
#                  decide the exit status (with the file's passed=N floors
#                  per module and its anchored skip-ok reasons); all others
#                  run as an informational run whose counts do not.  Without
#                  --gate, any failure or error makes the exit status 1.
#   --gate-only    run only the gated tests
#   --net          the net path: run the gated tests (--gate --gate-only)
#                  with SOFTHCA_NET=1, so that every QP pair talks over
#                  TCP/UDP on this host instead of the same-host path; the
#                  whole run is bounded by SOFTHCA_PYVERBS_NET_BUDGET seconds
#                  (default 300), after which it is stopped and fails.  A
#                  gated test fails too if a QP of it received packets, or
#                  a UD QP of it sent packets (softhca stat), that the
#                  SOFTHCA_PCAP traces written during it do not show, and a
#                  module with fewer such traffic tests than its gate line's
#                  traffic=M fails (scripts/pyverbs_net.py)
#   -v             print every test as it finishes
#   --skip-reasons print why tests skipped, grouped
#   --summary F    write key=value counts to F (used by scripts/check.sh)
#   --dev NAME     device (default softhca_lo)
#   -j N           modules at once in the informational run (default nproc)
#
# The suite ships gzipped in /usr/share/doc/rdma-core/tests; it is copied to
# a temporary directory and unpacked there.  It runs under /usr/bin/python3
# (pyverbs exists only for Debian's python, not for a pyenv/venv python3 on
# PATH), in the environment of `softhca run` (BUILD_DIR/bin/softhca env:
# BUILD_DIR/lib first on LD_LIBRARY_PATH, the path shim on LD_PRELOAD).
# Environment: SOFTHCA_PYVERBS_POLL_TIMEOUT (seconds a test waits for a
# completion, default 2; the suite's own is 10), SOFTHCA_PYVERBS_TEST_TIMEOUT
# (seconds before a test counts as hung, default 30), SOFTHCA_PYVERBS_JOBS
# (modules run at once in the informational run, default nproc),
# SOFTHCA_PYVERBS_BUDGET (seconds after which the informational run starts
# no more modules, default 600; the gate always runs in full).
set -euo pipefail

usage() { sed -n '2,/^set /{/^set /d;s/^# \{0,1\}//;p}' "$0"; }

[ $# -ge 1 ] || { usage >&2; exit 2; }
case "$1" in -h|--help) usage; exit 0 ;; esac
build=$(cd "$1" && pwd)
shift
src=$(cd "$(dirname "$0")/.." && pwd)
suite=/usr/share/doc/rdma-core/tests
py=/usr/bin/python3

args=()
net=0
while [ $# -gt 0 ]; do
	case "$1" in
	--gate) args+=(--gate "$src/tests/external/pyverbs-gate.conf") ;;
	--net) net=1 ;;
	*) args+=("$1") ;;
	esac
	shift
done
bound=()
if [ "$net" = 1 ]; then
	args+=(--gate "$src/tests/external/pyverbs-gate.conf" --gate-only)
	export SOFTHCA_NET=1
	# the runner's children end themselves (their per-test watchdog, or
	# a closed report pipe) once the runner is stopped
	bound=(timeout -k 10 "${SOFTHCA_PYVERBS_NET_BUDGET:-300}")
fi

if [ ! -e "$build/lib/libibverbs.so.1" ] || [ ! -x "$build/bin/softhca" ]; then
	echo "pyverbs: $build/lib/libibverbs.so.1 or $build/bin/softhca" \
		"not found: build first" >&2
	exit 2
fi
if [ ! -d "$suite" ] || [ ! -x "$py" ] ||
	! "$py" -c 'import pyverbs' 2>/dev/null; then
	echo "pyverbs: needs $suite and $py with pyverbs" \
		"(apt-get install rdma-core python3-pyverbs)" >&2
	exit 2
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/softhca-pyverbs.XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -r "$suite" "$work/tests"
find "$work/tests" -name '*.gz' -exec gunzip -f {} +
if [ "$net" = 1 ]; then
	# each test's traces and QP counters show that the net path carried
	# its traffic (scripts/pyverbs_net.py)
	mkdir "$work/net"
	export SOFTHCA_PCAP="$work/net/%p.pcap"
	args+=(--net-evidence "$work/net" --softhca "$build/bin/softhca")
fi

# as a user would run it: `softhca run`'s environment (the libraries, and
# the path shim through which test_rdmacm finds each device's interface)
env_lines=$("$build/bin/softhca" env) || exit 2
eval "$env_lines"
export PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONHOME
status=0
"${bound[@]}" "$py" "$src/scripts/pyverbs_suite.py" --tests-dir "$work/tests" \
	"${args[@]}" || status=$?
if [ "$net" = 1 ] && [ "$status" = 124 ]; then
	echo "pyverbs: the net-path run took more than" \
		"${SOFTHCA_PYVERBS_NET_BUDGET:-300} s: stopped" >&2
fi
exit "$status"
