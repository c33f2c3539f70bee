#!/bin/bash
# Run rdma-core's pyverbs test suite (Debian: rdma-core + python3-pyverbs)
# against softhca's libibverbs.
#
#   scripts/pyverbs.sh BUILD_DIR [OPTIONS] [MODULES...]
#
#   MODULES        test modules, e.g. test_pd test_qp (default: all 44)
#   --gate         apply tests/external/pyverbs-gate.conf: the gated tests
#                  run first and decide the exit status; all others run as an
#                  informational run whose counts do not.  Without --gate,
#                  any failure or error makes the exit status 1.
#   --gate-only    run only the gated tests
#   -v             print every test as it finishes
#   --skip-reasons print why tests skipped, grouped
#   --summary F    write key=value counts to F (used by scripts/check.sh)
#   --dev NAME     device (default softhca_lo)
#   -j N           modules at once in the informational run (default nproc)
#
# The suite ships gzipped in /usr/share/doc/rdma-core/tests; it is copied to
# a temporary directory and unpacked there.  It runs under /usr/bin/python3
# (pyverbs exists only for Debian's python, not for a pyenv/venv python3 on
# PATH), with LD_LIBRARY_PATH=BUILD_DIR/lib.
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
while [ $# -gt 0 ]; do
	case "$1" in
	--gate) args+=(--gate "$src/tests/external/pyverbs-gate.conf") ;;
	*) args+=("$1") ;;
	esac
	shift
done

if [ ! -e "$build/lib/libibverbs.so.1" ]; then
	echo "pyverbs: $build/lib/libibverbs.so.1 not found: build first" >&2
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

export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONDONTWRITEBYTECODE=1
unset PYTHONPATH PYTHONHOME
"$py" "$src/scripts/pyverbs_suite.py" --tests-dir "$work/tests" "${args[@]}"
