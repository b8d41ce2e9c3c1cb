#!/usr/bin/env bash
# mpdist bench-comm on 2 ranks (small sizes, few iterations): nccl-tests' table with a row per
# size and type for fp32, fp16 and bf16, no wrong elements, busbw = algbw * 2(n-1)/n, the
# average lines, the same rows as CSV; bad options are one-line usage errors (exit 2).
source "$(dirname "$0")/common.bash"

mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 16K -f 4 -n 2 -w 1 -r 1 >"$TMP/table" 2>&1 ||
  { echo "FAIL: bench-comm exited $?"; cat "$TMP/table"; exit 1; }
for type in float half bfloat16; do
  rows=$(awk -v t=$type '!/^#/ && $3 == t' "$TMP/table" | wc -l)
  [ "$rows" = 3 ] || { echo "FAIL: $rows rows of $type (want 3)"; cat "$TMP/table"; failures=$((failures + 1)); }
done
# columns: size count type redop time algbw busbw #wrong rawtype time algbw busbw ratio
awk '!/^#/ { if ($8 != 0) bad = bad "wrong elements: " $0 "\n";
             if ($1 != $2 * ($3 == "float" ? 4 : 2)) bad = bad "size != count * bytes: " $0 "\n";
             if ($7 < 0.995 * $6 || $7 > 1.005 * $6) bad = bad "busbw != algbw * 2(n-1)/n: " $0 "\n" }
     END { printf "%s", bad; exit bad != "" }' "$TMP/table" || failures=$((failures + 1))
grep -q '^# Avg bus bandwidth, half, sizes >= 1 MiB' "$TMP/table" &&
  { echo "FAIL: an average over sizes >= 1 MiB with none measured"; failures=$((failures + 1)); }
mpirun -np 2 "$MPDIST" bench-comm -b 512K -e 1M -n 1 -w 0 -r 1 >"$TMP/big" 2>&1
grep -Eq '^# Avg bus bandwidth, half, sizes >= 1 MiB: communicator [0-9.]+ GB/s, raw [0-9.]+ GB/s, ratio [0-9.]+$' "$TMP/big" ||
  { echo "FAIL: no fp16 average line"; cat "$TMP/big"; failures=$((failures + 1)); }

mpirun -np 2 "$MPDIST" bench-comm -b 1K -e 4K -n 1 -w 0 -r 1 --csv >"$TMP/csv" 2>&1
head -1 "$TMP/csv" | grep -q '^size_bytes,count,type,redop,time_us,algbw_gbs,busbw_gbs,wrong,' ||
  { echo "FAIL: CSV header"; cat "$TMP/csv"; failures=$((failures + 1)); }
[ "$(tail -n +2 "$TMP/csv" | grep -c ',sum,')" = 9 ] || { echo "FAIL: CSV rows"; cat "$TMP/csv"; failures=$((failures + 1)); }

expect_exit 2 "bench-comm: -b takes a size" mpirun -np 2 "$MPDIST" bench-comm -b 1Q
expect_exit 2 "bench-comm: -b \(8192\) is larger than -e \(1024\)" "$MPDIST" bench-comm -b 8K -e 1K
expect_exit 2 "bench-comm: unknown option '--fast'" "$MPDIST" bench-comm --fast
expect_exit 2 "bench-comm: -n takes an integer" "$MPDIST" bench-comm -n 0
expect_exit 2 "bench-comm: -e needs a value" "$MPDIST" bench-comm -e
finish
