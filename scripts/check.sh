#!/bin/bash
# Run every test against a build, then print one summary line.
#
#   scripts/check.sh BUILD_DIR       (`make check` builds first, then runs this)
#
# 1. ctest: the C tests (verbs, traffic), the ABI export check and the
#    external clients (tests/external/test_*.sh); output is shown for
#    failures.  Then the C tests again in ASan+UBSan and TSan builds
#    (the labels of section 1b, below).
# 2. rdma-core's pyverbs suite (scripts/pyverbs.sh --gate): the gated tests
#    (tests/external/pyverbs-gate.conf) count; the rest of the suite runs as
#    an informational run whose counts are printed but do not fail the check.
#    Then the gated tests again on the net path (scripts/pyverbs.sh --net:
#    SOFTHCA_NET=1, every QP pair over TCP/UDP on this host), bounded.
#
# Last line, and exit status 1 if anything failed:
#
#   check: N passed, N failed, N skipped (C cases: P passed, F failed,
#   S skipped; parts of scripts skipped: K)
#
# (one line).  N counts the tests as ctest reports them, one per C test
# binary or script, in every ctest run (the plain one, then the ASan+UBSan
# and TSan ones), plus each libFuzzer target and each gated pyverbs test
# (twice: plain and net path).  A C binary whose cases passed or skipped,
# with one skip at least, exits 77 and counts as skipped; its passes show
# in the C cases: P, F and S count every TEST case of the C binaries, read
# from the TAP lines ("1..N", "ok 3 - name", "not ok 4 - name", "ok 5 -
# name # SKIP") of ctest's full log (BUILD/Testing/Temporary/LastTest.log)
# and summed over the ctest runs (a case counts once per run); F includes
# the cases a killed binary never ran.  K counts the "SKIP: why" lines of
# shell tests that passed (a part they could not run).  Before the last
# line the summary lists every skip with its reason (C cases, whole tests,
# parts of scripts) and every failure (tests, their failed cases, and
# tests whose output holds a sanitizer report although they passed: UBSan
# recovers and exits 0).
# Environment: CTEST_PARALLEL_LEVEL (default nproc), CTEST_ARGS (extra ctest
# arguments, e.g. "-L verbs" or "-R external"), SOFTHCA_CHECK_PYVERBS=0 to
# leave out the pyverbs suite, SOFTHCA_CHECK_PYVERBS_NET=0 its net-path run
# only (SOFTHCA_PYVERBS_NET_BUDGET: its bound, default 300 s),
# SOFTHCA_CHECK_SANITIZERS=0 the sanitizer
# builds, SOFTHCA_FUZZ_TIME=0 the fuzzing runs (default 30 s in all).
# CI=true (.ci/run sets it): what the machine lacks (tshark, ::1, an
# interface address, clang, ...) fails instead of skipping, in the C tests
# (SKIP_ENV, tests/lib/harness.h), the scripts that check CI, and here.
set -uo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUILD_DIR" >&2; exit 2; }
build=$(cd "$1" && pwd) || exit 2
src=$(cd "$(dirname "$0")/.." && pwd)
jobs=${CTEST_PARALLEL_LEVEL:-$(nproc 2>/dev/null || echo 2)}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/softhca-check.XXXXXX")
huge=/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages
huge_before=''
# the huge pages reserved for the pyverbs suite go back as they were
trap 'rm -rf "$tmp"; [ -z "$huge_before" ] || echo "$huge_before" >"$huge"' EXIT

passed=0 failed=0 skipped=0
c_passed=0 c_failed=0 c_skipped=0 s_parts=0
failed_names=() skip_list=()
declare -A status_of=()		# "LABEL TEST" -> ctest's status word
start=$(date +%s)

