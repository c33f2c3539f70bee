#!/bin/bash
# Run every test against a build, then print one summary line.
#
#   scripts/check.sh BUILD_DIR       (`make check` builds first, then runs this)
#
# 1. ctest: the C tests (verbs, traffic), the ABI export check and the
#    external clients (tests/external/test_*.sh); output is shown for
#    failures.  Then the C tests again in ASan+UBSan and TSan builds.
# 2. rdma-core's pyverbs suite (scripts/pyverbs.sh --gate): the gated tests
#    (tests/external/pyverbs-gate.conf) count; the rest of the suite runs as
#    an informational run whose counts are printed but do not fail the check.
#    Then the gated tests again on the net path (scripts/pyverbs.sh --net:
#    SOFTHCA_NET=1, every QP pair over TCP/UDP on this host), bounded.
#
# Last line: "check: N passed, N failed, N skipped"; exit status 1 if
# anything failed.
# Environment: CTEST_PARALLEL_LEVEL (default nproc), CTEST_ARGS (extra ctest
# arguments, e.g. "-L verbs" or "-R external"), SOFTHCA_CHECK_PYVERBS=0 to
# leave out the pyverbs suite, SOFTHCA_CHECK_PYVERBS_NET=0 its net-path run
# only (SOFTHCA_PYVERBS_NET_BUDGET: its bound, default 300 s),
# SOFTHCA_CHECK_SANITIZERS=0 the sanitizer
# builds, SOFTHCA_FUZZ_TIME=0 the fuzzing runs (default 30 s in all).
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

# count_ctest LOG LABEL: add ctest's per-test status lines to the counts.
#   " 3/12 Test  #3: verbs_test_pd ........   Passed    0.05 sec"
#   "...***Failed", "***Skipped", "***Timeout", "***Exception: SegFault",
#   "***Not Run", "Subprocess aborted***Exception:"
count_ctest() {
	local log=$1 label=$2 status=$3 name st n=0 nfail=0
	while IFS=$'\t' read -r name st; do
		n=$((n + 1))
		case "$st" in
		Passed) passed=$((passed + 1)) ;;
		*Skipped*) skipped=$((skipped + 1)) ;;
		*) failed=$((failed + 1)); nfail=$((nfail + 1))
		   failed_names+=("$label $name ($st)") ;;
		esac
	done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ Test +#[0-9]+: ([^ ]+) \.*[ *]*([^0-9]*[A-Za-z:]+[^0-9]*)[ ]+[0-9.]+ sec$/\1\t\2/p' \
		"$log" | sed -E 's/\t\**/\t/; s/ +$//')
	if [ "$n" -eq 0 ]; then
		failed=$((failed + 1))
		failed_names+=("$label: no test ran (status $status)")
	elif [ "$status" -ne 0 ] && [ "$nfail" -eq 0 ]; then
		# ctest failed in a way the status lines do not show
		failed=$((failed + 1))
		failed_names+=("$label exited with status $status")
	fi
}

# --- 1. ctest -----------------------------------------------------------
echo "=== ctest ($build, $jobs at a time)"
# shellcheck disable=SC2086
(cd "$build" && ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}) \
	2>&1 | tee "$tmp/ctest.log"
count_ctest "$tmp/ctest.log" ctest "${PIPESTATUS[0]}"
echo "=== ctest: $passed passed, $failed failed, $skipped skipped"

# --- 1b. the C tests again under the sanitizers -------------------------
# ASan+UBSan (leaks included) and TSan (the shared rings, the engine
# thread) builds of the library and its C tests, in BUILD_DIR/san-*.
# SOFTHCA_CHECK_SANITIZERS=0 leaves them out.
if [ "${SOFTHCA_CHECK_SANITIZERS:-1}" != 0 ]; then
	for san in address,undefined thread; do
		dir=$build/san-${san%%,*}
		echo
		echo "=== C tests under -fsanitize=$san ($dir)"
		if ! { cmake -S "$src" -B "$dir" -DSOFTHCA_SANITIZE="$san" \
			-DCMAKE_BUILD_TYPE=Debug >"$tmp/san.log" 2>&1 &&
		       cmake --build "$dir" -j "$jobs" >>"$tmp/san.log" 2>&1; }; then
			tail -20 "$tmp/san.log"
			failed=$((failed + 1))
			failed_names+=("sanitizer build $san")
			continue
		fi
		(cd "$dir" && ctest --output-on-failure -j "$jobs" \
			-L 'verbs|traffic|cm') 2>&1 | tee "$tmp/ctest-san.log"
		count_ctest "$tmp/ctest-san.log" "$san" "${PIPESTATUS[0]}"
	done
fi

# --- 1c. the fuzz targets under libFuzzer, for a bounded time ------------
# fuzz_wire (the wire parser), fuzz_net_rx (the net path's receive side)
# and fuzz_net_hs (the connection handshake): SOFTHCA_FUZZ_TIME seconds in
# all (default 30, a third each; 0 leaves them out).
fuzz_time=${SOFTHCA_FUZZ_TIME:-30}
if [ "$fuzz_time" != 0 ]; then
	fuzz_each=$(((fuzz_time + 2) / 3))
	echo
	echo "=== libFuzzer: fuzz_wire, fuzz_net_rx, fuzz_net_hs" \
		"(${fuzz_each} s each)"
	if ! command -v clang >/dev/null 2>&1; then
		echo "  skipped: clang is not installed (scripts/install-deps.sh)"
		skipped=$((skipped + 1))
	elif make -C "$src" --no-print-directory fuzz \
		FUZZ_TIME="$fuzz_each" FUZZ_BUILD="$build/fuzz" \
		>"$tmp/fuzz.log" 2>&1; then
		grep -E '^#[0-9]+[[:space:]]+DONE' "$tmp/fuzz.log"
		passed=$((passed + 1))
	else
		tail -40 "$tmp/fuzz.log"
		failed=$((failed + 1))
		failed_names+=("libFuzzer (see above; crash-* in $build/fuzz)")
	fi
fi

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

# --- 2b. the gated pyverbs tests on the net path ----------------------
# The same gated tests with SOFTHCA_NET=1: the two QPs of each test, in one
# process, talk over TCP/UDP on this host (the inter-host transport).
# Bounded by SOFTHCA_PYVERBS_NET_BUDGET seconds (scripts/pyverbs.sh --net).
if [ "${SOFTHCA_CHECK_PYVERBS:-1}" != 0 ] &&
	[ "${SOFTHCA_CHECK_PYVERBS_NET:-1}" != 0 ]; then
	echo
	echo "=== pyverbs gated tests on the net path (SOFTHCA_NET=1)"
	"$src/scripts/pyverbs.sh" "$build" --net \
		--summary "$tmp/pyverbs-net.sum"
	py_status=$?
	gate_passed=0 gate_failed=0 gate_skipped=0
	if [ -s "$tmp/pyverbs-net.sum" ]; then
		# shellcheck disable=SC1091
		. "$tmp/pyverbs-net.sum"
		passed=$((passed + gate_passed))
		failed=$((failed + gate_failed))
		skipped=$((skipped + gate_skipped))
		[ "$gate_failed" -ne 0 ] &&
			failed_names+=("pyverbs net path: $gate_failed tests")
		if [ "$py_status" -ne 0 ] && [ "$gate_failed" -eq 0 ]; then
			failed=$((failed + 1))
			failed_names+=("pyverbs net-path runner exited with status $py_status")
		fi
	else
		failed=$((failed + 1))
		failed_names+=("pyverbs net-path runner (status $py_status)")
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
