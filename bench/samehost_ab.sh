#!/bin/bash
# bench/samehost_ab.sh: one perftest case on the same host (softhca_lo),
# two builds of softhca alternated round by round (A then B in odd
# rounds, B then A in even ones), so that this machine's drift, which
# moves a figure by tens of percent between runs minutes apart, falls on
# both alike.  Server on CPU 0, client on CPU 1 (taskset), 8 B unless the
# extra arguments say -s.  A benchmark, not a test; it loads both CPUs.
#
#   bench/samehost_ab.sh ROUNDS CASE LIBDIR_A LIBDIR_B [PERFTEST ARGS...]
#     CASE: ib_write_lat, ib_send_lat, ib_read_lat (figure: t_typical,
#       µs, -n 50000 unless the args say -n) or ib_write_bw, ib_send_bw,
#       ib_read_bw (figure: MsgRate, Mpps, -D 1 unless the args say -D
#       or -n)
#     LIBDIR: a directory holding that build's libibverbs.so.1
#
# One line per round, "rR A B B/A", then the geometric mean of B/A over
# the rounds, in how many rounds B was better (lower latency, higher
# rate), and the 1-minute load before and after.  perftest's port:
# PORT (default 41700) and up, one per run.
set -u
[ $# -ge 4 ] || { sed -n '2,20p' "$0"; exit 2; }
rounds=$1 case=$2 liba=$3 libb=$4
shift 4
args=("$@")
size=8
for ((i = 0; i < ${#args[@]}; i++)); do
	[ "${args[$i]}" = -s ] && size=${args[$((i + 1))]:-8}
done
case $case in
*_lat)	lower=1
	[[ " ${args[*]} " == *" -n "* ]] || args+=(-n 50000) ;;
*_bw)	lower=0
	[[ " ${args[*]} " == *" -D "* || " ${args[*]} " == *" -n "* ]] ||
		args+=(-D 1) ;;
*)	echo "samehost_ab: CASE is a perftest latency or bandwidth program" >&2
	exit 2 ;;
esac
[[ " ${args[*]} " == *" -s "* ]] || args+=(-s "$size")
for l in "$liba" "$libb"; do
	[ -e "$l/libibverbs.so.1" ] ||
		{ echo "samehost_ab: no $l/libibverbs.so.1" >&2; exit 2; }
done
port=${PORT:-41700}

# run LIBDIR: the case's figure (empty if it failed)
run() {
	local lib=$1 v
	port=$((port + 1))
	LD_LIBRARY_PATH=$lib taskset -c 0 timeout 60 "$case" -d softhca_lo \
		-p "$port" -F "${args[@]}" >/dev/null 2>&1 &
	sleep 0.4
	# the result line starts with the size; the figure is column 5
	# (t_typical, or MsgRate)
	v=$(LD_LIBRARY_PATH=$lib taskset -c 1 timeout 60 "$case" \
		-d softhca_lo -p "$port" -F "${args[@]}" localhost 2>&1 |
		awk -v s="$size" '$1 == s && NF >= 5 { print $5; exit }')
	wait
	echo "$v"
}

load0=$(cut -d' ' -f1 /proc/loadavg)
n=0 better=0 logsum=0
for ((r = 1; r <= rounds; r++)); do
	if ((r % 2)); then a=$(run "$liba"); b=$(run "$libb")
	else b=$(run "$libb"); a=$(run "$liba"); fi
	if [ -z "$a" ] || [ -z "$b" ]; then
		echo "r$r ${a:--} ${b:--} (a run failed)"
		continue
	fi
	read -r ratio lg win < <(awk -v a="$a" -v b="$b" -v lower="$lower" \
		'BEGIN { r = b / a; printf "%.3f %.6f %d\n", r, log(r),
			 (lower ? b < a : b > a) }')
	echo "r$r $a $b $ratio"
	n=$((n + 1)); better=$((better + win))
	logsum=$(awk -v s="$logsum" -v l="$lg" 'BEGIN { printf "%.6f", s + l }')
done
[ "$n" -gt 0 ] || { echo "samehost_ab: no round completed" >&2; exit 1; }
awk -v s="$logsum" -v n="$n" -v w="$better" -v c="$case" -v l0="$load0" \
	-v l1="$(cut -d' ' -f1 /proc/loadavg)" -v lower="$lower" 'BEGIN {
	printf "%s: B/A geometric mean %.3f over %d rounds; B %s in %d of %d; load %s -> %s\n",
	       c, exp(s / n), n, lower ? "lower" : "higher", w, n, l0, l1 }'