# count_ctest LOG LABEL: add ctest's per-test status lines to the counts.
#   " 3/12 Test  #3: verbs_test_pd ........   Passed    0.05 sec"
#   "...***Failed", "***Skipped", "***Timeout", "***Exception: SegFault",
#   "***Not Run", "Subprocess aborted***Exception:"
count_ctest() {
	local log=$1 label=$2 status=$3 name st n=0 nfail=0
	while IFS=$'\t' read -r name st; do
		n=$((n + 1))
		status_of["$label $name"]=$st
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

# scan_log LASTTEST: one tab-separated record per finding in ctest's full
# log, where each test's whole output sits between "Output:" (and a line
# of dashes) and "<end of output>", under "N/M Test: NAME":
#   cases TEST P F S NOTRUN   a harness binary (its plan "1..N" first)
#   skip  TEST CASE REASON    a skipped case ("  skip reason: " before it)
#   fail  TEST CASE           a failed case
#   part  TEST REASON         a "SKIP: " line of a script (not a harness)
#   whole TEST REASON         why a script would be skipped as a whole
#   san   TEST LINE           the first sanitizer report in the output
scan_log() {
	awk '
	function clean(t) { gsub(/\t/, " ", t); return t }
	function flush(  i) {
		if (harness) {
			nr = plan - p - f - s
			if (nr < 0)
				nr = 0
			printf "cases\t%s\t%d\t%d\t%d\t%d\n", test, p, f, s, nr
		} else {
			for (i = 1; i <= nparts; i++)
				printf "part\t%s\t%s\n", test, parts[i]
			why = nparts ? parts[1] : (fuzzskip != "" ? fuzzskip : last)
			printf "whole\t%s\t%s\n", test, why
		}
		if (san != "")
			printf "san\t%s\t%s\n", test, san
	}
	/^[0-9]+\/[0-9]+ Test: / && !inout {
		test = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", test); next
	}
	/^Output:$/ && !inout {
		inout = 1; dashes = 1; harness = 0; plan = 0
		p = f = s = nparts = 0; reason = last = san = fuzzskip = ""
		next
	}
	!inout { next }
	dashes { dashes = 0; if ($0 ~ /^-+$/) next }
	/^<end of output>$/ { flush(); inout = 0; next }
	{
		line = clean($0)
		if (line != "")
			last = line
		if (san == "" && line ~ /ERROR: (Address|Leak)Sanitizer|WARNING: ThreadSanitizer|: runtime error: /)
			san = line
		if (!harness && plan == 0 && line ~ /^1\.\.[0-9]+$/) {
			harness = 1; plan = substr(line, 4) + 0; next
		}
		if (!harness) {
			if (line ~ /^SKIP: /)
				parts[++nparts] = substr(line, 7)
			else if (fuzzskip == "" && line ~ /^fuzz_[a-z_]+: skipped: /)
				fuzzskip = line
			next
		}
		if (line ~ /^  skip reason: /) {
			reason = substr(line, 16); next
		}
		if (reason == "" && line ~ /^fuzz_[a-z_]+: skipped: /)
			reason = line	# from a fuzz target setup in a case
		if (line ~ /^ok [0-9]+ - .* # SKIP$/) {
			s++; name = line
			sub(/^ok [0-9]+ - /, "", name); sub(/ # SKIP$/, "", name)
			printf "skip\t%s\t%s\t%s\n", test, name,
				reason != "" ? reason : "(no reason given)"
			reason = ""
		} else if (line ~ /^ok [0-9]+ - /) {
			p++; reason = ""
		} else if (line ~ /^not ok [0-9]+ - /) {
			f++; name = line
			sub(/^not ok [0-9]+ - /, "", name)
			printf "fail\t%s\t%s\n", test, name
			reason = ""
		}
	}' "$1"
}

# count_cases LASTTEST LABEL: add a ctest run's C cases, skips and
# sanitizer reports (scan_log) to the counts and lists; count_ctest first.
count_cases() {
	local log=$1 label=$2 kind t a b c d st
	if [ ! -s "$log" ]; then
		failed=$((failed + 1))
		failed_names+=("$label: no ctest log $log to count the C cases")
		return
	fi
	while IFS=$'\t' read -r kind t a b c d; do
		st=${status_of["$label $t"]:-}
		case $kind in
		cases)
			c_passed=$((c_passed + a))
			c_failed=$((c_failed + b + d))
			c_skipped=$((c_skipped + c))
			[ "$d" -eq 0 ] ||
				failed_names+=("$label $t: $d cases did not run")
			;;
		skip) skip_list+=("$label $t: $a: $b") ;;
		fail) failed_names+=("$label $t: case $a") ;;
		part)
			if [ "$st" = Passed ]; then
				s_parts=$((s_parts + 1))
				skip_list+=("$label $t (a part): $a")
			fi
			;;
		whole) [[ $st != *Skipped* ]] || skip_list+=("$label $t: $a") ;;
		san)	# counted as passed or skipped: a failure instead
			if [ "$st" = Passed ]; then
				passed=$((passed - 1))
			elif [[ $st == *Skipped* ]]; then
				skipped=$((skipped - 1))
			else
				continue
			fi
			failed=$((failed + 1))
			failed_names+=("$label $t: sanitizer report: $a")
			;;
		esac
	done < <(scan_log "$log")
}

