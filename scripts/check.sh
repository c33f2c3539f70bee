#!/bin/bash
# Run every test against a build, then print one summary line.
#
#   scripts/check.sh BUILD_DIR       (`make check` builds first, then runs this)
#
# 1. ctest: the C tests (unit, verbs), the ABI export check and the external
#    clients (tests/external/test_*.sh); output is shown for failures.
# 2. rdma-core's pyverbs suite (scripts/pyverbs.sh --gate): the gated tests
#    (tests/external/pyverbs-gate.conf) count; the rest of the suite runs as
#    an informational run whose counts are printed but do not fail the check.
#
# Last line: "check: N passed, N failed, N skipped"; exit status 1 if
# anything failed.
# Environment: CTEST_PARALLEL_LEVEL (default nproc), CTEST_ARGS (extra ctest
# arguments, e.g. "-L verbs" or "-R external"), SOFTHCA_CHECK_PYVERBS=0 to
# leave out the pyverbs suite.
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${CTEST_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/softhca-check.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

passed=0 failed=0 skipped=0
failed_names=()
start=$(date +%s)

# --- 1. ctest -----------------------------------------------------------
echo "=== ctest ($build, $jobs at a time)"
# shellcheck disable=SC2086
(cd "$build" && ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}) \
	2>&1 | tee "$tmp/ctest.log"
ctest_status=${PIPESTATUS[0]}

# One status line per test:
#   " 3/12 Test  #3: verbs_test_pd ........   Passed    0.05 sec"
#   "...***Failed", "***Skipped", "***Timeout", "***Exception: SegFault",
#   "***Not Run", "Subprocess aborted***Exception:"
while IFS=$'\t' read -r name status; do
	case "$status" in
	Passed) passed=$((passed + 1)) ;;
	*Skipped*) skipped=$((skipped + 1)) ;;
	*) failed=$((failed + 1)); failed_names+=("ctest $name ($status)") ;;
	esac
done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[ *]*([^0-9]*[A-Za-z:]+[^0-9]*)[ ]+[0-9.]+ sec$/\1\t\2/p' \
	"$tmp/ctest.log" | sed -E 's/\t\**/\t/; s/ +$//')

ctest_counted=$((passed + failed + skipped))
if [ "$ctest_counted" -eq 0 ]; then
	failed=$((failed + 1))
	failed_names+=("ctest: no test ran (status $ctest_status)")
elif [ "$ctest_status" -ne 0 ] && [ "$failed" -eq 0 ]; then
	# ctest failed in a way the status lines do not show
	failed=$((failed + 1))
	failed_names+=("ctest exited with status $ctest_status")
fi
echo "=== ctest: $passed passed, $failed failed, $skipped skipped"

# --- 2. pyverbs suite ---------------------------------------------------
if [ "${SOFTHCA_CHECK_PYVERBS:-1}" != 0 ]; then
	echo
	echo "=== pyverbs suite (rdma-core tests, /usr/bin/python3)"
	"$src/scripts/pyverbs.sh" "$build" --gate --skip-reasons \
		--summary "$tmp/pyverbs.sum"
	py_status=$?
	gate_passed=0 gate_failed=0 gate_skipped=0
	suite_passed='' suite_failed=0 suite_errors=0 suite_skipped=0 suite_notrun=0
	if [ -s "$tmp/pyverbs.sum" ]; then
		# shellcheck disable=SC1091
		. "$tmp/pyverbs.sum"
		passed=$((passed + gate_passed))
		failed=$((failed + gate_failed))
		skipped=$((skipped + gate_skipped))
		[ "$gate_failed" -ne 0 ] &&
			failed_names+=("pyverbs gate: $gate_failed tests")
		if [ -n "${suite_passed:-}" ]; then
			info="pyverbs whole suite, informational: $suite_passed passed,"
			info="$info $suite_failed failed, $suite_errors errors,"
			info="$info $suite_skipped skipped"
			[ "${suite_notrun:-0}" -ne 0 ] &&
				info="$info, $suite_notrun not run (time budget)"
		fi
	else
		failed=$((failed + 1))
		failed_names+=("pyverbs runner (status $py_status)")
	fi
	if [ "$py_status" -ne 0 ] && [ "${gate_failed:-0}" -eq 0 ] &&
		[ -s "$tmp/pyverbs.sum" ]; then
		failed=$((failed + 1))
		failed_names+=("pyverbs runner exited with status $py_status")
	fi
fi

# --- summary --------------------------------------------------------------
echo
echo "=== summary ($(($(date +%s) - start)) s)"
for n in "${failed_names[@]}"; do
	echo "  FAILED: $n"
done
[ -n "${info:-}" ] && echo "  ($info)"
echo "check: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
