#!/usr/bin/env bash
# mpdist bench-comm on 2 ranks (small sizes, few iterations): nccl-tests' tables, one per
# collective (all-reduce, reduce-scatter, all-gather), with a row per size and type for fp32,
# fp16 and bf16, no wrong elements, busbw = algbw * 2(n-1)/n (all-reduce) or (n-1)/n, the
# average lines, the same rows as CSV, --op choosing the collectives, --blocking with --skew
# (named in the header, the same rows, right results), -i (sizes plus a step) and -d (the dtypes
# named), --device cpu on the staged CPU backend (the device route), a line for a collective
# no size holds; bad options are one-line usage errors (exit 2).
source "$(dirname "$0")/common.bash"

mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 16K -f 4 -n 2 -w 1 -r 1 >"$TMP/table" 2>&1 ||
  { echo "FAIL: bench-comm exited $?"; cat "$TMP/table"; exit 1; }
for op in all-reduce reduce-scatter all-gather; do
  for type in float half bfloat16; do
    rows=$(awk -v o="$op" -v t=$type '/^# mpdist bench-comm: in-place/ { cur = $5; sub(/,$/, "", cur) } !/^#/ && cur == o && $3 == t' "$TMP/table" | wc -l)
    [ "$rows" = 3 ] || { echo "FAIL: $rows rows of $op $type (want 3)"; cat "$TMP/table"; failures=$((failures + 1)); }
  done
done
# columns: size count type redop time algbw busbw #wrong rawtype time algbw busbw ratio; on 2
# ranks busbw = algbw (all-reduce) or algbw / 2 (the other two), both printed to 0.01
awk '/^# mpdist bench-comm: in-place/ { f = $5 == "all-reduce" ? 1 : 0.5; raw = $0 }
     !/^#/ { if ($8 != 0) bad = bad "wrong elements: " $0 "\n";
             if ($1 != $2 * ($3 == "float" ? 4 : 2)) bad = bad "size != count * bytes: " $0 "\n";
             if ($7 < 0.995 * f * $6 - 0.005 || $7 > 1.005 * f * $6 + 0.005) bad = bad "busbw != algbw * factor: " $0 "\n";
             if ($4 != (f == 1 ? "sum" : (raw ~ /reduce-scatter/ ? "sum" : "none"))) bad = bad "redop: " $0 "\n" }
     END { printf "%s", bad; exit bad != "" }' "$TMP/table" || failures=$((failures + 1))
grep -q 'raw MPI_Reduce_scatter_block, same bytes' "$TMP/table" && grep -q 'raw MPI_Allgather, same bytes' "$TMP/table" ||
  { echo "FAIL: no raw MPI_Reduce_scatter_block and MPI_Allgather columns"; failures=$((failures + 1)); }
grep -q '^# Avg bus bandwidth, half, sizes >= 1 MiB' "$TMP/table" &&
  { echo "FAIL: an average over sizes >= 1 MiB with none measured"; failures=$((failures + 1)); }
mpirun -np 2 "$MPDIST" bench-comm -b 512K -e 1M -n 1 -w 0 -r 1 >"$TMP/big" 2>&1
for op in allreduce reduce_scatter all_gather; do
  grep -Eq "^# Avg bus bandwidth, $op, half, sizes >= 1 MiB: communicator [0-9.]+ GB/s, raw [0-9.]+ GB/s, ratio [0-9.]+\$" "$TMP/big" ||
    { echo "FAIL: no $op fp16 average line"; cat "$TMP/big"; failures=$((failures + 1)); }
done

mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 4K -n 1 -w 0 -r 1 --csv >"$TMP/csv" 2>&1
head -1 "$TMP/csv" | grep -q '^op,size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong,' ||
  { echo "FAIL: CSV header"; cat "$TMP/csv"; failures=$((failures + 1)); }
for op in allreduce,.*,sum reduce_scatter,.*,sum all_gather,.*,none; do
  [ "$(tail -n +2 "$TMP/csv" | grep -c "^$op,")" = 9 ] || { echo "FAIL: CSV rows of $op"; cat "$TMP/csv"; failures=$((failures + 1)); }
