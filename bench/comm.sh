#!/usr/bin/env bash
# The communicator's all-reduce, reduce-scatter and all-gather bandwidth beside the raw MPI
# calls on the same bytes, in one run (mpdist bench-comm): writes bench/results/comm.txt (the
# tables) and comm.csv, and checks the goal of issue 4: at sizes >= 1 MiB the fp16 all-reduce
# averages at least 90% of raw busbw.
# Usage: bench/comm.sh [RANKS] [bench-comm options]   (default 4 ranks, 1M..64M)
set -euo pipefail
source "$(dirname "$0")/common.bash"
np=4
if [[ ${1:-} =~ ^[0-9]+$ ]]; then np=$1; shift; fi
[[ $np =~ ^[1-9][0-9]{0,5}$ ]] || { echo "bench/comm.sh: RANKS must be a whole number from 1 to 999999 (got '${np:0:100}')" >&2; exit 2; }
source launch/env.sh
bench_build
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(-b 1M -e 64M -f 2 -n 10 -w 2 -r 5)
mkdir -p bench/results
mpirun -np "$np" "$build/mpdist" bench-comm "${opts[@]}" | tee bench/results/comm.txt.new ||
  { echo "bench/comm.sh: bench-comm failed; bench/results/comm.txt and comm.csv left as they were" >&2
    rm -f bench/results/comm.txt.new; exit 1; }
mv bench/results/comm.txt.new bench/results/comm.txt
awk 'BEGIN { print "op,size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong,raw_type,raw_time_us,raw_algbw_gbs,raw_busbw_gbs,busbw_ratio" }
     /^# mpdist bench-comm: in-place/ { op = $5; sub(/,$/, "", op); gsub(/-/, "_", op); sub(/all_reduce/, "allreduce", op) }
     !/^#/ { $1 = $1; gsub(/ /, ","); print op "," $0 }' bench/results/comm.txt >bench/results/comm.csv
ratio=$(sed -n 's/^# Avg bus bandwidth, allreduce, half, .*ratio \([0-9.]*\)$/\1/p' bench/results/comm.txt)
[ -n "$ratio" ] || { echo "no half all-reduce of 1 MiB or more in this run: the goal (>= 0.90 of raw busbw) is not checked"; exit 0; }
echo "fp16 communicator / raw MPI_Allreduce busbw at >= 1 MiB: $ratio (goal >= 0.90)"
awk -v r="$ratio" 'BEGIN { exit !(r >= 0.90) }'
