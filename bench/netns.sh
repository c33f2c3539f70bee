#!/bin/bash
# bench/netns.sh: softhca between two network namespaces beside plain TCP
# on the same veth path, in one run: perftest ib_write_bw (64 KiB, 1 MiB),
# ib_write_lat and ib_send_lat (8 B) over softhca_veth0, and qperf tcp_bw
# (64 KiB, 1 MiB) and tcp_lat (8 B) between the same two namespaces.  A
# benchmark, not a test: no thresholds, never run by `make check`.  Needs
# root (it creates the namespaces with tests/netns/lib.sh); without root it
# says so and exits 0.  See bench/README.md.
#
#   bench/netns.sh [--rounds N] [--quick] [--lib DIR] [--build DIR]
#                  [--cpus A,B | --no-pin] [--out DIR] [--budget SECONDS]
#                  [--no-install]
#   bench/netns.sh --report bench/results/DIR...
#
# Prints one markdown table (case, softhca, TCP, ratio; medians over the
# rounds with min-max) on stdout; the raw output of every command,
# metrics.tsv and table.md go to bench/results/<date>-netns/ (gitignored).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3
QUICK=0
LIB=
BUILD=$ROOT/build-bench
CPUS=0,1
OUT=
BUDGET=300
INSTALL=1
REPORT=()

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
	cat <<'EOF'

Options:
  --rounds N      repeat the whole set N times (default 3); the table shows
                  the median and the min-max of the rounds
  --quick         one round, shorter runs (a smoke run of the script)
  --lib DIR       use the softhca libibverbs.so.1 in DIR instead of building
  --build DIR     build softhca (CMake Release) in DIR (default build-bench)
  --cpus A,B      servers (namespace a) on CPU A, clients (namespace b) on
                  CPU B (default 0,1)
  --no-pin        no CPU pinning at all
  --out DIR       results directory (default bench/results/<date>-netns)
  --budget S      stop everything after S seconds of measuring (default 300)
  --no-install    never apt-get (only report what is missing)
  --report DIR... print the table over every round of earlier runs'
                  results directories (measures nothing, needs no root)
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift ;;
	--quick) QUICK=1; ROUNDS=1 ;;
	--lib) LIB=$(cd "$2" && pwd) || exit 2; shift ;;
	--build) BUILD=$2; shift ;;
	--cpus) CPUS=$2; shift ;;
	--no-pin) CPUS= ;;
	--out) OUT=$2; shift ;;
	--budget) BUDGET=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--report) shift; REPORT=("$@"); break ;;
	-h|--help) usage; exit 0 ;;
	*) echo "netns.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "netns.sh: --rounds wants a positive number" >&2; exit 2 ;; esac
case "$BUDGET" in ''|*[!0-9]*|0) echo "netns.sh: --budget wants a positive number" >&2; exit 2 ;; esac

exec 3>&2   # the terminal's stderr, also inside redirected function calls
log() { echo "bench-netns: $*" >&3; }
die() { log "$*"; exit 1; }

# ---- the table ----------------------------------------------------------------
#
# metrics.tsv: round, source, metric, value.  Sources: softhca (perftest),
# tcp (qperf) and softhca-fail (value 1: that case failed in that round).
# Each cell is the median over the rounds; the ratios are ratios of those
# medians.

