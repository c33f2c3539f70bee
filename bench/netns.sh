#!/bin/bash
# bench/netns.sh: softhca's net path beside plain TCP on the same path, in
# one run, pinned and unpinned, in two places: between two network
# namespaces (softhca_veth0 over a veth pair; needs root) and on one host
# with SOFTHCA_NET=1 (softhca_lo over 127.0.0.1; no root needed).  Cases:
# perftest ib_write_bw and ib_read_bw (64 KiB, 1 MiB) beside qperf tcp_bw
# (one stream), ib_write_lat and ib_send_lat (8 B) beside qperf tcp_lat
# (blocking) and bench/tcplat (busy-poll TCP: SO_BUSY_POLL and a spinning
# non-blocking recv), ib_send_bw 8 B message rate beside qperf tcp_bw and
# udp_bw with 8 B messages; the load (/proc/loadavg) at the start and end
# of every case.  A benchmark, not a test: no thresholds, never run by
# `make check`.  Without root the namespace table says so and is skipped.
# See bench/README.md.
#
#   bench/netns.sh [--rounds N] [--quick] [--lib DIR] [--build DIR]
#                  [--cpus A,B | --no-pin | --pin-only]
#                  [--loopback | --no-loopback] [--port P]
#                  [--out DIR] [--budget SECONDS] [--no-install]
#   bench/netns.sh --report bench/results/DIR...
#
# Prints two markdown tables (between namespaces; one host over loopback),
# each case pinned and unpinned: softhca, two baselines, ratios, goal,
# load; medians over the rounds with min-max.  The raw output of every
# command, metrics.tsv and table.md go to bench/results/<date>-netns/
# (gitignored).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROUNDS=3
QUICK=0
LIB=
BUILD=$ROOT/build-bench
CPUS=0,1
PINS="pinned unpinned"
WHERES="netns lo"
PORT0=18515
OUT=
BUDGET=900
INSTALL=1
REPORT=()

usage() {
	awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"
	cat <<'EOF2'

Options:
  --rounds N      repeat the whole set N times (default 3); the table shows
                  the median and the min-max of the rounds
  --quick         one round, shorter runs (a smoke run of the script)
  --lib DIR       use the softhca libibverbs.so.1 in DIR instead of building
  --build DIR     build softhca (CMake Release) in DIR (default build-bench)
  --cpus A,B      pinned: servers on CPU A, clients on CPU B (default 0,1)
  --no-pin        unpinned only (default: every case pinned and unpinned)
  --pin-only      pinned only
  --loopback      only the one-host table (SOFTHCA_NET=1, softhca_lo)
  --no-loopback   only the namespace table
  --port P        first TCP port of perftest and bench/tcplat; qperf
                  listens on P+1250 (default 18515; the loopback table
                  shares the host's ports with everyone)
  --out DIR       results directory (default bench/results/<date>-netns)
  --budget S      stop everything after S seconds of measuring (default 900)
  --no-install    never apt-get (only report what is missing)
  --report DIR... print the tables over every round of earlier runs'
                  results directories (measures nothing, needs no root)
EOF2
}

while [ $# -gt 0 ]; do
	case "$1" in
	--rounds) ROUNDS=$2; shift ;;
	--quick) QUICK=1; ROUNDS=1 ;;
	--lib) LIB=$(cd "$2" && pwd) || exit 2; shift ;;
	--build) BUILD=$2; shift ;;
	--cpus) CPUS=$2; shift ;;
	--no-pin) PINS=unpinned ;;
	--pin-only) PINS=pinned ;;
	--loopback) WHERES=lo ;;
	--no-loopback) WHERES=netns ;;
	--port) PORT0=$2; shift ;;
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
case "$PORT0" in ''|*[!0-9]*) echo "netns.sh: --port wants a number" >&2; exit 2 ;; esac
if [ "$PORT0" -lt 1024 ] || [ "$PORT0" -gt 60000 ]; then
	echo "netns.sh: --port wants 1024..60000" >&2
	exit 2
fi

exec 3>&2   # the terminal's stderr, also inside redirected function calls
log() { echo "bench-netns: $*" >&3; }
die() { log "$*"; exit 1; }