done
mpirun -np 3 "$MPDIST" bench-comm -b 1K -e 4K -n 1 -w 0 -r 1 --csv --op reduce_scatter,all_gather >"$TMP/csv3" 2>&1
[ "$(tail -n +2 "$TMP/csv3" | grep -c '^reduce_scatter,')" = 9 ] && [ "$(tail -n +2 "$TMP/csv3" | grep -c '^all_gather,')" = 9 ] &&
  ! grep -q '^allreduce,' "$TMP/csv3" && awk -F, 'NR > 1 && $9 != 0 { exit 1 }' "$TMP/csv3" ||
  { echo "FAIL: --op on 3 ranks"; cat "$TMP/csv3"; failures=$((failures + 1)); }

# -i: sizes plus a step (nccl-tests' -i), -d: only the dtypes named, in the sweep's order
mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 4K -i 1K -d bfloat16,float --op allreduce -n 1 -w 0 -r 1 --csv >"$TMP/step" 2>&1
[ "$(tail -n +2 "$TMP/step" | cut -d, -f2,4 | tr '\n' ' ')" = "1024,float 2048,float 3072,float 4096,float 1024,bfloat16 2048,bfloat16 3072,bfloat16 4096,bfloat16 " ] &&
  awk -F, 'NR > 1 && $9 != 0 { exit 1 }' "$TMP/step" ||
  { echo "FAIL: -i 1K -d bfloat16,float"; cat "$TMP/step"; failures=$((failures + 1)); }
# a step that is not a whole element: 4, 7, 10, 13, 16 bytes are 1, 1, 2, 3, 4 floats; no row twice
mpirun -np 2 "$MPDIST" bench-comm -b 4 -e 16 -i 3 -d float --op allreduce -n 1 -w 0 -r 1 --csv >"$TMP/step3" 2>&1
[ "$(tail -n +2 "$TMP/step3" | cut -d, -f2 | tr '\n' ' ')" = "4 8 12 16 " ] ||
  { echo "FAIL: -i 3 on floats"; cat "$TMP/step3"; failures=$((failures + 1)); }

mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 4K -n 3 -w 1 -r 1 --blocking --skew 500 --op allreduce >"$TMP/blocking" 2>&1 &&
  grep -q '^# mpdist bench-comm: in-place all-reduce (sum), 2 ranks on 1 host, transport mpi; 3 blocking iterations after 1 warm-up.*, the last rank computing 500 us first$' "$TMP/blocking" &&
  [ "$(grep -Ec '^ +[0-9]' "$TMP/blocking")" = 9 ] && awk '/^ +[0-9]/ && $8 != 0 { exit 1 }' "$TMP/blocking" ||
  { echo "FAIL: --blocking"; cat "$TMP/blocking"; failures=$((failures + 1)); }
# --device cpu with the staged CPU backend: the buffers are device-like memory, so the rows take
# the device route (the communicator's second MPI transport, as --device cuda takes NCCL), the
# checks copy through the host, and the raw rows stay MPI's; every collective and dtype, queued
# and blocking, with no wrong element.
for mode in "" --blocking; do
  MPDIST_CPU_STAGED=1 mpirun -np 2 "$MPDIST" bench-comm --device cpu -b 1K -e 16K -f 4 -n 2 -w 1 -r 2 $mode >"$TMP/dev" 2>&1 &&
    [ "$(grep -c '^# mpdist bench-comm: in-place .*, 2 ranks on 1 host, transport mpi on cpu-staged memory (device-like host memory); ' "$TMP/dev")" = 3 ] &&
    [ "$(grep -Ec '^ +[0-9]' "$TMP/dev")" = 27 ] && awk '/^ +[0-9]/ && $8 != 0 { exit 1 }' "$TMP/dev" ||
    { echo "FAIL: --device cpu (staged) $mode"; cat "$TMP/dev"; failures=$((failures + 1)); }
done
MPDIST_CPU_STAGED=1 mpirun -np 3 "$MPDIST" bench-comm --device cpu -b 1K -e 4K -n 1 -w 0 -r 1 --csv >"$TMP/dev3" 2>&1 &&
  [ "$(tail -n +2 "$TMP/dev3" | wc -l)" = 27 ] && awk -F, 'NR > 1 && $9 != 0 { exit 1 }' "$TMP/dev3" ||
  { echo "FAIL: --device cpu (staged) on 3 ranks"; cat "$TMP/dev3"; failures=$((failures + 1)); }
expect_exit 2 "bench-comm: --device takes cuda or cpu \(the backend whose memory the buffers are\), not 'gpu'" "$MPDIST" bench-comm --device gpu
expect_exit 2 "bench-comm: --share-gpu needs --device cuda" "$MPDIST" bench-comm --device cpu --share-gpu
if ! command -v nvidia-smi >/dev/null 2>&1; then # no GPU here: --device cuda says why, once
  expect_exit 2 "^mpdist: error: bench-comm --device cuda: (no CUDA device|this binary was built without CUDA)" mpirun -np 2 "$MPDIST" bench-comm --device cuda -e 4K
