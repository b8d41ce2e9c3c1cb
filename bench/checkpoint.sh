#!/usr/bin/env bash
# Checkpoint write throughput beside the disk's own: trains the Fashion-MNIST MLP with big hidden
# layers (~20M params, ~160 MB checkpoints) on 2 ranks saving every 3 steps (checkpoint.keep=1),
# and after each run times `dd if=/dev/zero bs=4M conv=fdatasync` of the same size in the same
# directory, one dd per checkpoint write. The dd's keep files as the checkpoints do: each dd
# writes a new file while the one before it is still there and only then removes it, so both
# need the same new page-cache memory (on a VM, memory the guest has not used lately can make a
# write several times slower; a dd that first deletes its old file reuses that file's pages). Writes bench/results/checkpoint.txt (the table) and checkpoint.csv; the
# target is a median checkpoint/dd ratio >= 0.8 (prints "ok" or "below target"; exits 1 only
# when it is < 0.5 or something failed). The first write of each run is warm-up, not counted.
# Usage: bench/checkpoint.sh [--dir DIR] [--rounds N] [--hidden N] [--deflate LEVEL]
#   --dir DIR      scratch parent on the file system to measure (default: mktemp -d in ${TMPDIR:-/tmp})
#   --hidden N     MLP hidden width (default 4096: ~20M params, 160 MB; 2048: ~6M, 50 MB)
#   --rounds N     training runs without compression, each followed by its dd's (default 3)
#   --deflate L    one more run with checkpoint.deflate=L, reported apart (default 1; 0 = skip)
set -euo pipefail
source "$(dirname "$0")/common.bash"
source launch/env.sh
bench_build
parent=${TMPDIR:-/tmp} where="default, mktemp -d under \${TMPDIR:-/tmp}"
rounds=3 hidden=4096 deflate=1 np=${MPDIST_BENCH_RANKS:-2}
usage() { echo "usage: bench/checkpoint.sh [--dir DIR] [--rounds N] [--hidden N] [--deflate LEVEL]" >&2; exit 2; }
while [ $# -gt 0 ]; do
  case $1 in --dir | --rounds | --hidden | --deflate) [ $# -ge 2 ] || usage ;; esac
  case $1 in
    --dir) parent=$2 where="--dir $2"; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --hidden) hidden=$2; shift 2 ;;
    --deflate) deflate=$2; shift 2 ;;
    -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) usage ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ && $hidden =~ ^[1-9][0-9]*$ && $deflate =~ ^[0-9]$ ]] ||
  { echo "bench/checkpoint.sh: --rounds and --hidden are whole numbers >= 1, --deflate a level 0-9" >&2; exit 2; }
mkdir -p "$parent" bench/results
dir=$(mktemp -d "$parent/mpdist-ckpt.XXXXXX")
trap 'rm -rf "$dir"' EXIT
txt=bench/results/checkpoint.txt csv=bench/results/checkpoint.csv
echo "run,deflate,write,step,warmup,size_MB,ckpt_s,ckpt_MBps,dd_bytes,dd_s,dd_MBps,ratio" >"$csv"
now() { date +%s.%N; }
start=$(now) stamp=$(date "+%F %T %Z")

