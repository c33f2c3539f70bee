#!/bin/bash
# bench/run.sh: softhca beside UCX and the machine's physical limits, in one
# run, on the loopback device only.  A benchmark, not a test: no thresholds,
# never run by `make check`.  See bench/README.md.
#
#   bench/run.sh [--rounds N] [--quick] [--lib DIR] [--build DIR] [--cpus A,B]
#                [--out DIR] [--budget SECONDS] [--no-install]
#   bench/run.sh --report bench/results/DIR...
#
# Prints one markdown table (medians over the rounds, with min-max) on
# stdout; the raw output of every command, metrics.tsv, details.md and
# table.md go to bench/results/<date>/ (gitignored).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3
QUICK=0
LIB=
BUILD=$ROOT/build-bench
CPUS=0,1
OUT=
BUDGET=540
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
  --cpus A,B      the two CPUs: servers on A, clients on B (default 0,1)
  --out DIR       results directory (default bench/results/<date>)
  --budget S      stop everything after S seconds (default 540)
  --no-install    never apt-get (only report what is missing)
  --report DIR... print the table over every round of earlier runs'
                  results directories (measures nothing)
EOF
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift ;;
	--quick) QUICK=1; ROUNDS=1 ;;
	--lib) LIB=$(cd "$2" && pwd) || exit 2; shift ;;
	--build) BUILD=$2; shift ;;
	--cpus) CPUS=$2; shift ;;
	--out) OUT=$2; shift ;;
	--budget) BUDGET=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--report) shift; REPORT=("$@"); break ;;
	-h|--help) usage; exit 0 ;;
	*) echo "run.sh: unknown option $1 (try --help)" >&2; exit 2 ;;
	esac
	shift
