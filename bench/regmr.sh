#!/bin/bash
# bench/regmr.sh: memory registration rate (ibv_reg_mr / ibv_dereg_mr per
# second), small (4 KiB) and large (64 MiB) MRs, in a process with few
# mappings and with 20000 more; each figure beside the same figure with
# SOFTHCA_PROCMAP_QUERY=0 (the /proc/self/maps text walk that every
# registration did before issue 12, and still does on kernels before
# 6.11), measured in the same run.  Then the cost per GiB of registering
# one large MR, every page touched or none, with the pages re-backed by
# shared memory (issue 13, the default) and with SOFTHCA_MAP=0 (CMA: the
# range is only checked).  Then whole-page small MRs (4 KiB, 8 KiB,
# 64 KiB, each over its own pages, untouched and with every page written):
# registrations and deregistrations per second, mapped (the default),
# with SOFTHCA_MAP=0, and, given a second build directory (another
# checkout's build, for a before/after), with that build, all in the same
# run; beside the untouched rows, the kernel's share alone
# (bench/regmr_floor.c: the same system calls in a loop, no softhca), the
# most a registration in place can reach here.  A benchmark, not a test.
#
#   bench/regmr.sh [BUILD_DIR [OTHER_BUILD_DIR]]   (default: build; `make`
#                                                   first)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
[ -e "$build/lib/libibverbs.so.1" ] || { echo "regmr: build first (make)" >&2; exit 1; }
other=
if [ -n "${2:-}" ]; then
	other=$(cd "$2" && pwd)
	[ -e "$other/lib/libibverbs.so.1" ] || { echo "regmr: no $2/lib/libibverbs.so.1" >&2; exit 1; }
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/regmr" "$root/bench/regmr.c" -libverbs
cc -O2 -o "$tmp/floor" "$root/bench/regmr_floor.c" -lpthread
export LD_LIBRARY_PATH=$build/lib
echo "# $(date -u +%F) $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "| MRs | size | extra mappings | reg/s | reg/s, text walk | dereg/s |"
echo "|---|---|---|---|---|---|"
# the text walk reads every mapping per registration: fewer MRs for it
# when there are 20000 more (a rate is a rate)
rate() { sed -E "s/.* $1 ([0-9]+)\/s.*/\1/" <<<"$2"; }
for args in "20000 4096 0 20000" "20000 4096 20000 300" \
	    "2000 67108864 0 2000" "2000 67108864 20000 300"; do
	set -- $args
	q=$(timeout 120 "$tmp/regmr" "$1" "$2" "$3")
	t=$(SOFTHCA_PROCMAP_QUERY=0 timeout 120 "$tmp/regmr" "$4" "$2" "$3")
	echo "| $1 | $2 | $3 | $(rate reg "$q") | $(rate reg "$t") | $(rate dereg "$q") |"
done
echo
echo "| GiB | pages | reg ms/GiB | reg ms/GiB, SOFTHCA_MAP=0 | dereg ms/GiB | dereg ms/GiB, SOFTHCA_MAP=0 |"
echo "|---|---|---|---|---|---|"
ms() { sed -E "s/.* $1 ([0-9.]+) ms.*/\1/" <<<"$2"; }
for args in "1 1" "1 0" "64 0"; do
	set -- $args
	m=$(timeout 120 "$tmp/regmr" gib "$1" "$2")
	c=$(SOFTHCA_MAP=0 timeout 120 "$tmp/regmr" gib "$1" "$2")
	what=$([ "$2" = 1 ] && echo touched || echo untouched)
	echo "| $1 | $what | $(ms reg "$m") | $(ms reg "$c") | $(ms dereg "$m") | $(ms dereg "$c") |"
done
echo
# reg/s | dereg/s, or "> 120 s" for a run that did not finish
rd() {
	if [ -n "$1" ]; then
		sed -E "s/.* reg ([0-9]+)\/s, dereg ([0-9]+)\/s.*/\1 | \2/" <<<"$1"
	else
		echo "> 120 s | > 120 s"
	fi
}
[ -n "$other" ] && echo "# other: $other"
if [ -n "$other" ]; then
	echo "| size | pages | reg/s | dereg/s | reg/s, MAP=0 | dereg/s, MAP=0 | reg/s, other | dereg/s, other | reg/s, kernel only | dereg/s, kernel only |"
	echo "|---|---|---|---|---|---|---|---|---|---|"
else
	echo "| size | pages | reg/s | dereg/s | reg/s, MAP=0 | dereg/s, MAP=0 | reg/s, kernel only | dereg/s, kernel only |"
	echo "|---|---|---|---|---|---|---|---|"
fi
for size in 4096 8192 65536; do
	for t in 0 1; do
		m=$(timeout 120 "$tmp/regmr" 20000 "$size" 0 "$t") || m=
		c=$(SOFTHCA_MAP=0 timeout 120 "$tmp/regmr" 20000 "$size" 0 "$t") || c=
		what=$([ "$t" = 1 ] && echo touched || echo untouched)
		line="| $size | $what | $(rd "$m") | $(rd "$c")"
		if [ -n "$other" ]; then
			o=$(LD_LIBRARY_PATH=$other/lib timeout 120 "$tmp/regmr" 20000 "$size" 0 "$t") || o=
			line="$line | $(rd "$o")"
		fi
		if [ "$t" = 0 ]; then
			f=$(timeout 120 "$tmp/floor" 20000 "$size") || f=
			line="$line | $(rd "$f")"
		else
			line="$line | — | —"
		fi
		echo "$line |"
	done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"

