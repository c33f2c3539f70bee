#!/bin/bash
# bench/middleware.sh: UCX and MPI over softhca beside UCX and MPI over
# their own transports, measured in one run, with ratios.  A benchmark,
# not a test: no thresholds, never run by `make check`.
#
#   bench/middleware.sh [--build DIR] [--rounds N] [--no-netns]
#
# One host: ucx_perftest over softhca (UCX_TLS=rc_verbs,ud_verbs on
# softhca_lo) beside UCX's shared-memory transports (posix and sysv for
# small messages, with cma for large ones), and the MPI ping-pong of
# tests/external/mpi_check.c (--bench: 0 B, 8 B, 64 KiB, 1 MiB) under Open
# MPI's pml ucx over softhca beside the same over UCX's shared memory, and
# MPICH over softhca beside MPICH's own shared memory.  Beside them,
# softhca's own perftest figures (ib_write_lat, ib_send_lat, ib_write_bw)
# show what the verbs layer costs by itself.  Between two namespaces
# (root only): ucx_perftest over softhca's net path beside UCX over TCP on
# the same veth.  Servers run on CPU 0, clients on CPU 1.
#
# Prints a markdown table (medians over the rounds) and the load average;
# raw outputs go to bench/results/middleware-<date>/ (gitignored).
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD=$ROOT/build
ROUNDS=3
NETNS=1
while [ $# -gt 0 ]; do
	case "$1" in
	--build) BUILD=$(cd "$2" && pwd) || exit 2; shift ;;
	--rounds) ROUNDS=$2; shift ;;
	--no-netns) NETNS=0 ;;
	-h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
	*) echo "middleware.sh: unknown option $1" >&2; exit 2 ;;
	esac
	shift
done
TOOL=$BUILD/bin/softhca
[ -x "$TOOL" ] || { echo "middleware.sh: no $TOOL (make first)" >&2; exit 1; }
for c in ucx_perftest mpirun.openmpi mpicc.openmpi mpiexec.mpich mpicc.mpich \
	 ib_write_lat ib_send_lat ib_write_bw taskset; do
	command -v "$c" >/dev/null ||
		{ echo "middleware.sh: $c missing (scripts/install-deps.sh)" >&2; exit 1; }
done
OUT=$ROOT/bench/results/middleware-$(date +%Y%m%d-%H%M%S)
mkdir -p "$OUT"
TSV=$OUT/metrics.tsv
: >"$TSV"
log() { echo "bench: $*" >&2; }
unset LD_PRELOAD LD_LIBRARY_PATH
ROOTOPT=()
[ "$(id -u)" = 0 ] && ROOTOPT=(--allow-run-as-root)

mpicc.openmpi -O2 -o "$OUT/mpi_ompi" "$ROOT/tests/external/mpi_check.c" &&
	mpicc.mpich -O2 -o "$OUT/mpi_mpich" "$ROOT/tests/external/mpi_check.c" ||
	{ echo "middleware.sh: mpi_check.c does not build" >&2; exit 1; }

port=19400
SRV_PRE=(env); CLI_PRE=(env); SRV_DEV=; CLI_DEV=; HOST=

# ucx ROUND SOURCE TEST SIZE ITERS TLS: an ucx_perftest pair; records the
# median latency (us) of latency tests and 8-byte gets, else the average
# bandwidth (MB/s).  SRV_PRE/CLI_PRE: commands the server/client run under
# (softhca run, ip netns exec ...); SRV_DEV/CLI_DEV: UCX_NET_DEVICES.
ucx() {
	local r=$1 src=$2 test=$3 size=$4 iters=$5 tls=$6 f col=7
	port=$((port + 1))
	f=$OUT/ucx-$src-$test-$size.$r
	env UCX_TLS="$tls" ${SRV_DEV:+UCX_NET_DEVICES=$SRV_DEV} \
		timeout 120 "${SRV_PRE[@]}" taskset -c 0 ucx_perftest -p "$port" \
		-t "$test" -s "$size" -n "$iters" >"$f.srv" 2>&1 &
	sleep 0.5
	env UCX_TLS="$tls" ${CLI_DEV:+UCX_NET_DEVICES=$CLI_DEV} \
		timeout 120 "${CLI_PRE[@]}" taskset -c 1 ucx_perftest -p "$port" \
		-t "$test" -s "$size" -n "$iters" "${HOST:-127.0.0.1}" >"$f" 2>&1
	wait
	# Final: iters p50 avg overall bw-avg bw-overall rate-avg rate-overall
	case $test in *_lat) col=3 ;; esac
	[ "$test" = ucp_get ] && [ "$size" -le 64 ] && col=3
	awk -v c="$col" -v r="$r" -v s="$src" -v m="$test $size" \
		'/^Final:/ { printf "%s\t%s\t%s\t%s\n", r, s, m, $c }' "$f" >>"$TSV"
}