fi
expect_exit 2 "bench-comm: -b takes a size" mpirun -np 2 "$MPDIST" bench-comm -b 1Q
expect_exit 2 "bench-comm: -b \(8192\) is larger than -e \(1024\)" "$MPDIST" bench-comm -b 8K -e 1K
# Ranks started with other options (an MPMD launch): one line naming them, exit 2 (mismatched
# sweeps corrupted memory: MPI_ERR_TRUNCATE, then glibc's abort), and so is a bad option that
# only rank 1 was given (it printed nothing).
expect_exit 2 "bench-comm: rank 1 on [^ ]+ was given other options than rank 0 \(rank 1: -b 1024 -e 65536 .*; rank 0: -b 1024 -e 4096 " \
  mpirun -np 1 "$MPDIST" bench-comm -b 1K -e 4K -n 2 -w 1 -r 1 : -np 1 "$MPDIST" bench-comm -b 1K -e 64K -n 2 -w 1 -r 1
expect_exit 2 "bench-comm: -n takes an integer from 1 to 1000000, not '0'" \
  mpirun -np 1 "$MPDIST" bench-comm -e 4K : -np 1 "$MPDIST" bench-comm -e 4K -n 0
expect_exit 2 "bench-comm: unknown option '--fast'" "$MPDIST" bench-comm --fast
expect_exit 2 "bench-comm: -n takes an integer" "$MPDIST" bench-comm -n 0
expect_exit 2 "bench-comm: -e needs a value" "$MPDIST" bench-comm -e
expect_exit 2 "bench-comm: --skew needs --blocking" "$MPDIST" bench-comm --skew 100
expect_exit 2 "bench-comm: --skew takes an integer from 0 to 10000000, not '-5'" "$MPDIST" bench-comm --blocking --skew -5
expect_exit 2 "bench-comm: --blocking keeps every iteration's time: -n times -r \(2000000\) may be at most 1000000" "$MPDIST" bench-comm --blocking -n 1000000 -r 2
expect_exit 2 "bench-comm: --op takes allreduce, reduce_scatter, all_gather or all" "$MPDIST" bench-comm --op allreduce,bcast
expect_exit 2 "bench-comm: -d takes float, half, bfloat16 or all, comma-separated, not 'half,int8'" "$MPDIST" bench-comm -d half,int8
expect_exit 2 "bench-comm: give -f \(sizes times a factor\) or -i \(sizes plus a step\), not both" "$MPDIST" bench-comm -f 4 -i 1K
expect_exit 2 "bench-comm: -i 2 from -b 2 to -e 1048576 makes more than 1000 sizes" "$MPDIST" bench-comm -b 2 -e 1M -i 2
expect_exit 2 "bench-comm: -i takes a size" "$MPDIST" bench-comm -i 0
for list in , '' half,,float ,half; do
  expect_exit 2 "bench-comm: -d takes float, half, bfloat16 or all, comma-separated, not '$list'" "$MPDIST" bench-comm -d "$list"
done
expect_exit 2 "bench-comm: --op takes a list of at most 127 characters" "$MPDIST" bench-comm --op "$(printf 'allreduce,%.0s' {1..13})allreduce"
# Sizes the help allows but memory cannot hold: exit 3 with the numbers, before any allocation
# (issue 45: it aborted with SIGABRT allocating 64 GiB), on 1 rank and on 2.
big="bench-comm: -e 68719476736: the buffer and the collective's working copy, for each of the [12] rank\\(s\\) on this host needs 68719476736 x 2 x [12] = [0-9]+ bytes .*, more than the [0-9]+ bytes"
expect_exit 3 "$big" "$MPDIST" bench-comm -b 8G -e 64G -n 1 -w 0
expect_exit 3 "$big" mpirun -np 2 "$MPDIST" bench-comm -b 8G -e 64G -n 1 -w 0
# Sizes too small for a block on each rank: a line says so instead of an empty table.
mpirun -np 2 "$MPDIST" bench-comm -b 2 -e 3 -d float --op reduce_scatter -n 1 -w 0 >"$TMP/none" 2>&1
expect_ok "a table of no rows says why" \
  grep -q "^# reduce_scatter, float: no size from -b 2 to -e 3 holds an element for each rank" "$TMP/none"
finish