# ---- the tables -----------------------------------------------------------------
#
# metrics.tsv: round, source, metric, value.  A metric is WHERE/PIN/NAME:
# WHERE netns (between the namespaces) or lo (one host, SOFTHCA_NET=1), PIN
# pinned or unpinned, NAME unique over all sources.  Sources: softhca
# (perftest), tcp (qperf), busy (bench/tcplat), load-start and load-end
# (the 1-minute load average just before and just after that case), fail
# (value 1: that case failed in that round).  Each cell is the median over
# the rounds; the ratios are ratios of those medians.

report() { # metrics.tsv: the tables on stdout
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
	function met(r, ok) { return r == "" ? "" : ok ? ": met" : ": not met" }
	function goal(kind, r1, r2) {
		if (kind == "bw") return "≥ 1.0×" met(r1, r1 >= 1.0)
		if (kind == "lat") return "≤ 1.0× of 1" met(r1, r1 <= 1.0) "; ≤ 1.5× of 2" met(r2, r2 <= 1.5)
		return "beside (no goal)"
	}
	function load(m,   s, e) {
		s = "start:" m; e = "end:" m
		if (!(s in med)) return "—"   # not run (failed before it)
		return fmt(med[s]) "→" ((e in med) ? fmt(med[e]) : "?")
	}
	$3 !~ /^(netns|lo)\/(pinned|unpinned)\/./ { next }   # an older format
	{ split($3, part, "/"); have[part[1]] = 1; havepin[part[1], part[2]] = 1 }
	$2 == "fail" { failed[$3]++; next }
	{
		key = $2 == "load-start" ? "start:" $3 : $2 == "load-end" ? "end:" $3 : $3
		cnt[key]++; val[key, cnt[key]] = $4
	}
	END {
		for (key in cnt) med[key] = median(key)
		n = 0
		row[++n] = "ib_write_bw 64 KiB; 1: qperf tcp_bw 64 KiB (one stream)"; unit[n] = "Gb/s"; sm[n] = "write_bw_64k"; b1[n] = "tcp_bw_64k"; b2[n] = ""; kind[n] = "bw"
		row[++n] = "ib_read_bw 64 KiB; 1: qperf tcp_bw 64 KiB (one stream)"; unit[n] = "Gb/s"; sm[n] = "read_bw_64k"; b1[n] = "tcp_bw_64k"; b2[n] = ""; kind[n] = "bw"
		row[++n] = "ib_write_bw 1 MiB; 1: qperf tcp_bw 1 MiB (one stream)"; unit[n] = "Gb/s"; sm[n] = "write_bw_1m"; b1[n] = "tcp_bw_1m"; b2[n] = ""; kind[n] = "bw"
		row[++n] = "ib_read_bw 1 MiB; 1: qperf tcp_bw 1 MiB (one stream)"; unit[n] = "Gb/s"; sm[n] = "read_bw_1m"; b1[n] = "tcp_bw_1m"; b2[n] = ""; kind[n] = "bw"
		row[++n] = "ib_write_lat 8 B; 1: qperf tcp_lat (blocking); 2: tcplat (busy-poll)"; unit[n] = "µs one-way"; sm[n] = "write_lat"; b1[n] = "tcp_lat"; b2[n] = "busy_lat"; kind[n] = "lat"
		row[++n] = "ib_send_lat 8 B; 1: qperf tcp_lat (blocking); 2: tcplat (busy-poll)"; unit[n] = "µs one-way"; sm[n] = "send_lat"; b1[n] = "tcp_lat"; b2[n] = "busy_lat"; kind[n] = "lat"
		row[++n] = "ib_send_bw 8 B; 1: qperf tcp_bw -m 8 (send() calls); 2: qperf udp_bw -m 8 (received)"; unit[n] = "Mmsg/s"; sm[n] = "send_rate"; b1[n] = "tcp_rate"; b2[n] = "udp_rate"; kind[n] = "rate"
		title["netns"] = "Between two network namespaces: softhca_veth0, TCP over the same veth pair"
		title["lo"] = "One host, SOFTHCA_NET=1: softhca_lo (the net path over loopback), TCP over 127.0.0.1"
		split("netns lo", W, " "); split("pinned unpinned", P, " ")
		shown = 0
		for (wi = 1; wi <= 2; wi++) {
			w = W[wi]
			if (!(w in have)) continue
			if (shown++) print ""
			print "### " title[w]
			print ""
			print "| case | CPUs | unit | softhca | baseline 1 | softhca / 1 | baseline 2 | softhca / 2 | goal | load start→end (softhca; 1; 2) |"
			print "|---|---|---|---|---|---|---|---|---|---|"
			for (i = 1; i <= n; i++) {
				for (pi = 1; pi <= 2; pi++) {
					p = P[pi]
					if (!((w, p) in havepin)) continue
					pre = w "/" p "/"
					s = pre sm[i]; a = pre b1[i]; b = b2[i] == "" ? "" : pre b2[i]
					r1 = ratio(s, a); r2 = b == "" ? "" : ratio(s, b)
					ld = load(s) "; " load(a) (b == "" ? "" : "; " load(b))
					printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
						row[i], p, unit[i], cell(s), cell(a), rfmt(r1),
						b == "" ? "" : cell(b), b == "" ? "" : rfmt(r2),
						goal(kind[i], r1, r2), ld
				}
			}
			print ""
			for (pi = 1; pi <= 2; pi++) {
				p = P[pi]; pre = w "/" p "/"
				if (!((w, p) in havepin)) continue
				printf "Medians of one-way latency, %s: softhca WRITE %s µs, SEND %s µs (perftest t_typical); busy-poll TCP %s µs (tcplat).\n",
					p, cell(pre "write_lat_med"), cell(pre "send_lat_med"), cell(pre "busy_lat_med")
			}
		}
		if (shown) {
			print ""
			print "Ratios: bandwidth and message rate softhca / baseline (below 1×: softhca is slower), latency softhca / baseline (above 1×: softhca is slower). Latencies are averages of half a round trip on both sides. Load: the 1-minute load average read just before and just after each case (median over the rounds); each baseline runs right before the softhca cases it is compared with."
		}
	}' "$1"
}