# --- 0. 2 MiB huge pages -------------------------------------------------
# A C case (traffic_test_mapped_file's hugetlb memfd) and three gated
# pyverbs tests (test_odp's huge-page traffic, test_parent_domain's
# huge-page allocator) need 2 MiB huge pages, which a host has none of by
# default: as root, 16 are reserved for the run (32 MiB, given back on
# exit) and those tests must pass like any other; otherwise they skip
# (the gate file accepts the pyverbs skip for that reason only).
huge_pages() {
	local now
	now=$(cat "$huge" 2>/dev/null) || {
		echo "huge pages: none on this kernel: their tests skip"
		return 0
	}
	[ "$now" -gt 0 ] && return 0
	if [ "$(id -u)" != 0 ]; then
		echo "huge pages: not root: no 2 MiB huge pages reserved, their tests skip"
		return 0
	fi
	huge_before=$now
	echo 16 >"$huge" 2>/dev/null
	now=$(cat "$huge")
	echo "huge pages: reserved $now of 2 MiB for the tests (vm.nr_hugepages was $huge_before)"
	if [ "$now" -eq 0 ] && [ "${CI:-}" = true ]; then
		failed=$((failed + 1))
		failed_names+=("2 MiB huge pages for the tests (none could be reserved)")
	fi
}
huge_pages

# --- 1. ctest -----------------------------------------------------------
echo "=== ctest ($build, $jobs at a time)"
rm -f "$build/Testing/Temporary/LastTest.log"
# shellcheck disable=SC2086
(cd "$build" && ctest --output-on-failure -j "$jobs" ${CTEST_ARGS:-}) \
	2>&1 | tee "$tmp/ctest.log"
count_ctest "$tmp/ctest.log" ctest "${PIPESTATUS[0]}"
count_cases "$build/Testing/Temporary/LastTest.log" ctest
echo "=== ctest: $passed passed, $failed failed, $skipped skipped" \
	"(C cases: $c_passed passed, $c_failed failed, $c_skipped skipped)"

# --- 1b. the C tests again under the sanitizers -------------------------
# ASan+UBSan (leaks included) and TSan (the shared rings, the engine
# thread) builds of the library and its C tests, in BUILD_DIR/san-*.
# SOFTHCA_CHECK_SANITIZERS=0 leaves them out.
#
# Labels verbs, traffic and cm under both.  Besides (2 cores, ctest -j2,
# figures of 30 Nov 2026 at a 1-minute load of 2 to 5 unless said, Debug
# builds; whole labels as ctest's "Label Time Summary"):
#   ASan+UBSan: security and unit (the hostile peers: forged arenas,
#     rings, import records, packets, handshakes, and the parsers'
#     replays), but for test_keys (35 s: brute force), test_netauth_netns
#     (25 s), flood (13 s) and test_cq_thread (13 s with
#     CQ_THREAD_RUNS=1, 170 s at its 500 runs) and unit_fuzz_net_rx_replay
#     (35 s, 70 s at a load of 7: its seeds are the corpus that the
#     libFuzzer phase 1c starts from, under ASan+UBSan there): 28 tests;
#     with that one (29) they took 38 s, 83 s at a load of 7 (whole
#     labels: security 140 s*proc / 70 s, unit 58 s*proc / 35 s);
#   TSan: unit and security but for the same three long security tests
#     as under ASan+UBSan: with TSan's exit sleep at 50 ms (below) the
#     TSan phase took 214 s for verbs, traffic, cm and 14 unit tests
#     (844 s with the default 1 s), security's 12 tests 37 s, and
#     test_cq_thread's 504 runs 175 s beside the 3 unit tests left out
#     before (unit_fuzz_net_rx_replay 49 s, unit_test_heap 16 s,
#     unit_fuzz_wire_replay 13 s), load ~1.
# Every test of both labels passes under both sanitizers; README
# "Tests".
if [ "${SOFTHCA_CHECK_SANITIZERS:-1}" != 0 ]; then
	for san in address,undefined thread; do
		dir=$build/san-${san%%,*}
		case $san in
		address,undefined)
			labels='verbs|traffic|cm|security|unit'
			leave='^(security_test_keys|security_test_netauth_netns'
			leave+='|security_flood|security_test_cq_thread'
			leave+='|unit_fuzz_net_rx_replay)$'
			;;
		*)
			labels='verbs|traffic|cm|security|unit'
			leave='^(security_test_keys|security_test_netauth_netns'
			leave+='|security_flood)$'
			;;
		esac
		echo
		echo "=== C tests under -fsanitize=$san ($dir): -L '$labels'"
		if ! { cmake -S "$src" -B "$dir" -DSOFTHCA_SANITIZE="$san" \
			-DCMAKE_BUILD_TYPE=Debug >"$tmp/san.log" 2>&1 &&
		       cmake --build "$dir" -j "$jobs" >>"$tmp/san.log" 2>&1; }; then
			tail -20 "$tmp/san.log"
			failed=$((failed + 1))
			failed_names+=("sanitizer build $san")
			continue
		fi
		rm -f "$dir/Testing/Temporary/LastTest.log"
		# a C case's own limit (the harness's alarm, 60 s) tripled:
		# the sanitizers run the data path 5-15x slower
		# (traffic_test_read_stop took 62 s under TSan at a load of 5)
		# TSan sleeps 1 s in every process's exit (atexit_sleep_ms,
		# for races with threads still running then): two processes a
		# case made a 0.3 s test take 84 s (traffic_test_mw_traffic,
		# 48 cases); 50 ms still gives the engine thread its turn
		(cd "$dir" && TEST_TIMEOUT=${TEST_TIMEOUT:-180} \
			TSAN_OPTIONS="atexit_sleep_ms=50${TSAN_OPTIONS:+:$TSAN_OPTIONS}" \
			ctest --output-on-failure -j "$jobs" \
			-L "$labels" -E "$leave") 2>&1 | tee "$tmp/ctest-san.log"
		count_ctest "$tmp/ctest-san.log" "$san" "${PIPESTATUS[0]}"
		count_cases "$dir/Testing/Temporary/LastTest.log" "$san"
	done
