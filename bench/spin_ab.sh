#!/bin/bash
# bench/spin_ab.sh: perftest 8 B cases on the net path over loopback
# (SOFTHCA_NET=1, softhca_lo), variants alternated inside each case and
# round (each round starting one variant later, so none always runs
# first) so that the machine's load falls on all of them alike: the figure
# perftest prints and the CPU time of every process's main thread and of
# its other threads (the engine thread), from bench/threadcpu.c preloaded.
# Written for SOFTHCA_NET_SPIN_US (issue 15, README "The net path").
# A benchmark, not a test; it loads both CPUs while it runs.
#
#   bench/spin_ab.sh ROUNDS LAT_ITERS BW_ITERS OUTDIR VARIANT...
#     VARIANT: "name|LIBDIR|VAR=VALUE VAR=VALUE" (LIBDIR holds
#     libibverbs.so.1; the variables go to both processes)
#   CASES: perftest programs (default "ib_write_lat ib_send_lat
#     ib_write_bw ib_send_bw"; NAME_e runs NAME -e, completion events);
#   PINS: "pinned unpinned" (default; pinned: server on CPU 0, client on
#     CPU 1, with taskset, every thread of each process on its CPU)
#
# One line per run, to stdout and OUTDIR/summary.txt:
#   rR CASE PIN NAME load L | typ T avg A p99 P | cpu main M other O
# (latency: perftest's t_typical, t_avg, 99% in us one-way; rates:
# "Mpps" MsgRate; cpu: seconds, server and client summed).  perftest's
# ports are 34990..34999; export SOFTHCA_PORT_BASE to keep softhca's own
# away from others'.
set -u
[ $# -ge 5 ] || { sed -n '2,25p' "$0"; exit 2; }
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=$1 itl=$2 itb=$3 out=$4; shift 4
mkdir -p "$out"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cc -O2 -shared -fPIC -o "$tmp/threadcpu.so" "$root/bench/threadcpu.c" || exit 1
cases=${CASES:-"ib_write_lat ib_send_lat ib_write_bw ib_send_bw"}
pins=${PINS:-"pinned unpinned"}
k=0
for r in $(seq 1 "$rounds"); do
 for c in $cases; do
  for p in $pins; do
   nv=$#; rot=( "$@" )
   for i in $(seq 0 $((nv - 1))); do
     v=${rot[$(( (i + r - 1) % nv ))]}
     IFS='|' read -r name lib envs <<<"$v"
     k=$((k+1)); port=$((34990 + k % 10))
     n=$itl; case $c in *_bw) n=$itb;; esac
     cmd=$c; extra=""; case $c in *_e) cmd=${c%_e}; extra="-e";; esac
     ts0=""; ts1=""
     if [ "$p" = pinned ]; then ts0="taskset -c 0"; ts1="taskset -c 1"; fi
     base="$out/r$r.$c.$p.$name"
     rm -f "$base".cpu
     load=$(cut -d' ' -f1 /proc/loadavg)
     # shellcheck disable=SC2086  # $envs, $ts0, $extra: words on purpose
     env LD_LIBRARY_PATH="$lib" SOFTHCA_NET=1 $envs \
       LD_PRELOAD="$tmp/threadcpu.so" THREADCPU_OUT="$base.cpu" \
       timeout 90 $ts0 "$cmd" $extra -d softhca_lo -s 8 -n "$n" -p $port -F >"$base.srv" 2>&1 &
     spid=$!
     sleep 0.7
     # shellcheck disable=SC2086
     env LD_LIBRARY_PATH="$lib" SOFTHCA_NET=1 $envs \
       LD_PRELOAD="$tmp/threadcpu.so" THREADCPU_OUT="$base.cpu" \
       timeout 90 $ts1 "$cmd" $extra -d softhca_lo -s 8 -n "$n" -p $port -F 127.0.0.1 >"$base.cli" 2>&1
     wait $spid
     case $c in
      *_lat|*_lat_e) fig=$(awk '$1=="8" && NF>=7 {print "typ", $5, "avg", $6, "p99", $8}' "$base.cli");;
      *) fig=$(awk '$1=="8" && NF>=5 {print "Mpps", $5}' "$base.cli");;
     esac
     cpu=$(awk '{t[$4]+=$5} END {printf "main %.2f other %.2f", t["main"], t["other"]}' "$base.cpu" 2>/dev/null)
     echo "r$r $c $p $name load $load | $fig | cpu $cpu" | tee -a "$out/summary.txt"
   done
  done
 done
done