# --report DIR...: the tables over every round of earlier runs, nothing run.
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

# ---- where: root for the namespaces, CPUs for pinning ------------------------------

if [[ " $WHERES " == *" netns "* ]] && [ "$(id -u)" != 0 ]; then
	log "the namespace table needs root: it creates two network namespaces" \
		"(tests/netns/lib.sh); not measured (run it as root: sudo bench/netns.sh)"
	WHERES=${WHERES/netns/}
	WHERES=${WHERES# }
	[ -n "$WHERES" ] || exit 0
fi

PIN_A=()
PIN_B=()
if [[ " $PINS " == *" pinned "* ]]; then
	[ "$(nproc)" -ge 2 ] || die "pinning needs two CPUs (this machine has $(nproc)); try --no-pin"
	CPU_A=${CPUS%,*}
	CPU_B=${CPUS#*,}
	[ "$CPU_A" != "$CPU_B" ] || die "--cpus wants two different CPUs"
	for c in "$CPU_A" "$CPU_B"; do
		taskset -c "$c" true 2>/dev/null || die "CPU $c is not usable here (--cpus A,B)"
	done
fi

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
# shellcheck disable=SC2317  # run by the EXIT trap (lib.sh's NETNS_CLEANUP)
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
# Our own traps for the loopback table; tests/netns/lib.sh replaces them
# with its own when the namespaces are made, and runs bench_cleanup first.
trap bench_cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
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
command -v gcc >/dev/null || need_pkgs+=(gcc libc6-dev)
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

# ---- build softhca (Release), as bench/run.sh does, and bench/tcplat ----------

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
OUT=$(cd "$OUT" && pwd)
METRICS=$OUT/metrics.tsv
FAILURES=$OUT/failures.txt
: >"$METRICS"
: >"$FAILURES"

TCPLAT=$OUT/tcplat
bounded 60 gcc -O2 -Wall -Wextra -o "$TCPLAT" "$ROOT/bench/tcplat.c" \
	>"$OUT/tcplat.build.txt" 2>&1 || die "cannot build bench/tcplat.c (see $OUT/tcplat.build.txt)"

# ---- the namespaces -------------------------------------------------------------

if [[ " $WHERES " == *" netns "* ]]; then
	# tests/netns/lib.sh owns the EXIT, INT, TERM and HUP traps from here:
	# they end every process in the namespaces and delete them, and run
	# NETNS_CLEANUP first.  Its own watchdog is the backstop for a SIGKILL
	# of this script.
	# shellcheck disable=SC2034  # read by lib.sh
	NETNS_WATCHDOG=$((BUDGET + 600))
	# shellcheck source=tests/netns/lib.sh disable=SC1091
	. "$ROOT/tests/netns/lib.sh"
	NETNS_CLEANUP+=(bench_cleanup)
	# lib.sh's skip exits 77 (a skipped test); a benchmark that cannot
	# run here says why and exits 0.
	# shellcheck disable=SC2317  # called by lib.sh
	skip() {
		log "cannot run here: $*; nothing measured"
		exit 0
	}
	netns_require_root
	netns_setup 2 || die "could not create the namespaces (netns_setup)"
	NS_A=$(netns_name a)
	NS_B=$(netns_name b)
	ADDR_A=$(netns_ip4 a)
	ADDR_B=$(netns_ip4 b)
	log "namespaces $NS_A ($ADDR_A, servers) and $NS_B ($ADDR_B, clients)"
fi

# The measurement is bounded: the watchdog sends us SIGTERM, and the trap
# ends every process (and lib.sh's deletes the namespaces).
( sleep "$BUDGET" && echo "bench-netns: budget of ${BUDGET}s used up: stopping" >&2 &&
	kill -TERM $$ ) 2>/dev/null &
WATCHDOG=$!

# ---- a setting: where (namespaces or loopback) and pinning ----------------------
#
# use_setting WHERE PIN sets what every case below uses: EXEC_A and EXEC_B
# (ip netns exec NS, or nothing), PIN_A and PIN_B (taskset, or nothing),
# SRV_ADDR (the server's address for the clients), DEV, NET_ENV (SOFTHCA_NET=1
# on loopback), GID_A and GID_B, KEY (WHERE/PIN, the metrics' prefix).

# gid_index ADDR [NS]: the index of the RoCE v2 GID ::ffff:ADDR of $DEV
# (in namespace NS)
gid_index() {
	local ex=()
	[ -n "${2:-}" ] && ex=(ip netns exec "$2")
	timeout -k 2 30 "${ex[@]}" env LD_LIBRARY_PATH="$LIB" "${NET_ENV[@]}" \
		ibv_devinfo -v -d "$DEV" </dev/null 2>&1 |
		sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${1//./\\.}, RoCE v2\$/\1/p" |
		head -1
}

use_setting() { # where pin
	WHERE=$1
	PIN=$2
	KEY=$WHERE/$PIN
	if [ "$WHERE" = netns ]; then
		EXEC_A=(ip netns exec "$NS_A")
		EXEC_B=(ip netns exec "$NS_B")
		SRV_ADDR=$ADDR_A
		DEV=softhca_$NETNS_IF
		NET_ENV=()
		GID_A=$(gid_index "$ADDR_A" "$NS_A")
		GID_B=$(gid_index "$ADDR_B" "$NS_B")
		HOSTS="servers in namespace $NS_A ($ADDR_A), clients in $NS_B ($ADDR_B)"
	else
		EXEC_A=()
		EXEC_B=()
		SRV_ADDR=127.0.0.1
		DEV=softhca_lo
		NET_ENV=(SOFTHCA_NET=1)
		GID_A=$(gid_index 127.0.0.1)
		GID_B=$GID_A
		HOSTS="servers and clients on this host, SOFTHCA_NET=1"
	fi
	if [ "$PIN" = pinned ]; then
		PIN_A=(taskset -c "$CPU_A")
		PIN_B=(taskset -c "$CPU_B")
	else
		PIN_A=()
		PIN_B=()
	fi
}

listening() { # port: something listens on it where the servers run
	[ -n "$("${EXEC_A[@]}" ss -Hltn "sport = :$1" 2>/dev/null)" ]
}

# ---- a server, then a client ----------------------------------------------------

PORT=$PORT0
SERVER_RC=
PAIR_WHY=
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

# next_port: the next free port for a pair (the loopback's ports are shared
# with everyone on this host)
next_port() {
	local i
	for ((i = 0; i < 50; i++)); do
		PORT=$((PORT + 1))
		[ $PORT -gt $((PORT0 + 1000)) ] && PORT=$PORT0
		listening "$PORT" || return 0
	done
}

# pair NAME SECONDS -- SERVER_CMD... -- CLIENT_CMD...: the server where
# EXEC_A says on PIN_A, then (once it listens on $PORT) the client where
# EXEC_B says on PIN_B, both under timeout, with softhca's library and
# NET_ENV.  Outputs in $RDIR/NAME.server.txt and NAME.client.txt; the
# status is the client's (or the server's when the client succeeded).
pair() {
	local name=$1 secs=$2 srv=() cli=() spid rc i
	shift 2
	[ "$1" = -- ] && shift
	while [ $# -gt 0 ] && [ "$1" != -- ]; do srv+=("$1"); shift; done
	[ $# -gt 0 ] && shift
	cli=("$@")
	PAIR_WHY=
	if listening "$PORT"; then
		next_port
		listening "$PORT" && { PAIR_WHY="port $PORT is taken (--port)"; return 1; }
	fi
	{
		echo "# server (${EXEC_A[*]:-this host}${PIN_A[*]:+, ${PIN_A[*]}}): timeout $secs ${NET_ENV[*]} ${srv[*]}"
		echo "# client (${EXEC_B[*]:-this host}${PIN_B[*]:+, ${PIN_B[*]}}): timeout $secs ${NET_ENV[*]} ${cli[*]}"
	} >>"$RDIR/commands.txt"
	timeout -k 2 "$secs" "${EXEC_A[@]}" env LD_LIBRARY_PATH="$LIB" "${NET_ENV[@]}" \
		"${PIN_A[@]}" "${srv[@]}" >"$RDIR/$name.server.txt" 2>&1 </dev/null &
	spid=$!
	PIDS+=("$spid")
	for ((i = 0; i < 100; i++)); do
		listening "$PORT" && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.1
	done
	if ! listening "$PORT"; then
		finish_server "$spid" 0
		PAIR_WHY="the server did not listen on port $PORT (exit $SERVER_RC: $(grep -m1 . "$RDIR/$name.server.txt"))"
		next_port
		return 1
	fi
	bounded "$secs" "${EXEC_B[@]}" env LD_LIBRARY_PATH="$LIB" "${NET_ENV[@]}" \
		"${PIN_B[@]}" "${cli[@]}" >"$RDIR/$name.client.txt" 2>&1 </dev/null
	rc=$?
	finish_server "$spid" 5
	next_port
	[ $rc -eq 0 ] && rc=$SERVER_RC
	return $rc
}

record() { # source name value: one line of metrics.tsv for this setting
	[ -n "$3" ] && echo -e "$ROUND\t$1\t$KEY/$2\t$3" >>"$METRICS"
}

load_mark() { # start|end name: the 1-minute load average now
	record "load-$1" "$2" "$(cut -d' ' -f1 /proc/loadavg)"
}

# why NAME: the first line of NAME's outputs that says what went wrong
why() {
	cat "$RDIR/$1.client.txt" "$RDIR/$1.server.txt" 2>/dev/null |
		grep -m1 -iE 'softhca\[[0-9]+\] (warning|error)|fail|unable|couldn|error|timeout|refused|tcplat:' |
		sed 's/^[[:space:]]*//'
}

# failure STATUS NAME SECONDS: what went wrong, in one line
failure() {
	local last
	if [ "$1" = 124 ] || [ "$1" = 137 ]; then
		last=$(grep -v '^[[:space:]-]*$' "$RDIR/$2.client.txt" 2>/dev/null | tail -1 |
			sed 's/^[[:space:]]*//')
		echo "no result within ${3}s, killed (a hang?); the client's last line: ${last:-none}"
	elif [ -n "$PAIR_WHY" ]; then
		echo "$PAIR_WHY"
	else
		echo "exit $1: $(why "$2")"
	fi
}

failed_case() { # name what reason
	record fail "$1" 1
	echo "round $ROUND, $KEY: $1 ($2): $3" >>"$FAILURES"
	log "$KEY $1 failed: $3"
}

# ---- softhca: Debian's perftest, unmodified, over $DEV ---------------------------

declare -A DEAD=()   # KEY/NAME of softhca cases that failed in round 1: not run again
SOFTHCA_CASES="write_bw_64k read_bw_64k write_bw_1m read_bw_1m write_lat send_lat send_rate"

# softhca_case NAME KIND BINARY ARGS...: KIND lat (t_avg and t_typical of
# the client, one-way), bw (BW average, Gb/s) or rate (MsgRate, Mpps)
softhca_case() {
	local name=$1 kind=$2 bin=$3 secs v line reason
	shift 3
	if [ -n "${DEAD[$KEY/$name]:-}" ]; then
		record fail "$name" 1
		return 0
	fi
	secs=60
	[ "$kind" != lat ] && secs=$((BW_SECS + 30))
	local common=(-d "$DEV" -p "$PORT" -F "$@")
	load_mark start "$name"
	# stdbuf -oL: what perftest printed survives a kill after a timeout
	if pair "softhca.$name" "$secs" \
		-- stdbuf -oL "$bin" "${common[@]}" -x "$GID_A" \
		-- stdbuf -oL "$bin" "${common[@]}" -x "$GID_B" "$SRV_ADDR"; then
		load_mark end "$name"
		line=$(awk '/#bytes/ { h = 1; next }
			h && $1 ~ /^[0-9]+$/ && NF >= 5 { print; exit }' \
			"$RDIR/softhca.$name.client.txt")
		case $kind in
		lat) v=$(awk '{ print $6 }' <<<"$line")
			record softhca "${name}_med" "$(awk '{ print $5 }' <<<"$line")" ;;
		bw) v=$(awk '{ print $4 }' <<<"$line") ;;
		rate) v=$(awk '{ print $5 }' <<<"$line") ;;
		esac
		if [ -n "$v" ]; then
			record softhca "$name" "$v"
			return 0
		fi
		reason="exit 0 but no result line"
	else
		reason=$(failure $? "softhca.$name" "$secs")
		load_mark end "$name"
	fi
	failed_case "$name" "$bin" "$reason (see $RDIR/softhca.$name.*.txt)"
	[ "$ROUND" = 1 ] && DEAD[$KEY/$name]=1
	return 0
}

# probe_softhca: one short ib_write_lat (100 round trips, 20 s at most)
# before the rounds, in every setting.  When even that fails, every softhca
# case of the setting is marked failed with its reason, and the run costs
# seconds, not minutes of timeouts.
probe_softhca() {
	local m reason
	RDIR=$OUT/probe.${KEY//\//.}
	mkdir -p "$RDIR"
	if [ -z "$GID_A" ] || [ -z "$GID_B" ]; then
		reason="no RoCE v2 GID ::ffff:<address> on $DEV (ibv_devinfo -v)"
	elif pair softhca.probe 20 \
		-- stdbuf -oL ib_write_lat -d "$DEV" -p "$PORT" -F -s 8 -n 100 -x "$GID_A" \
		-- stdbuf -oL ib_write_lat -d "$DEV" -p "$PORT" -F -s 8 -n 100 -x "$GID_B" "$SRV_ADDR"; then
		return 0
	else
		reason="the probe (ib_write_lat -n 100) failed: $(failure $? softhca.probe 20)"
	fi
	log "softhca, $KEY: $reason (see $RDIR); softhca not measured there"
	echo "$KEY, all softhca cases: $reason" >>"$FAILURES"
	for m in $SOFTHCA_CASES; do
		DEAD[$KEY/$m]=1
	done
}

# ---- TCP: qperf and bench/tcplat on the same path -------------------------------
#
# One qperf server per setting (port P+1250, its data connections on ports
# of its choice); -uu -ub: bits/s and ns.

QPERF_PORT=$((PORT0 + 1250))
QPERF_PID=

start_qperf() {
	if listening "$QPERF_PORT"; then
		log "$KEY: port $QPERF_PORT (qperf) is taken; no TCP baseline (--port)"
		return 1
	fi
	timeout -k 2 $((BUDGET + 30)) "${EXEC_A[@]}" "${PIN_A[@]}" \
		qperf -lp "$QPERF_PORT" >>"$OUT/qperf.server.txt" 2>&1 </dev/null &
	QPERF_PID=$!
	PIDS+=("$QPERF_PID")
	local i
	for ((i = 0; i < 100; i++)); do
		listening "$QPERF_PORT" && return 0
		kill -0 "$QPERF_PID" 2>/dev/null || break
		sleep 0.1
	done
	log "$KEY: the qperf server did not start on port $QPERF_PORT (see $OUT/qperf.server.txt)"
	return 1
}

stop_qperf() {
	[ -n "$QPERF_PID" ] || return 0
	kill_tree TERM "$QPERF_PID"
	wait "$QPERF_PID" 2>/dev/null
	forget "$QPERF_PID"
	QPERF_PID=
}

# tcp_case NAME FIELD PER QPERF_ARGS...: FIELD is the line of qperf's
# output (bw, recv_bw, latency); the figure is its value in Gb/s or µs,
# divided by PER (64 for 8 B messages: Gb/s to 10^9 messages/s, then
# reported in 10^6/s: PER 0.064)
tcp_case() {
	local name=$1 field=$2 per=$3 f v
	shift 3
	f=$RDIR/tcp.$name.client.txt
	echo "# client (${EXEC_B[*]:-this host}${PIN_B[*]:+, ${PIN_B[*]}}): timeout 60 qperf -lp $QPERF_PORT -uu -ub -vu -t $TCP_SECS $SRV_ADDR $*" \
		>>"$RDIR/commands.txt"
	if [ -z "$QPERF_PID" ]; then
		failed_case "$name" "qperf $*" "no qperf server"
		return 0
	fi
	load_mark start "$name"
	if ! bounded 60 "${EXEC_B[@]}" "${PIN_B[@]}" \
		qperf -lp "$QPERF_PORT" -uu -ub -vu -t "$TCP_SECS" "$SRV_ADDR" "$@" \
		>"$f" 2>&1 </dev/null; then
		load_mark end "$name"
		failed_case "$name" "qperf $*" "$(grep -m1 . "$f") (see $f)"
		return 0
	fi
	load_mark end "$name"
	# "bw = 18194104320 bits/sec", "latency = 30077 ns" (other units
	# converted, in case -uu ever picks them)
	v=$(awk -v field="$field" -v per="$per" '
		function scale(u) {
			if (u ~ /^bits/) return 1e-9;  if (u ~ /^Kb/) return 1e-6
			if (u ~ /^Mb/) return 1e-3;    if (u ~ /^Gb/) return 1
			if (u == "ns") return 1e-3;    if (u == "us") return 1
			if (u == "ms") return 1e3;     if (u ~ /^sec/) return 1e6
			return -1
		}
		$1 == field && $2 == "=" && scale($4) > 0 {
			printf "%.6g\n", $3 * scale($4) / per; exit
		}' "$f")
	if [ -n "$v" ]; then
		record tcp "$name" "$v"
	else
		failed_case "$name" "qperf $*" "no result (see $f)"
	fi
}

# busy_case: bench/tcplat, 8 B ping-pong with SO_BUSY_POLL (50 µs) and a
# spinning non-blocking recv() on both ends; average and median one-way
busy_case() {
	local v reason
	load_mark start busy_lat
	if pair tcp.busy_lat 60 \
		-- "$TCPLAT" server "$PORT" spin 50 \
		-- "$TCPLAT" client "$SRV_ADDR" "$PORT" spin 50 "$LAT_ITERS"; then
		load_mark end busy_lat
		v=$(sed -nE 's/.* avg_us ([0-9.]+) .*/\1/p' "$RDIR/tcp.busy_lat.client.txt")
		record busy busy_lat_med "$(sed -nE 's/.* median_us ([0-9.]+).*/\1/p' "$RDIR/tcp.busy_lat.client.txt")"
		if [ -n "$v" ]; then
			record busy busy_lat "$v"
			grep -q '(set)' "$RDIR/tcp.busy_lat.client.txt" ||
				echo "round $ROUND, $KEY: busy_lat: SO_BUSY_POLL not set ($(grep -o 'busy_poll [^)]*)' "$RDIR/tcp.busy_lat.client.txt")): the figure is the spinning recv alone" >>"$FAILURES"
			return 0
		fi
		reason="exit 0 but no result line"
	else
		reason=$(failure $? tcp.busy_lat 60)
		load_mark end busy_lat
	fi
	failed_case busy_lat tcplat "$reason (see $RDIR/tcp.busy_lat.*.txt)"
}

# ---- one setting: each baseline right before the softhca cases it is
# compared with, so that both see the same load ------------------------------------

run_setting() {
	start_qperf
	tcp_case tcp_bw_64k bw 1 -m 64K tcp_bw
	softhca_case write_bw_64k bw ib_write_bw -s 65536 -D "$BW_SECS" --report_gbits
	softhca_case read_bw_64k bw ib_read_bw -s 65536 -D "$BW_SECS" --report_gbits
	tcp_case tcp_bw_1m bw 1 -m 1M tcp_bw
	softhca_case write_bw_1m bw ib_write_bw -s 1048576 -D "$BW_SECS" --report_gbits
	softhca_case read_bw_1m bw ib_read_bw -s 1048576 -D "$BW_SECS" --report_gbits
	tcp_case tcp_lat latency 1 -m 8 tcp_lat
	busy_case
	softhca_case write_lat lat ib_write_lat -s 8 -n "$LAT_ITERS"
	softhca_case send_lat lat ib_send_lat -s 8 -n "$LAT_ITERS"
	tcp_case tcp_rate bw 0.064 -m 8 tcp_bw
	tcp_case udp_rate recv_bw 0.064 -m 8 udp_bw
	softhca_case send_rate rate ib_send_bw -s 8 -D "$BW_SECS"
	stop_qperf
}

# ---- run ------------------------------------------------------------------------------

if [ $QUICK = 1 ]; then
	BW_SECS=1; TCP_SECS=1; LAT_ITERS=5000
else
	BW_SECS=2; TCP_SECS=2; LAT_ITERS=20000
fi

{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm)"
	echo "cpu: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs;" \
		"settings: $PINS$( [[ " $PINS " == *" pinned "* ]] && echo " (pinned: servers on CPU $CPU_A, clients on CPU $CPU_B)")"
	echo "tables: $WHERES"
	echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
	[[ " $WHERES " == *" netns "* ]] &&
		echo "namespaces: $NS_A $ADDR_A (servers), $NS_B $ADDR_B (clients), veth pair through a bridge namespace"
	echo "softhca: $LIB/libibverbs.so.1 ($( [ "$LIB" = "$BUILD/lib" ] && echo "CMake Release build" || echo "given with --lib")); SOFTHCA_PORT_BASE=${SOFTHCA_PORT_BASE:-default}"
	echo "perftest: $(dpkg-query -W -f='${Version}' perftest 2>/dev/null)"
	echo "qperf: $(dpkg-query -W -f='${Version}' qperf 2>/dev/null)"
	echo "tcplat: $TCPLAT (bench/tcplat.c), spin, SO_BUSY_POLL 50"
	echo "rounds: $ROUNDS$( [ $QUICK = 1 ] && echo ' (quick)'); perftest bw -D $BW_SECS, lat -n $LAT_ITERS; qperf -t $TCP_SECS; tcplat $LAT_ITERS round trips"
} >"$OUT/env.txt"

T0=$(date +%s)
for WHERE in $WHERES; do
	for PIN in $PINS; do
		use_setting "$WHERE" "$PIN"
		echo "$KEY: $DEV, GID index server ${GID_A:-none}, client ${GID_B:-none}; $HOSTS" >>"$OUT/env.txt"
		probe_softhca
	done
done

for ROUND in $(seq "$ROUNDS"); do
	for WHERE in $WHERES; do
		for PIN in $PINS; do
			use_setting "$WHERE" "$PIN"
			RDIR=$OUT/round$ROUND/$WHERE.$PIN
			mkdir -p "$RDIR"
			log "round $ROUND/$ROUNDS, $KEY: qperf, tcplat and perftest over $DEV (load $(cut -d' ' -f1 /proc/loadavg))"
			run_setting
		done
	done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$OUT/env.txt"
echo "elapsed: $(( $(date +%s) - T0 ))s" >>"$OUT/env.txt"

report "$METRICS" >"$OUT/table.md"
{
	echo
	echo "softhca: perftest $(dpkg-query -W -f='${Version}' perftest 2>/dev/null) (RoCE v2 GID of the IPv4 address);" \
		"TCP: qperf $(dpkg-query -W -f='${Version}' qperf 2>/dev/null) (blocking) and bench/tcplat" \
		"(busy-poll: SO_BUSY_POLL 50 µs and a spinning non-blocking recv on both ends);" \
		"$( [[ " $WHERES " == *" netns "* ]] && echo "namespace table: servers in namespace a, clients in b;")" \
		"$( [[ " $WHERES " == *" lo "* ]] && echo "loopback table: servers and clients on this host, SOFTHCA_NET=1;")" \
		"$( [[ " $PINS " == *" pinned "* ]] && echo "pinned: servers on CPU $CPU_A, clients on CPU $CPU_B;")" \
		"$ROUNDS round(s)$( [ $QUICK = 1 ] && echo ' (--quick: a smoke run, not a measurement)'), $(sed -n 's/^elapsed: //p' "$OUT/env.txt")," \
		"load $(sed -n 's/^load before: //p' "$OUT/env.txt") before, $(sed -n 's/^load after: //p' "$OUT/env.txt") after."
	if [ -s "$FAILURES" ]; then
		echo
		echo "Failures and notes (a softhca case that failed in round 1 is not run again):"
		sed 's/^/- /' "$FAILURES"
	fi
	echo "Raw outputs: ${OUT#"$ROOT"/}"
} >>"$OUT/table.md"
cat "$OUT/table.md"
exit 0