# perftest ROUND NAME ARGS...: softhca's own figure (typical latency or
# average bandwidth, MB/s)
perftest() {
	local r=$1 name=$2 f
	shift 2
	port=$((port + 1))
	f=$OUT/perftest-$name.$r
	timeout 60 "$TOOL" run taskset -c 0 "$@" -p "$port" >"$f.srv" 2>&1 &
	sleep 0.5
	timeout 60 "$TOOL" run taskset -c 1 "$@" -p "$port" 127.0.0.1 >"$f" 2>&1
	wait
	case $name in
	*lat*) awk -v r="$r" -v m="$name" '$1 ~ /^[0-9]+$/ && NF >= 6 { v = $6 }
		END { if (v != "") printf "%s\tsofthca-verbs\t%s\t%s\n", r, m, v }' "$f" >>"$TSV" ;;
	*) awk -v r="$r" -v m="$name" '$1 ~ /^[0-9]+$/ && NF >= 4 { v = $4 }
		END { if (v != "") printf "%s\tsofthca-verbs\t%s\t%s\n", r, m, v }' "$f" >>"$TSV" ;;
	esac
}

# mpi ROUND SOURCE LAUNCH...: mpi_check --bench; latency per size (us)
mpi() {
	local r=$1 src=$2 f=$OUT/mpi-$2.$1
	shift 2
	timeout 180 "$@" >"$f" 2>&1
	awk -v r="$r" -v s="$src" '/^mpi_bench:/ {
		printf "%s\t%s\tmpi pingpong %s\t%s\n", r, s, $3, $5 }' "$f" >>"$TSV"
}

SM=posix,sysv,cma,self
for r in $(seq 1 "$ROUNDS"); do
	log "round $r: one host"
	perftest "$r" "ib_write_lat 8" ib_write_lat -s 8 -n 20000 -R
	perftest "$r" "ib_send_lat 8" ib_send_lat -s 8 -n 20000 -R
	perftest "$r" "ib_write_bw 1M" ib_write_bw -s 1048576 -n 2000 -R
	for t in "tag_lat 8 20000" "ucp_put_lat 8 20000" "ucp_get 8 20000" \
		 "tag_bw 65536 2000" "tag_bw 1048576 500" \
		 "ucp_put_bw 1048576 500"; do
		set -- $t
		SRV_PRE=("$TOOL" run); CLI_PRE=("$TOOL" run)
		SRV_DEV=softhca_lo:1; CLI_DEV=softhca_lo:1
		ucx "$r" softhca "$1" "$2" "$3" rc_verbs,ud_verbs
		SRV_PRE=(env); CLI_PRE=(env); SRV_DEV=; CLI_DEV=
		ucx "$r" ucx-shm "$1" "$2" "$3" "$SM"
	done
	mpi "$r" ompi-softhca "$TOOL" run mpirun.openmpi "${ROOTOPT[@]}" -np 2 \
		--mca pml ucx --mca btl self -x UCX_TLS=rc_verbs,ud_verbs,self \
		-x UCX_NET_DEVICES=softhca_lo:1 --bind-to core \
		"$OUT/mpi_ompi" --bench
	# pml ucx takes UCX without a network device only when told to
	mpi "$r" ompi-ucx-shm mpirun.openmpi "${ROOTOPT[@]}" -np 2 \
		--mca pml ucx --mca btl self --mca pml_ucx_tls any \
		--mca pml_ucx_devices any -x UCX_TLS=$SM --bind-to core \
		"$OUT/mpi_ompi" --bench
	mpi "$r" mpich-softhca "$TOOL" run mpiexec.mpich -n 2 \
		-genv UCX_TLS rc_verbs,ud_verbs,self \
		-genv UCX_NET_DEVICES softhca_lo:1 -genv MPIR_CVAR_NOLOCAL 1 \
		-bind-to core "$OUT/mpi_mpich" --bench
	mpi "$r" mpich-own-shm mpiexec.mpich -n 2 -bind-to core \
		"$OUT/mpi_mpich" --bench