done
case "$ROUNDS" in ''|*[!0-9]*|0) echo "run.sh: --rounds wants a positive number" >&2; exit 2 ;; esac
CPU_A=${CPUS%,*}
CPU_B=${CPUS#*,}

exec 3>&2   # the terminal's stderr, also inside redirected function calls
log() { echo "bench: $*" >&3; }
die() { log "$*"; exit 1; }

# ---- the table ----------------------------------------------------------------
#
# metrics.tsv: round, source, metric, value.  Sources: softhca (the default
# same-host path), softhca-cma (SOFTHCA_MAP=0), ucx-*, uct-* and "limit"
# (the probe).  Each cell is the median over the rounds; the
# ratios are ratios of those medians.

report() { # metrics.tsv details.md: the table on stdout, every source in details.md
	local rounds
	rounds=$(cut -f1 "$1" | sort -u | wc -l)
	awk -F'\t' -v rounds="$rounds" -v details="$2" '
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
		if (x == "") return "—"
		if (x >= 100) return sprintf("%.0f", x)
		if (x >= 10) return sprintf("%.1f", x)
		if (x >= 1) return sprintf("%.2f", x)
		if (x >= 0.01) return sprintf("%.3f", x)
		return sprintf("%.2g", x)
	}
	function cell(key) {
		if (!(key in cnt)) return "—"
		if (cnt[key] < 2 || lo[key] == hi[key]) return fmt(med[key])
		return fmt(med[key]) " (" fmt(lo[key]) "–" fmt(hi[key]) ")"
	}
	function tname(src) {
		if (src == "uct-cma") return "cma (UCT)"
		sub(/^ucx-/, "", src)
		return src
	}
	function ratio(a, b, lat,   r) {
		if (a == "" || b == "" || a + 0 == 0 || b + 0 == 0) return "—"
		r = a / b
		return sprintf(r >= 10 ? "%.0f×" : r >= 0.1 ? "%.2f×" : "%.2g×", r)
	}
	{
		key = $2 SUBSEP $3
		cnt[key]++; val[key, cnt[key]] = $4
		if (!($2 in seen_src)) { seen_src[$2] = 1; srcs[++nsrc] = $2 }
	}
	END {
		for (key in cnt) med[key] = median(key)
		n = 0
		row[++n] = "write_lat";    label[n] = "RDMA WRITE latency, 8 B (one-way)"; unit[n] = "µs"; lat[n] = 1; lim[n] = "pingpong"; flo[n] = "cma_write_lat"
		row[++n] = "read_lat";     label[n] = "RDMA READ latency, 8 B (whole read)"; unit[n] = "µs"; lat[n] = 1; lim[n] = "pingpong"; flo[n] = "cma_read_lat"
		row[++n] = "send_lat";     label[n] = "SEND latency, 8 B (one-way)"; unit[n] = "µs"; lat[n] = 1; lim[n] = "pingpong"; flo[n] = "cma_write_lat"
		row[++n] = "write_mr";     label[n] = "RDMA WRITE message rate, 8 B"; unit[n] = "Mpps"; lat[n] = 0; lim[n] = "ring"; flo[n] = "cma_write_mr"
		# the same rate as a verbs program that wants it posts: lists of
		# 16 WRs (perftest -l 16); the UCX figure is its put_bw again
		row[++n] = "write_mr_l16"; label[n] = "RDMA WRITE message rate, 8 B, post lists of 16"; unit[n] = "Mpps"; lat[n] = 0; lim[n] = "ring"; flo[n] = "cma_write_mr"; um[n] = "write_mr"
		row[++n] = "write_bw_64k"; label[n] = "RDMA WRITE bandwidth, 64 KiB"; unit[n] = "Gb/s"; lat[n] = 0; lim[n] = "memcpy_64k_in"; flo[n] = "cma_write_bw_64k"
		row[++n] = "write_bw_1m";  label[n] = "RDMA WRITE bandwidth, 1 MiB"; unit[n] = "Gb/s"; lat[n] = 0; lim[n] = "memcpy_1m_in"; flo[n] = "cma_write_bw_1m"

		printf "Ratio convention: latency rows = softhca time / other time (above 1×: softhca is slower); "
		printf "rate and bandwidth rows = softhca rate / other rate (below 1×: softhca is slower). "
		printf "Each cell: median of %d round(s), min–max in brackets. ", rounds
		printf "softhca = the default same-host path (the peer maps registered memory: loads, stores, memcpy); "
		printf "CMA path = the same perftest run with SOFTHCA_MAP=0 (process_vm_writev/readv per copy), run right after it.\n\n"
		printf "| metric | unit | softhca | softhca, CMA path (SOFTHCA_MAP=0) | best UCX (transport: value) | limit | softhca / UCX | CMA path / UCX | softhca / CMA path | softhca / limit | CMA floor | CMA path / CMA floor |\n"
		printf "|---|---|---|---|---|---|---|---|---|---|---|---|\n"
		for (i = 1; i <= n; i++) {
			m = row[i]; best = ""; bsrc = ""
			u = (i in um) ? um[i] : m	# the metric of the UCX figure
			for (s = 1; s <= nsrc; s++) {
				src = srcs[s]
				if (src !~ /^uc[xt]-/ || !((src, u) in cnt)) continue
				v = med[src, u]
				if (best == "" || (lat[i] ? v < best : v > best)) { best = v; bsrc = src }
			}
			sh = ((("softhca", m) in cnt)) ? med["softhca", m] : ""
			sc = ((("softhca-cma", m) in cnt)) ? med["softhca-cma", m] : ""
			lv = ((("limit", lim[i]) in cnt)) ? med["limit", lim[i]] : ""
			fv = ((("limit", flo[i]) in cnt)) ? med["limit", flo[i]] : ""
			printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", label[i], unit[i],
				cell("softhca" SUBSEP m), cell("softhca-cma" SUBSEP m),
				bsrc == "" ? "—" : tname(bsrc) ": " cell(bsrc SUBSEP u),
				cell("limit" SUBSEP lim[i]),
				ratio(sh, best), ratio(sc, best), ratio(sh, sc),
				ratio(sh, lv),
				cell("limit" SUBSEP flo[i]), ratio(sc, fv)
		}
		printf "\nLimits: latency = cache-line ping-pong between the two cores, one-way; "
		printf "message rate = 8 B messages through a shared-memory ring; "
		printf "bandwidth = single-core memcpy, in cache (out of cache: 64 KiB %s, 1 MiB %s Gb/s). ",
			cell("limit" SUBSEP "memcpy_64k_out"), cell("limit" SUBSEP "memcpy_1m_out")
		printf "CMA floor = the bare system calls softhca'"'"'s same-host path is built on (bench/probe cma): "
		printf "process_vm_writev ping-pong one-way, one 8 B process_vm_readv, 8 B process_vm_writev calls back to back, "
		printf "one process_vm_writev of 64 KiB / 1 MiB.\n"

		# every source, for the record
		printf "| metric |" > details
		for (s = 1; s <= nsrc; s++) if (srcs[s] != "limit") printf " %s |", srcs[s] > details
		printf "\n|---|" > details
		for (s = 1; s <= nsrc; s++) if (srcs[s] != "limit") printf "---|" > details
		printf "\n" > details
		for (i = 1; i <= n; i++) {
			printf "| %s (%s) |", label[i], unit[i] > details
			for (s = 1; s <= nsrc; s++) if (srcs[s] != "limit")
				printf " %s |", cell(srcs[s] SUBSEP row[i]) > details
			printf "\n" > details
		}
		printf "\n| limit | value |\n|---|---|\n" > details
		nl = split("pingpong|cache-line ping-pong, one-way (µs);ring|8 B messages through a shared ring (Mpps);memcpy_64k_in|memcpy 64 KiB, in cache (Gb/s);memcpy_64k_out|memcpy 64 KiB, out of cache (Gb/s);memcpy_1m_in|memcpy 1 MiB, in cache (Gb/s);memcpy_1m_out|memcpy 1 MiB, out of cache (Gb/s);cma_write_lat|process_vm_writev 8 B ping-pong, one-way (µs);cma_read_lat|process_vm_readv 8 B (µs);cma_write_mr|process_vm_writev 8 B back to back (Mcalls/s);cma_write_bw_64k|process_vm_writev 64 KiB (Gb/s);cma_write_bw_1m|process_vm_writev 1 MiB (Gb/s)", lims, ";")
		for (i = 1; i <= nl; i++) {
			split(lims[i], kv, "|")
			printf "| %s | %s |\n", kv[2], cell("limit" SUBSEP kv[1]) > details
		}
	}' "$1"
}