report() { # metrics.tsv: the table on stdout
	awk -F'\t' '
	function median(key,   n, i, j, t, a) {
		n = cnt[key]
		for (i = 1; i <= n; i++) a[i] = val[key, i]
		for (i = 2; i <= n; i++) {            # insertion sort
			t = a[i]
			for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]
			a[j + 1] = t
		}
		lo[key] = a[1]; hi[key] = a[n]
		return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	function fmt(x) {
		if (x >= 100) return sprintf("%.0f", x)
		if (x >= 10) return sprintf("%.1f", x)
		if (x >= 1) return sprintf("%.2f", x)
		if (x >= 0.01) return sprintf("%.3f", x)
		return sprintf("%.2g", x)
	}
	function cell(key,   s) {
		if (!(key in cnt)) return (key in failed) ? "failed" : "—"
		s = (cnt[key] < 2 || lo[key] == hi[key]) ? fmt(med[key]) \
			: fmt(med[key]) " (" fmt(lo[key]) "–" fmt(hi[key]) ")"
		if (key in failed) s = s ", failed " failed[key] "×"
		return s
	}
	function ratio(a, b) {
		if (!(a in med) || !(b in med) || med[a] == 0 || med[b] == 0) return ""
		return med[a] / med[b]
	}
	function rfmt(r) {
		if (r == "") return "—"
		return sprintf(r >= 10 ? "%.0f×" : r >= 0.1 ? "%.2f×" : "%.2g×", r)
	}
	function goal(r, lat) {
		if (lat) return "≤ 1.20×" (r == "" ? "" : r <= 1.2 ? ": met" : ": not met")
		return "≥ 0.90×" (r == "" ? "" : r >= 0.9 ? ": met" : ": not met")
	}
	$2 == "softhca-fail" { failed["softhca" SUBSEP $3]++; next }
	{
		key = $2 SUBSEP $3
		cnt[key]++; val[key, cnt[key]] = $4
	}
	END {
		for (key in cnt) med[key] = median(key)
		n = 0
		row[++n] = "ib_write_bw 64 KiB / tcp_bw 64 KiB"; unit[n] = "Gb/s"; sm[n] = "bw_64k"; tm[n] = "bw_64k"; lat[n] = 0
		row[++n] = "ib_write_bw 1 MiB / tcp_bw 1 MiB"; unit[n] = "Gb/s"; sm[n] = "bw_1m"; tm[n] = "bw_1m"; lat[n] = 0
		row[++n] = "ib_write_lat 8 B / tcp_lat 8 B (one-way, average)"; unit[n] = "µs"; sm[n] = "write_lat"; tm[n] = "lat"; lat[n] = 1
		row[++n] = "ib_send_lat 8 B / tcp_lat 8 B (one-way, average)"; unit[n] = "µs"; sm[n] = "send_lat"; tm[n] = "lat"; lat[n] = 1
		print "| case | unit | softhca (perftest) | TCP (qperf) | softhca / TCP | goal |"
		print "|---|---|---|---|---|---|"
		for (i = 1; i <= n; i++) {
			s = "softhca" SUBSEP sm[i]; t = "tcp" SUBSEP tm[i]
			r = ratio(s, t)
			printf "| %s | %s | %s | %s | %s | %s |\n", row[i], unit[i],
				cell(s), cell(t), rfmt(r), goal(r, lat[i])
		}
		printf "\nsofthca one-way latency, median (perftest t_typical): WRITE %s µs, SEND %s µs.\n",
			cell("softhca" SUBSEP "write_lat_med"), cell("softhca" SUBSEP "send_lat_med")
		printf "Ratios: bandwidth softhca / TCP (below 1×: softhca is slower), latency softhca / TCP (above 1×: softhca is slower).\n"
	}' "$1"
}

