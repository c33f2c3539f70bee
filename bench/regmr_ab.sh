#!/bin/bash
# bench/regmr_ab.sh: whole-page small MRs (4 KiB, 8 KiB, 64 KiB, COUNT of
# each, every one over its own never-written pages), registered and
# deregistered with two builds and by the kernel alone
# (bench/regmr_floor.c), alternated in ROUNDS rounds in one run, so that
# the machine's load falls on all three alike.  Per case: the medians of
# reg/s, dereg/s, and the CPU time per reg+dereg pair (getrusage: the
# total is exact, its user/kernel split the kernel's tick sampling), and
# the load average before and after.  A benchmark, not a test; it loads
# one CPU while it runs.
#
#   bench/regmr_ab.sh BUILD_DIR OTHER_BUILD_DIR [ROUNDS [COUNT]]
#                     (defaults: 5 rounds, 20000 MRs)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
a=$(cd "$1" && pwd)
b=$(cd "$2" && pwd)
rounds=${3:-5}
count=${4:-20000}
for d in "$a" "$b"; do
	[ -e "$d/lib/libibverbs.so.1" ] || { echo "regmr_ab: no $d/lib/libibverbs.so.1" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/regmr" "$root/bench/regmr.c" -libverbs
cc -O2 -o "$tmp/floor" "$root/bench/regmr_floor.c" -lpthread
echo "# $(date -u +%FT%TZ) $(uname -r), load before $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# A: $a"
echo "# B: $b"
# one line per run: case who reg/s dereg/s user-us/pair cpu-us/pair
fields() {
	sed -E 's/.* reg ([0-9]+)\/s, dereg ([0-9]+)\/s; us per [a-zA-Z]+: reg user ([0-9.]+) sys ([0-9.]+), dereg user ([0-9.]+) sys ([0-9.]+).*/\1 \2 \3 \4 \5 \6/' <<<"$1" |
		awk '{ printf "%s %s %.2f %.2f\n", $1, $2, $3 + $5, $3 + $4 + $5 + $6 }'
}
for r in $(seq "$rounds"); do
	for size in 4096 8192 65536; do
		o=$(LD_LIBRARY_PATH=$a/lib timeout 120 "$tmp/regmr" "$count" "$size" 0)
		echo "$size A $(fields "$o")" >>"$tmp/runs"
		o=$(LD_LIBRARY_PATH=$b/lib timeout 120 "$tmp/regmr" "$count" "$size" 0)
		echo "$size B $(fields "$o")" >>"$tmp/runs"
		o=$(timeout 120 "$tmp/floor" "$count" "$size")
		echo "$size kernel $(fields "$o")" >>"$tmp/runs"
	done
done
echo "# load after $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
range() { sort -n | awk 'NR == 1 { lo = $1 } { hi = $1 } END { printf "%s-%s", lo, hi }'; }
echo "| size | who | reg/s | dereg/s | CPU us/pair | user us/pair | reg/s, all rounds |"
echo "|---|---|---|---|---|---|---|"
for size in 4096 8192 65536; do
	for who in A B kernel; do
		sel() { awk -v s="$size" -v w="$who" -v c="$1" '$1 == s && $2 == w { print $c }' "$tmp/runs"; }
		echo "| $size | $who | $(sel 3 | median) | $(sel 4 | median) | $(sel 6 | median) | $(sel 5 | median) | $(sel 3 | range) |"
	done
done