# --report DIR...: the table over every round of earlier runs, nothing run.
if [ ${#REPORT[@]} -ne 0 ]; then
	for d in "${REPORT[@]}"; do
		[ -s "$d/metrics.tsv" ] || die "no metrics.tsv in $d"
	done
	tmp=$(mktemp -d) || exit 1
	i=0
	for d in "${REPORT[@]}"; do
		i=$((i + 1))
		awk -F'\t' -v OFS='\t' -v run="$i" '{ $1 = run "." $1; print }' \
			"$d/metrics.tsv" >>"$tmp/metrics.tsv"
	done
	report "$tmp/metrics.tsv" "$tmp/details.md"
	echo
	echo "Rounds of: ${REPORT[*]}"
	echo
	cat "$tmp/details.md"
	rm -rf "$tmp"
	exit 0
fi

# ---- processes: everything we start is remembered and ended on exit --------

# Every command runs in the background under `timeout` and is waited for
# with `wait`, which a signal interrupts (a foreground command would hold
# the traps until it ends).  Each remembered pid is a `timeout` (or the
# watchdog subshell); its child is the measured program.
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
cleanup() {
	trap - EXIT INT TERM
	[ -n "$WATCHDOG" ] && kill_tree TERM "$WATCHDOG"
	if [ ${#PIDS[@]} -ne 0 ]; then
		kill_tree TERM "${PIDS[@]}"
		sleep 0.3
		kill_tree KILL "${PIDS[@]}"
	fi
	wait 2>/dev/null
}
# A pid is forgotten once reaped, so that cleanup never signals a recycled pid.
forget() {
	local p keep=()
	for p in "${PIDS[@]}"; do
		[ "$p" = "$1" ] || keep+=("$p")
	done
	PIDS=("${keep[@]}")
}
# bounded SECONDS CMD...: run CMD under timeout, in the background, and
# wait for it; the status is CMD's (124 on timeout).
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
trap 'cleanup' EXIT
trap 'log "interrupted"; exit 130' INT
trap 'log "stopped (budget of ${BUDGET}s or SIGTERM)"; exit 124' TERM

# ---- prerequisites ----------------------------------------------------------

[ "$(nproc)" -ge 2 ] || die "needs two CPUs (this machine has $(nproc))"
[ "$CPU_A" != "$CPU_B" ] || die "--cpus wants two different CPUs"

need_pkgs=()
command -v ib_write_lat >/dev/null || need_pkgs+=(perftest)
command -v ucx_perftest >/dev/null || need_pkgs+=(ucx-utils)
command -v gcc >/dev/null || need_pkgs+=(gcc libc6-dev)
command -v cmake >/dev/null || need_pkgs+=(cmake)
command -v ss >/dev/null || need_pkgs+=(iproute2)
command -v taskset >/dev/null || need_pkgs+=(util-linux)
if [ ${#need_pkgs[@]} -ne 0 ]; then
	if [ $INSTALL = 1 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
		log "installing ${need_pkgs[*]}"
		export DEBIAN_FRONTEND=noninteractive
		if ! bounded 300 apt-get -y -q update </dev/null >&2 ||
			! bounded 300 apt-get -y -q install --no-install-recommends \
				"${need_pkgs[@]}" </dev/null >&2; then
			die "apt-get install ${need_pkgs[*]} failed"
		fi
	else
		die "missing: ${need_pkgs[*]}; install with: sudo apt-get install -y --no-install-recommends ${need_pkgs[*]}"
	fi
fi

for c in "$CPU_A" "$CPU_B"; do
	taskset -c "$c" true 2>/dev/null || die "CPU $c is not usable here (--cpus A,B)"
done

# The whole run is bounded: the watchdog sends us SIGTERM, and the trap
# ends every process we started.
( sleep "$BUDGET" && kill -TERM $$ ) 2>/dev/null &
WATCHDOG=$!

# ---- build softhca (Release) and the probe ------------------------------------

if [ -z "$LIB" ]; then
	log "building softhca (Release) in $BUILD"
	mkdir -p "$BUILD"
	# -Werror off: a benchmark build must not stop on a new warning at -O3.
	bounded 120 cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release \
		-DSOFTHCA_WERROR=OFF >"$BUILD/bench-cmake.log" 2>&1 ||
		die "cmake failed: see $BUILD/bench-cmake.log"
	targets=(--target ibverbs)
	# (librdmacm too, when the tree has it: perftest links it)
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

PROBE_DIR=$BUILD/bench
mkdir -p "$PROBE_DIR"
bounded 60 gcc -O2 -Wall -Wextra -Wno-unused-parameter -o "$PROBE_DIR/probe" "$ROOT/bench/probe.c" ||
	die "cannot build bench/probe.c"
PROBE=$PROBE_DIR/probe

if [ -z "$OUT" ]; then
	OUT=$ROOT/bench/results/$(date +%Y%m%d-%H%M%S)
fi
mkdir -p "$OUT" || die "cannot create $OUT"
METRICS=$OUT/metrics.tsv
: >"$METRICS"

# ---- helpers ----------------------------------------------------------------------

# Ports for the out-of-band exchange of perftest and ucx_perftest: a random
# block away from softhca's own range (24000..25023), skipping ports in use.
NEXT_PORT=$((30000 + RANDOM % 15000))
pick_port() {
	local p=$NEXT_PORT
	while ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; do
		p=$((p + 1))
	done
	NEXT_PORT=$((p + 1))
	PORT=$p
}

wait_listen() { # port pid
	local i
	for i in $(seq 200); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

finish_server() { # pid seconds
	local i
	for i in $(seq $(($2 * 10))); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill_tree TERM "$1"
	wait "$1" 2>/dev/null
	forget "$1"
}

# run_pair NAME SERVER_TIMEOUT CLIENT_TIMEOUT -- server args... -- client args...
# (each list starting with the environment: `env VAR=... cmd ...`).  The
# server runs on CPU_A, the client on CPU_B, both under timeout.  Output goes
# to $RDIR/NAME.server.txt and NAME.client.txt; the status is the client's.
run_pair() {
	local name=$1 ts=$2 tc=$3 srv=() cli=() spid rc
	shift 3
	[ "$1" = -- ] && shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	cli=("$@")
	{
		echo "# server (CPU $CPU_A): timeout $ts ${srv[*]}"
		echo "# client (CPU $CPU_B): timeout $tc ${cli[*]}"
	} >>"$RDIR/commands.txt"
	timeout -k 2 "$ts" taskset -c "$CPU_A" "${srv[@]}" \
		>"$RDIR/$name.server.txt" 2>&1 </dev/null &
	spid=$!
	PIDS+=("$spid")
	if ! wait_listen "$PORT" "$spid"; then
		log "$name: server did not start (see $RDIR/$name.server.txt)"
		finish_server "$spid" 0
		return 1
	fi
	bounded "$tc" taskset -c "$CPU_B" "${cli[@]}" \
		>"$RDIR/$name.client.txt" 2>&1 </dev/null
	rc=$?
	finish_server "$spid" 5
	if [ $rc -ne 0 ]; then
		log "$name: client exited with status $rc (see $RDIR/$name.client.txt)"
	fi
	return $rc
}

record() { # source metric value
	[ -n "$3" ] && echo -e "$ROUND\t$1\t$2\t$3" >>"$METRICS"
}

# ---- softhca: Debian's perftest, unmodified -------------------------------------

# softhca's two same-host paths, measured back to back for each row: the
# default (registered memory mapped by the peer: loads, stores, memcpy)
# and SOFTHCA_MAP=0 (the CMA path: process_vm_writev/readv per copy).
# source, then the environment beyond LD_LIBRARY_PATH ("-": none).
SOFTHCA_RUNS=(
	"softhca -"
	"softhca-cma SOFTHCA_MAP=0"
)

# softhca_env SPEC: in the array SENV, `env` and the environment of a
# SOFTHCA_RUNS entry; SRC, its source name
softhca_env() {
	local e
	read -r SRC e <<<"$1"
	SENV=(env LD_LIBRARY_PATH="$LIB")
	[ "$e" != - ] && SENV+=("$e")
}

# ib_*_lat: t_typical (the median) in usec.  ib_write_lat and ib_send_lat
# report half the round trip; ib_read_lat the whole read.
perftest_lat() { # metric binary
	local metric=$1 bin=$2 v spec
	for spec in "${SOFTHCA_RUNS[@]}"; do
		softhca_env "$spec"
		pick_port
		local common=(-d softhca_lo -p "$PORT" -F -s 8 -n "$LAT_ITERS")
		run_pair "$SRC.$metric" 60 60 \
			-- "${SENV[@]}" "$bin" "${common[@]}" \
			-- "${SENV[@]}" "$bin" "${common[@]}" localhost
		v=$(awk '/#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ && NF >= 5 { print $5; exit }' \
			"$RDIR/$SRC.$metric.client.txt")
		record "$SRC" "$metric" "$v"
	done
}

# ib_write_bw in duration mode: BW average (Gb/s) and MsgRate (Mpps).
perftest_bw() { # metric size field(4=Gb/s,5=Mpps) [perftest options]
	local metric=$1 size=$2 field=$3 v spec
	shift 3
	for spec in "${SOFTHCA_RUNS[@]}"; do
		softhca_env "$spec"
		pick_port
		local common=(-d softhca_lo -p "$PORT" -F -s "$size" -D "$BW_SECS" --report_gbits "$@")
		run_pair "$SRC.$metric" 60 60 \
			-- "${SENV[@]}" ib_write_bw "${common[@]}" \
			-- "${SENV[@]}" ib_write_bw "${common[@]}" localhost
		v=$(awk -v f="$field" '/#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ && NF >= 5 { print $f; exit }' \
			"$RDIR/$SRC.$metric.client.txt")
		record "$SRC" "$metric" "$v"
	done
}

run_softhca() {
	perftest_lat write_lat ib_write_lat
	perftest_lat read_lat ib_read_lat
	perftest_lat send_lat ib_send_lat
	perftest_bw write_mr 8 5
	perftest_bw write_mr_l16 8 5 -l 16
	perftest_bw write_bw_64k 65536 4
	perftest_bw write_bw_1m 1048576 4
}

# ---- UCX: ucx_perftest, one batch per transport --------------------------------
#
# Both sides read the same batch file (ucx_perftest's -b: "label args" per
# line).  Latency tests report half the round trip (typical = median);
# ucp_get -O 1 reports one whole get.  -f -v prints one CSV line per test:
# label,iters,typical_lat,avg_lat,overall_lat,avg_bw,overall_bw(MiB/s),avg_mr,overall_mr

ucx_batch() { # name kind(shm|syscall|tcp) uct(0|1)
	local f=$OUT/$1.batch n_lat n_mr n_64k n_1m w_big
	case "$2" in
	shm)     # a store into a mapped segment: 50-200 ns per operation
		n_lat=$UCX_LAT_ITERS; n_mr=$((UCX_LAT_ITERS * 10))
		n_64k=$((UCX_BW_ITERS * 10)); n_1m=$UCX_BW_ITERS; w_big=200 ;;
	syscall) # one process_vm_writev/readv per operation: about 2 us
		n_lat=$((UCX_LAT_ITERS / 4)); n_mr=$((UCX_LAT_ITERS * 2))
		n_64k=$((UCX_BW_ITERS * 5)); n_1m=$UCX_BW_ITERS; w_big=100 ;;
	*)       # UCP's software emulation over TCP: 10 us to 1 ms
		n_lat=$((UCX_LAT_ITERS / 20)); n_mr=$((UCX_LAT_ITERS / 10))
		n_64k=$((UCX_BW_ITERS / 2)); n_1m=$((UCX_BW_ITERS / 10)); w_big=20 ;;
	esac
	if [ "$3" = 1 ]; then
		local u="-x cma -d memory -D zcopy"
		cat >"$f" <<EOF
write_lat -t put_lat $u -s 8 -n $n_lat -w $((n_lat / 10))
read_lat -t get $u -s 8 -n $n_lat -O 1 -w $((n_lat / 10))
write_mr -t put_bw $u -s 8 -n $n_mr -w $((n_mr / 10))
write_bw_64k -t put_bw $u -s 65536 -n $n_64k -w $w_big
write_bw_1m -t put_bw $u -s 1048576 -n $n_1m -w $w_big
EOF
	else
		cat >"$f" <<EOF
write_lat -t ucp_put_lat -m host -s 8 -n $n_lat -w $((n_lat / 10))
read_lat -t ucp_get -m host -s 8 -n $n_lat -O 1 -w $((n_lat / 10))
send_lat -t tag_lat -m host -s 8 -n $n_lat -w $((n_lat / 10))
write_mr -t ucp_put_bw -m host -s 8 -n $n_mr -w $((n_mr / 10))
write_bw_64k -t ucp_put_bw -m host -s 65536 -n $n_64k -w $w_big
write_bw_1m -t ucp_put_bw -m host -s 1048576 -n $n_1m -w $w_big
EOF
	fi
	echo "$f"
}

# source name, UCX_TLS (empty: UCT test), shm scale, uct
# UCP never moves a put over cma (UCX 1.13 has no put/AM path on it): with
# UCX_TLS=cma,tcp,self its puts are software emulation over tcp/lo.  The
# UCT-level put/get over cma (zcopy) is the same system call as softhca's
# data path, so it is measured too, as "uct-cma".
UCX_RUNS=(
	"ucx-posix posix,self shm 0"
	"ucx-sysv sysv,self shm 0"
	"ucx-cma+tcp cma,tcp,self tcp 0"
	"uct-cma - syscall 1"
)

run_ucx() {
	local spec src tls kind uct batch e
	for spec in "${UCX_RUNS[@]}"; do
		read -r src tls kind uct <<<"$spec"
		batch=$(ucx_batch "$src" "$kind" "$uct")
		pick_port
		e=(env UCX_WARN_UNUSED_ENV_VARS=n)
		[ "$tls" != - ] && e+=(UCX_TLS="$tls")
		run_pair "$src" 120 120 \
			-- "${e[@]}" ucx_perftest -p "$PORT" -b "$batch" -f -v \
			-- "${e[@]}" ucx_perftest localhost -p "$PORT" -b "$batch" -f -v
		awk -F, -v src="$src" -v r="$ROUND" '
			NF == 9 && $2 ~ /^ *[0-9]+$/ {
				m = $1
				if (m ~ /_lat$/)      v = $3
				else if (m ~ /_mr$/) v = $9 / 1e6
				else                 v = $7 * 1048576 * 8 / 1e9
				printf "%s\t%s\t%s\t%.4g\n", r, src, m, v
			}' "$RDIR/$src.client.txt" >>"$METRICS"
	done
}

# ---- the physical-limit probe ---------------------------------------------------------

run_probe() {
	local f=$RDIR/probe.txt
	echo "# timeout 60 $PROBE -a $CPU_A -b $CPU_B -t $PROBE_SECS" >>"$RDIR/commands.txt"
	bounded 60 "$PROBE" -a "$CPU_A" -b "$CPU_B" -t "$PROBE_SECS" >"$f" 2>&1 </dev/null ||
		log "probe failed (see $f)"
	awk -F= -v r="$ROUND" '
		$1 == "pingpong_oneway_ns"         { m = "pingpong"; v = $2 / 1000 }
		$1 == "ring_8B_mpps"               { m = "ring"; v = $2 }
		$1 == "memcpy_65536_incache_gbps"  { m = "memcpy_64k_in"; v = $2 }
		$1 == "memcpy_65536_outcache_gbps" { m = "memcpy_64k_out"; v = $2 }
		$1 == "memcpy_1048576_incache_gbps"  { m = "memcpy_1m_in"; v = $2 }
		$1 == "memcpy_1048576_outcache_gbps" { m = "memcpy_1m_out"; v = $2 }
		$1 == "cma_write_oneway_us"        { m = "cma_write_lat"; v = $2 }
		$1 == "cma_read_us"                { m = "cma_read_lat"; v = $2 }
		$1 == "cma_write_8B_mpps"          { m = "cma_write_mr"; v = $2 }
		$1 == "cma_write_65536_gbps"       { m = "cma_write_bw_64k"; v = $2 }
		$1 == "cma_write_1048576_gbps"     { m = "cma_write_bw_1m"; v = $2 }
		m != "" { printf "%s\tlimit\t%s\t%s\n", r, m, v; m = "" }' "$f" >>"$METRICS"
}

# ---- run ------------------------------------------------------------------------------

if [ $QUICK = 1 ]; then
	LAT_ITERS=20000; BW_SECS=1; UCX_LAT_ITERS=20000; UCX_BW_ITERS=200; PROBE_SECS=0.3
else
	LAT_ITERS=100000; BW_SECS=2; UCX_LAT_ITERS=200000; UCX_BW_ITERS=2000; PROBE_SECS=1
fi

{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm)"
	echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs; pinned: servers $CPU_A, clients $CPU_B"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "softhca: $LIB/libibverbs.so.1 ($( [ "$LIB" = "$BUILD/lib" ] && echo "CMake Release build" || echo "given with --lib"))"
	echo "perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
	echo "ucx: $(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null)"
	echo "rounds: $ROUNDS$( [ $QUICK = 1 ] && echo ' (quick)')"
} >"$OUT/env.txt"

T0=$(date +%s)
for ROUND in $(seq "$ROUNDS"); do
	RDIR=$OUT/round$ROUND
	mkdir -p "$RDIR"
	log "round $ROUND/$ROUNDS: probe"
	run_probe
	log "round $ROUND/$ROUNDS: perftest over softhca_lo (default, then SOFTHCA_MAP=0)"
	run_softhca
	log "round $ROUND/$ROUNDS: ucx_perftest (posix, sysv, cma)"
	run_ucx
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
echo "elapsed: $(( $(date +%s) - T0 ))s" >>"$OUT/env.txt"

report "$METRICS" "$OUT/details.md" >"$OUT/table.md"
{
	echo
	echo "softhca: perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null) over softhca_lo;" \
		"UCX $(dpkg-query -W -f='${Version}' ucx-utils 2>/dev/null) ucx_perftest;" \
		"servers on CPU $CPU_A, clients on CPU $CPU_B; $(sed -n 's/^elapsed: //p' "$OUT/env.txt")," \
		"load $(sed -n 's/^load before: //p' "$OUT/env.txt") before."
	echo "Raw outputs: ${OUT#"$ROOT"/}"
} >>"$OUT/table.md"
cat "$OUT/table.md"
log "details per transport: $OUT/details.md"