# --report DIR...: the table over every round of earlier runs, nothing run.
if [ ${#REPORT[@]} -ne 0 ]; then
	for d in "${REPORT[@]}"; do
		[ -s "$d/metrics.tsv" ] || die "no metrics.tsv in $d"
	done
	tmp=$(mktemp) || exit 1
	i=0
	for d in "${REPORT[@]}"; do
		i=$((i + 1))
		awk -F'\t' -v OFS='\t' -v run="$i" '{ $1 = run "." $1; print }' \
			"$d/metrics.tsv" >>"$tmp"
	done
	report "$tmp"
	rm -f "$tmp"
	echo
	echo "Rounds of: ${REPORT[*]}"
	exit 0
fi

# ---- root, namespaces ---------------------------------------------------------

if [ "$(id -u)" != 0 ]; then
	log "needs root: it creates two network namespaces (tests/netns/lib.sh);" \
		"nothing measured (run it as root: sudo bench/netns.sh)"
	exit 0
fi

[ "$(nproc)" -ge 2 ] || die "needs two CPUs (this machine has $(nproc))"
if [ -n "$CPUS" ]; then
	CPU_A=${CPUS%,*}
	CPU_B=${CPUS#*,}
	[ "$CPU_A" != "$CPU_B" ] || die "--cpus wants two different CPUs"
	for c in "$CPU_A" "$CPU_B"; do
		taskset -c "$c" true 2>/dev/null || die "CPU $c is not usable here (--cpus A,B)"
	done
	PIN_A=(taskset -c "$CPU_A")
	PIN_B=(taskset -c "$CPU_B")
else
	PIN_A=()
	PIN_B=()
fi

# tests/netns/lib.sh owns the EXIT, INT, TERM and HUP traps: they end every
# process in the namespaces and delete them, and run NETNS_CLEANUP first.
# Its own watchdog is the backstop for a SIGKILL of this script.
# shellcheck disable=SC2034  # read by lib.sh
NETNS_WATCHDOG=$((BUDGET + 600))
# shellcheck source=tests/netns/lib.sh disable=SC1091
. "$ROOT/tests/netns/lib.sh"
# lib.sh's skip exits 77 (a skipped test); a benchmark that cannot run here
# says why and exits 0.
# shellcheck disable=SC2317  # called by lib.sh
skip() {
	log "cannot run here: $*; nothing measured"
	exit 0
}

# ---- processes: everything we start is remembered and ended on exit --------

# As in bench/run.sh: every command runs in the background under `timeout`
# and is waited for with `wait`, which a signal interrupts.
PIDS=()
WATCHDOG=
kill_tree() { # signal pid...
	local sig=$1 pid
	shift
	for pid in "$@"; do
		pkill "-$sig" -P "$pid" 2>/dev/null
		kill "-$sig" "$pid" 2>/dev/null
	done
}
# shellcheck disable=SC2317  # run by lib.sh's EXIT trap (NETNS_CLEANUP)
bench_cleanup() {
	[ -n "$WATCHDOG" ] && kill_tree TERM "$WATCHDOG"
	if [ ${#PIDS[@]} -ne 0 ]; then
		kill_tree TERM "${PIDS[@]}"
		sleep 0.3
		kill_tree KILL "${PIDS[@]}"
	fi
	wait 2>/dev/null
	return 0
}
NETNS_CLEANUP+=(bench_cleanup)
forget() {
	local p keep=()
	for p in "${PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}
# bounded SECONDS CMD...: CMD under timeout, in the background, waited for;
# the status is CMD's (124 on timeout).
bounded() {
	local secs=$1 pid rc
	shift
	timeout -k 2 "$secs" "$@" &
	pid=$!
	PIDS+=("$pid")
	wait "$pid"
	rc=$?
	forget "$pid"
	return $rc
}

# ---- prerequisites ----------------------------------------------------------

need_pkgs=()
command -v ib_write_bw >/dev/null || need_pkgs+=(perftest)
command -v qperf >/dev/null || need_pkgs+=(qperf)
command -v ibv_devinfo >/dev/null || need_pkgs+=(ibverbs-utils)
command -v ss >/dev/null || need_pkgs+=(iproute2)
command -v taskset >/dev/null || need_pkgs+=(util-linux)
[ -n "$LIB" ] || command -v cmake >/dev/null || need_pkgs+=(cmake)
[ -n "$LIB" ] || command -v gcc >/dev/null || need_pkgs+=(gcc libc6-dev)
if [ ${#need_pkgs[@]} -ne 0 ]; then
	if [ $INSTALL = 1 ] && command -v apt-get >/dev/null; then
		log "installing ${need_pkgs[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! bounded 300 apt-get -y -q update </dev/null >&2 ||
			! bounded 300 apt-get -y -q install --no-install-recommends \
				"${need_pkgs[@]}" </dev/null >&2; then
			die "apt-get install ${need_pkgs[*]} failed"
		fi
	else
		die "missing: ${need_pkgs[*]}; install with: apt-get install -y --no-install-recommends ${need_pkgs[*]}"
	fi
fi

# ---- build softhca (Release), as bench/run.sh does ----------------------------

if [ -z "$LIB" ]; then
	log "building softhca (Release) in $BUILD"
	mkdir -p "$BUILD"
	bounded 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
		-DSOFTHCA_WERROR=OFF >"$BUILD/bench-cmake.log" 2>&1 ||
		die "cmake failed: see $BUILD/bench-cmake.log"
	targets=(--target ibverbs)
	help=$(timeout 60 cmake --build "$BUILD" --target help 2>/dev/null)
	if grep -qw rdmacm <<<"$help"; then
		targets+=(--target rdmacm)
	fi
	bounded 300 cmake --build "$BUILD" -j "$(nproc)" "${targets[@]}" \
		>>"$BUILD/bench-cmake.log" 2>&1 ||
		die "build failed: see $BUILD/bench-cmake.log"
	LIB=$BUILD/lib
fi
[ -e "$LIB/libibverbs.so.1" ] || die "no libibverbs.so.1 in $LIB"

if [ -z "$OUT" ]; then
	OUT=$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)-netns
fi
mkdir -p "$OUT" || die "cannot create $OUT"
METRICS=$OUT/metrics.tsv
FAILURES=$OUT/failures.txt
: >"$METRICS"
: >"$FAILURES"

# ---- the namespaces -------------------------------------------------------------

netns_require_root
netns_setup 2 || die "could not create the namespaces (netns_setup)"
NS_A=$(netns_name a)
NS_B=$(netns_name b)
ADDR_A=$(netns_ip4 a)
ADDR_B=$(netns_ip4 b)
DEV=softhca_$NETNS_IF
log "namespaces $NS_A ($ADDR_A, servers) and $NS_B ($ADDR_B, clients)"

# The measurement is bounded: the watchdog sends us SIGTERM, and lib.sh's
# trap ends every process in the namespaces and deletes them.
( sleep "$BUDGET" && echo "bench-netns: budget of ${BUDGET}s used up: stopping" >&2 &&
	kill -TERM $$ ) 2>/dev/null &
WATCHDOG=$!

listening() { # ns port
	[ -n "$(ip netns exec "$1" ss -Hltn "sport = :$2" 2>/dev/null)" ]
}

# gid_index NS ADDR: the index of the RoCE v2 GID ::ffff:ADDR of $DEV in NS
gid_index() {
	timeout -k 2 30 ip netns exec "$1" env LD_LIBRARY_PATH="$LIB" \
		ibv_devinfo -v -d "$DEV" </dev/null 2>&1 |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${2//./\\.}, RoCE v2\$/\1/p" |
		head -1
}

# ---- a server in namespace a, a client in namespace b ---------------------------

PORT=18515
SERVER_RC=
finish_server() { # pid seconds: wait for it, at most SECONDS, then end it
	local i
	for ((i = $2 * 10; i > 0; i--)); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill_tree TERM "$1"
	wait "$1" 2>/dev/null
	SERVER_RC=$?
	forget "$1"
}

# pair NAME SECONDS -- SERVER_CMD... -- CLIENT_CMD...: the server in
# namespace a on CPU A, then (once it listens on $PORT) the client in
# namespace b on CPU B, both under timeout.  Outputs in $RDIR/NAME.server.txt
# and NAME.client.txt; the status is the client's (or the server's when the
# client succeeded).
pair() {
	local name=$1 secs=$2 srv=() cli=() spid rc i
	shift 2
	[ "$1" = -- ] && shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	cli=("$@")
	{
		echo "# server ($NS_A${PIN_A[*]:+, ${PIN_A[*]}}): timeout $secs ${srv[*]}"
		echo "# client ($NS_B${PIN_B[*]:+, ${PIN_B[*]}}): timeout $secs ${cli[*]}"
	} >>"$RDIR/commands.txt"
	timeout -k 2 "$secs" ip netns exec "$NS_A" env LD_LIBRARY_PATH="$LIB" \
		"${PIN_A[@]}" "${srv[@]}" >"$RDIR/$name.server.txt" 2>&1 </dev/null &
	spid=$!
	PIDS+=("$spid")
	for ((i = 0; i < 100; i++)); do
		listening "$NS_A" "$PORT" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if ! listening "$NS_A" "$PORT"; then
		finish_server "$spid" 0
		return 1
	fi
	bounded "$secs" ip netns exec "$NS_B" env LD_LIBRARY_PATH="$LIB" \
		"${PIN_B[@]}" "${cli[@]}" >"$RDIR/$name.client.txt" 2>&1 </dev/null
	rc=$?
	finish_server "$spid" 5
	PORT=$((PORT + 1))
	[ $rc -eq 0 ] && rc=$SERVER_RC
	return $rc
}

record() { # source metric value
	[ -n "$3" ] && echo -e "$ROUND\t$1\t$2\t$3" >>"$METRICS"
}

# why NAME: the first line of NAME's outputs that says what went wrong
why() {
	cat "$RDIR/$1.client.txt" "$RDIR/$1.server.txt" 2>/dev/null |
		grep -m1 -iE 'softhca\[[0-9]+\] (warning|error)|fail|unable|couldn|error|timeout|refused' |
		sed 's/^[[:space:]]*//'
}

# failure STATUS NAME SECONDS: what went wrong, in one line
failure() {
	local last
	if [ "$1" = 124 ] || [ "$1" = 137 ]; then
		last=$(grep -v '^[[:space:]-]*$' "$RDIR/$2.client.txt" 2>/dev/null | tail -1 |
			sed 's/^[[:space:]]*//')
		echo "no result within ${3}s, killed (a hang?); the client's last line: ${last:-none}"
	else
		echo "exit $1: $(why "$2")"
	fi
}

# ---- softhca: Debian's perftest, unmodified, over softhca_veth0 -------------------

declare -A DEAD=()   # softhca cases that failed in round 1: not run again

# softhca_case METRIC KIND BINARY ARGS...: KIND lat (t_avg and t_typical of
# the client, one-way) or bw (BW average, Gb/s)
softhca_case() {
	local metric=$1 kind=$2 bin=$3 secs v line reason
	shift 3
	if [ -n "${DEAD[$metric]:-}" ]; then
		record softhca-fail "$metric" 1
		return 0
	fi
	secs=60
	[ "$kind" = bw ] && secs=$((BW_SECS + 30))
	local common=(-d "$DEV" -p "$PORT" -F "$@")
	# stdbuf -oL: what perftest printed survives a kill after a timeout
	if pair "softhca.$metric" "$secs" \
		-- stdbuf -oL "$bin" "${common[@]}" -x "$GID_A" \
		-- stdbuf -oL "$bin" "${common[@]}" -x "$GID_B" "$ADDR_A"; then
		line=$(awk '/#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ && NF >= 5 { print; exit }' \
			"$RDIR/softhca.$metric.client.txt")
		if [ "$kind" = lat ]; then
			v=$(awk '{ print $6 }' <<<"$line")
			record softhca "${metric}_med" "$(awk '{ print $5 }' <<<"$line")"
		else
			v=$(awk '{ print $4 }' <<<"$line")
		fi
		if [ -n "$v" ]; then
			record softhca "$metric" "$v"
			return 0
		fi
		reason="exit 0 but no result line"
	else
		reason=$(failure $? "softhca.$metric" "$secs")
	fi
	record softhca-fail "$metric" 1
	echo "round $ROUND: $metric ($bin): $reason" >>"$FAILURES"
	log "softhca $metric failed: $reason (see $RDIR/softhca.$metric.*.txt)"
	[ "$ROUND" = 1 ] && DEAD[$metric]=1
	return 0
}

# probe_softhca: one short ib_write_lat (100 round trips, 20 s at most)
# before the rounds.  When even that fails, every softhca case is marked
# failed with its reason, and the run costs seconds, not minutes of
# timeouts.
probe_softhca() {
	local m reason
	RDIR=$OUT/probe
	mkdir -p "$RDIR"
	if [ -z "$GID_A" ] || [ -z "$GID_B" ]; then
		reason="no RoCE v2 GID ::ffff:<veth address> on $DEV (ibv_devinfo -v)"
	elif pair softhca.probe 20 \
		-- stdbuf -oL ib_write_lat -d "$DEV" -p "$PORT" -F -s 8 -n 100 -x "$GID_A" \
		-- stdbuf -oL ib_write_lat -d "$DEV" -p "$PORT" -F -s 8 -n 100 -x "$GID_B" "$ADDR_A"; then
		return 0
	else
		reason="the probe (ib_write_lat -n 100) failed: $(failure $? softhca.probe 20)"
	fi
	log "softhca between the namespaces: $reason (see $RDIR); softhca not measured"
	echo "all cases: $reason" >>"$FAILURES"
	for m in bw_64k bw_1m write_lat send_lat; do
		DEAD[$m]=1
	done
}

run_softhca() {
	softhca_case bw_64k bw ib_write_bw -s 65536 -D "$BW_SECS" --report_gbits
	softhca_case bw_1m bw ib_write_bw -s 1048576 -D "$BW_SECS" --report_gbits
	softhca_case write_lat lat ib_write_lat -s 8 -n "$LAT_ITERS"
	softhca_case send_lat lat ib_send_lat -s 8 -n "$LAT_ITERS"
}

# ---- TCP: qperf between the same two namespaces -----------------------------------
#
# One qperf server in namespace a for the whole run (port 19765, its data
# connections on ports of its choice); -uu -ub: bits/s and ns.

QPERF_PORT=19765
QPERF_PID=

start_qperf() {
	timeout -k 2 $((BUDGET + 30)) ip netns exec "$NS_A" "${PIN_A[@]}" \
		qperf -lp "$QPERF_PORT" >"$OUT/qperf.server.txt" 2>&1 </dev/null &
	QPERF_PID=$!
	PIDS+=("$QPERF_PID")
	local i
	for ((i = 0; i < 100; i++)); do
		listening "$NS_A" "$QPERF_PORT" && return 0
		kill -0 "$QPERF_PID" 2>/dev/null || break
		sleep 0.1
	done
	log "the qperf server did not start (see $OUT/qperf.server.txt)"
	return 1
}

# tcp_case METRIC QPERF_ARGS...
tcp_case() {
	local metric=$1 f v
	shift
	f=$RDIR/tcp.$metric.client.txt
	echo "# client ($NS_B${PIN_B[*]:+, ${PIN_B[*]}}): timeout 60 qperf -lp $QPERF_PORT -uu -ub -vu -t $TCP_SECS $ADDR_A $*" \
		>>"$RDIR/commands.txt"
	if ! bounded 60 ip netns exec "$NS_B" "${PIN_B[@]}" \
		qperf -lp "$QPERF_PORT" -uu -ub -vu -t "$TCP_SECS" "$ADDR_A" "$@" \
		>"$f" 2>&1 </dev/null; then
		log "qperf $* failed (see $f)"
		return 0
	fi
	# "bw = 18194104320 bits/sec", "latency = 30077 ns" (other units
	# converted, in case -uu ever picks them)
	v=$(awk '
		function scale(u) {
			if (u ~ /^bits/) return 1e-9;  if (u ~ /^Kb/) return 1e-6
			if (u ~ /^Mb/) return 1e-3;    if (u ~ /^Gb/) return 1
			if (u == "ns") return 1e-3;    if (u == "us") return 1
			if (u == "ms") return 1e3;     if (u ~ /^sec/) return 1e6
			return -1
		}
		($1 == "bw" || $1 == "latency") && $2 == "=" && scale($4) > 0 {
			printf "%.6g\n", $3 * scale($4); exit
		}' "$f")
	record tcp "$metric" "$v"
	[ -n "$v" ] || log "qperf $*: no result in $f"
}

run_tcp() {
	tcp_case bw_64k -m 64K tcp_bw
	tcp_case bw_1m -m 1M tcp_bw
	tcp_case lat -m 8 tcp_lat
}

# ---- run ------------------------------------------------------------------------------

if [ $QUICK = 1 ]; then
	BW_SECS=1; TCP_SECS=1; LAT_ITERS=5000
else
	BW_SECS=2; TCP_SECS=2; LAT_ITERS=20000
fi

GID_A=$(gid_index "$NS_A" "$ADDR_A")
GID_B=$(gid_index "$NS_B" "$ADDR_B")

{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm)"
	echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs;" \
		"$( [ -n "$CPUS" ] && echo "pinned: servers $CPU_A, clients $CPU_B" || echo "not pinned")"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "namespaces: $NS_A $ADDR_A (servers), $NS_B $ADDR_B (clients), veth pair through a bridge namespace"
	echo "softhca: $LIB/libibverbs.so.1 ($( [ "$LIB" = "$BUILD/lib" ] && echo "CMake Release build" || echo "given with --lib")), $DEV, GID index a: ${GID_A:-none}, b: ${GID_B:-none}"
	echo "perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
	echo "qperf: $(dpkg-query -W -f='${Version}' qperf 2>/dev/null)"
	echo "rounds: $ROUNDS$( [ $QUICK = 1 ] && echo ' (quick)'); perftest bw -D $BW_SECS, lat -n $LAT_ITERS; qperf -t $TCP_SECS"
} >"$OUT/env.txt"

T0=$(date +%s)
start_qperf || die "no TCP baseline without the qperf server"
probe_softhca

for ROUND in $(seq "$ROUNDS"); do
	RDIR=$OUT/round$ROUND
	mkdir -p "$RDIR"
	log "round $ROUND/$ROUNDS: qperf tcp_bw, tcp_lat ($NS_B -> $NS_A)"
	run_tcp
	[ ${#DEAD[@]} -lt 4 ] && log "round $ROUND/$ROUNDS: perftest over $DEV ($NS_B -> $NS_A)"
	run_softhca
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
echo "elapsed: $(( $(date +%s) - T0 ))s" >>"$OUT/env.txt"

report "$METRICS" >"$OUT/table.md"
{
	echo
	echo "softhca: perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null) over $DEV" \
		"(RoCE v2 GID of the veth address); TCP: qperf $(dpkg-query -W -f='${Version}' qperf 2>/dev/null);" \
		"servers in namespace a, clients in namespace b, one veth pair each through a bridge;" \
		"$( [ -n "$CPUS" ] && echo "servers on CPU $CPU_A, clients on CPU $CPU_B" || echo "not pinned");" \
		"$ROUNDS round(s), $(sed -n 's/^elapsed: //p' "$OUT/env.txt")," \
		"load $(sed -n 's/^load before: //p' "$OUT/env.txt") before."
	if [ -s "$FAILURES" ]; then
		echo
		echo "softhca failures (a case that failed in round 1 is not run again):"
		sed 's/^/- /' "$FAILURES"
	fi
	echo "Raw outputs: ${OUT#"$ROOT"/}"
} >>"$OUT/table.md"
cat "$OUT/table.md"
exit 0