# One training run of 15 steps saving every EVERY steps into $dir/ckpt; then one dd per write.
measure() { # RUN DEFLATE EVERY
  local run=$1 level=$2 every=$3 log=$dir/train.log rc=0
  rm -rf "$dir/ckpt"
  mpirun -np "$np" "$build/mpdist" configs/fashion-mnist-mlp.cfg --set "model.hidden=[$hidden, $hidden]" \
    --set data.train_limit=2048 --set data.test_limit=256 --set train.max_steps=15 \
    --set checkpoint.every_steps="$every" --set checkpoint.keep=1 --set "checkpoint.dir=\"$dir/ckpt\"" \
    --set checkpoint.deflate="$level" --set log.progress=plain --set amp.opt_level=O2 \
    --set 'log.metrics=""' >"$log" 2>&1 || rc=$?
  if [ $rc != 0 ]; then cat "$log" >&2; echo "bench: training run $run failed (exit $rc)" >&2; exit 1; fi
  local w=0 step mb s blocks t0 t1
  # "checkpoint: DIR/ckpt-00000003.h5 (160.3 MB in 0.570 s, 281.1 MB/s)" -> step MB seconds
  while read -r step mb s; do
    w=$((w + 1))
    blocks=$(awk -v mb="$mb" 'BEGIN { b = int(mb * 1e6 / 4194304 + 0.5); print b < 1 ? 1 : b }')
    t0=$(now)
    dd if=/dev/zero of="$dir/dd.$w.bin" bs=4M count="$blocks" conv=fdatasync 2>/dev/null
    t1=$(now)
    rm -f "$dir/dd.$((w - 1)).bin"
    awk -v run="$run" -v l="$level" -v w="$w" -v step="$((10#$step))" -v mb="$mb" -v s="$s" \
      -v bytes="$((blocks * 4194304))" -v t0="$t0" -v t1="$t1" 'BEGIN {
        dds = t1 - t0; ck = mb / s; dd = bytes / 1e6 / dds
        printf "%s,%s,%d,%d,%d,%.1f,%.3f,%.1f,%d,%.3f,%.1f,%.3f\n", run, l, w, step, w == 1, mb, s, ck, bytes, dds, dd, ck / dd }' >>"$csv"
  done < <(sed -n 's/^checkpoint: .*ckpt-\([0-9]*\)\.h5 (\([0-9.]*\) MB in \([0-9.]*\) s, .*/\1 \2 \3/p' "$log")
  rm -f "$dir/dd.$w.bin"
  [ $w -gt 0 ] || { cat "$log" >&2; echo "bench: run $run printed no checkpoint line" >&2; exit 1; }
}
for r in $(seq 1 "$rounds"); do measure "$r" 0 3; done
if [ "$deflate" -gt 0 ]; then measure "$((rounds + 1))" "$deflate" 5; fi

{
  echo "# mpdist checkpoint write vs dd conv=fdatasync, $stamp, host $(hostname), $np ranks, MLP hidden [$hidden, $hidden], O2, SGD momentum"
  echo "# scratch: $dir ($where); filesystem: $(df -T "$dir" | tail -1 | tr -s ' ')"
  echo "# checkpoint size: $(awk -F, 'NR == 2 { print $6 " MB" }' "$csv") uncompressed; dd: same size rounded to 4 MiB blocks, timed with date around dd, a new file each time, the one before removed after it (as keep=1)"
  echo "# ckpt_s: gather + HDF5 write + fsync + rename + directory fsync (not the pruning after it), as mpdist prints it; * = warm-up (first write of a run), not counted"
  echo "#  write  step  size_MB  ckpt_s  ckpt_MB/s   dd_s  dd_MB/s  ratio"
  awk -F, 'NR > 1 {
      if ($1 != last) print ($2 == 0 ? "#  run " $1 ": no compression" : "#  run " $1 ": deflate=" $2 " (size_MB = compressed file; not in the median)")
      last = $1
      printf "   %-5s %5d %8.1f %7.3f %10.1f %6.3f %8.1f %6.2f\n", $3 ($5 ? "*" : ""), $4, $6, $7, $8, $10, $11, $12 }' "$csv"
} | tee "$txt"
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
col() { awk -F, -v c="$1" 'NR > 1 && $2 == 0 && !$5 { print $c }' "$csv" | median; } # counted rows
med=$(col 12) ckmed=$(col 8) ddmed=$(col 11)
[ -n "$med" ] || { echo "bench: no checkpoint write measured after warm-up" >&2; exit 1; }
verdict=$(awk -v m="$med" 'BEGIN { print (m >= 0.8 ? "ok" : "below target") }')
printf "median ratio: %.2f (target >= 0.8): %s   [median ckpt %.1f MB/s, dd %.1f MB/s; total %.0f s]\n" \
  "$med" "$verdict" "$ckmed" "$ddmed" "$(awk -v a="$start" -v b="$(now)" 'BEGIN { print b - a }')" | tee -a "$txt"
awk -v m="$med" 'BEGIN { exit !(m >= 0.5) }' || { echo "bench: median ratio below 0.5: severe regression (or a very fast disk)" >&2; exit 1; }