fi

# --- 1c. the fuzz targets under libFuzzer, for a bounded time ------------
# fuzz_wire (the wire parser), fuzz_net_rx (the net path's receive side)
# and fuzz_net_hs (the connection handshake): SOFTHCA_FUZZ_TIME seconds in
# all (default 30, a third each; 0 leaves them out), each a test of its
# own.  A target that cannot run here prints "TARGET: skipped: why" and
# exits 77 (tests/fuzz/fuzz.h): a skip, but a failure under CI (CI=true),
# as is a missing clang, which scripts/install-deps.sh installs.
fuzz_time=${SOFTHCA_FUZZ_TIME:-30}
ci=${CI:-}
[ "$ci" = 0 ] || [ "$ci" = false ] && ci=
if [ "$fuzz_time" != 0 ]; then
	fuzz_each=$(((fuzz_time + 2) / 3))
	echo
	echo "=== libFuzzer: fuzz_wire, fuzz_net_rx, fuzz_net_hs" \
		"(${fuzz_each} s each)"
	if ! command -v clang >/dev/null 2>&1; then
		why="clang is not installed (scripts/install-deps.sh)"
		echo "  skipped: $why"
		if [ -n "$ci" ]; then
			failed=$((failed + 1))
			failed_names+=("libFuzzer: CI=true and $why")
		else
			skipped=$((skipped + 1))
			skip_list+=("libFuzzer: $why")
		fi
	else
		for t in fuzz_wire fuzz_net_rx fuzz_net_hs; do
			if make -C "$src" --no-print-directory fuzz \
				FUZZ_TARGETS="$t" FUZZ_TIME="$fuzz_each" \
				FUZZ_BUILD="$build/fuzz" >"$tmp/fuzz.log" 2>&1; then
				grep -E '^#[0-9]+[[:space:]]+DONE' "$tmp/fuzz.log"
				passed=$((passed + 1))
			elif why=$(grep -m1 "^$t: skipped: " "$tmp/fuzz.log"); then
				echo "  $why"
				skipped=$((skipped + 1))
				skip_list+=("libFuzzer $why")
			else
				tail -40 "$tmp/fuzz.log"
				failed=$((failed + 1))
				failed_names+=("libFuzzer $t (see above; crash-* in $build/fuzz)")
			fi
		done
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
for n in "${skip_list[@]}"; do
	echo "  SKIP: $n"
done
for n in "${failed_names[@]}"; do
	echo "  FAILED: $n"
done
[ -n "${info:-}" ] && echo "  ($info)"
echo "check: $passed passed, $failed failed, $skipped skipped" \
	"(C cases: $c_passed passed, $c_failed failed, $c_skipped skipped;" \
	"parts of scripts skipped: $s_parts)"
[ "$failed" -eq 0 ]