done

if [ "$NETNS" = 1 ] && [ "$(id -u)" = 0 ]; then
	NA=shcabench-a-$$ NB=shcabench-b-$$
	cleanup() { ip netns del "$NA" 2>/dev/null; ip netns del "$NB" 2>/dev/null; }
	trap cleanup EXIT
	ip netns add "$NA" && ip netns add "$NB" &&
	ip link add bva type veth peer name bvb &&
	ip link set bva netns "$NA" && ip link set bvb netns "$NB" &&
	ip -n "$NA" addr add 10.233.0.1/24 dev bva &&
	ip -n "$NB" addr add 10.233.0.2/24 dev bvb &&
	ip -n "$NA" link set lo up && ip -n "$NB" link set lo up &&
	ip -n "$NA" link set bva up && ip -n "$NB" link set bvb up || exit 1
	sleep 1
	for r in $(seq 1 "$ROUNDS"); do
		log "round $r: two namespaces"
		for t in "tag_lat 8 5000" "ucp_put_lat 8 5000" \
			 "tag_bw 65536 500" "tag_bw 1048576 100" \
			 "ucp_put_bw 1048576 100"; do
			set -- $t
			# the server in b, the client in a, on the veth pair
			SRV_PRE=(ip netns exec "$NB" "$TOOL" run)
			CLI_PRE=(ip netns exec "$NA" "$TOOL" run)
			SRV_DEV=softhca_bvb:1; CLI_DEV=softhca_bva:1
			HOST=10.233.0.2
			ucx "$r" netns-softhca "$1" "$2" "$3" rc_verbs,ud_verbs
			SRV_PRE=(ip netns exec "$NB"); CLI_PRE=(ip netns exec "$NA")
			SRV_DEV=bvb; CLI_DEV=bva
			ucx "$r" netns-ucx-tcp "$1" "$2" "$3" tcp
			HOST=
		done
	done
fi

# the table: median per (source, metric), ratios softhca / baseline
awk -F'\t' '
function med(k,   n, i, j, t, a) {
	n = split(vals[k], a, " ")
	for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++)
		if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
	return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ k = $2 SUBSEP $3; vals[k] = vals[k] " " $4; seen[$3] = 1; src[$2] = 1 }
END {
	n = split("softhca:ucx-shm ompi-softhca:ompi-ucx-shm mpich-softhca:mpich-own-shm netns-softhca:netns-ucx-tcp", pairs, " ")
	for (m in seen) for (p = 1; p <= n; p++) {
		split(pairs[p], ab, ":")
		if (!((ab[1], m) in vals) || !((ab[2], m) in vals)) continue
		a = med(ab[1] SUBSEP m); b = med(ab[2] SUBSEP m)
		printf "| %s: %s | %s | %s: %s | %.2fx |\n", ab[1], m, a, ab[2], b, b ? a / b : 0
	}
	for (m in seen) if (("softhca-verbs", m) in vals)
		printf "| softhca verbs (perftest): %s | %s | | |\n", m, med("softhca-verbs" SUBSEP m)
}' "$TSV" | sort >"$OUT/table.md"
echo "| case | softhca | baseline | ratio (softhca / baseline) |"
echo "|---|---|---|---|"
cat "$OUT/table.md"
echo
echo "latencies in us (lower is better), bandwidths in MB/s (higher is better);"
echo "medians of $ROUNDS rounds; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "raw outputs: $OUT"
