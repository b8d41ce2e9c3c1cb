#!/usr/bin/env bash
# Same seed and rank count: two runs give bitwise identical metrics (every field but the
# timings), at every opt level and half type, also with 0 or 3 loader threads, and a different seed gives different ones (so the
# comparison can fail).
source "$(dirname "$0")/common.bash"

run() { # run NAME SEED [MPDIST ARGS]
  local name=$1 seed=$2
  shift 2
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" "$@" \
    --set data.train_limit=6000 --set data.test_limit=1000 --set train.max_steps=150 \
    --set log.every=5 --set train.seed=$seed --set "log.metrics=\"$TMP/$name.jsonl\"" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; cat "$TMP/$name.out"; exit 1; }
  # Drop the wall-clock fields; everything else must match to the last printed digit.
  sed -E 's/"(time_s|loader)":\{[^}]*\},?//g; s/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms|wall_s)":[^,}]*,?//g' "$TMP/$name.jsonl" >"$TMP/$name.cmp"
}

run a 7
run b 7
run c 8
run d 7 --set data.loader_threads=0
run e 7 --set data.loader_threads=3 --set data.prefetch=1
for level in O1 O2 O3; do # every opt level: two runs, identical metrics
  run $level-x 7 --set amp.opt_level=$level
  run $level-y 7 --set amp.opt_level=$level
  cmp "$TMP/$level-x.cmp" "$TMP/$level-y.cmp" || { echo "FAIL: $level runs differ"; exit 1; }
  cmp -s "$TMP/a.cmp" "$TMP/$level-x.cmp" && { echo "FAIL: $level metrics equal O0's"; exit 1; }
done
run bf16-x 7 --set amp.opt_level=O2 --set amp.half=bf16
run bf16-y 7 --set amp.opt_level=O2 --set amp.half=bf16
cmp "$TMP/bf16-x.cmp" "$TMP/bf16-y.cmp" || { echo "FAIL: O2 bf16 runs differ"; exit 1; }
[ "$(grep -c '"type":"step"' "$TMP/a.cmp")" = 30 ] || { echo "FAIL: want 30 step records"; exit 1; }
grep -q '"loss":0\.[0-9]\{6,\}' "$TMP/a.cmp" || { echo "FAIL: losses lack full precision"; exit 1; }
cmp "$TMP/a.cmp" "$TMP/b.cmp" || { echo "FAIL: same seed, different metrics"; diff "$TMP/a.cmp" "$TMP/b.cmp" | head; exit 1; }
# Other loader settings hold other amounts of prefetched data: only those bytes may differ.
nomem() { sed -E 's/"(peak_mem_bytes|device_peak_bytes|host_peak_bytes|data)":[0-9]*,?//g' "$TMP/$1.cmp"; }
cmp <(nomem a) <(nomem d) || { echo "FAIL: 0 loader threads differ from 1"; exit 1; }
cmp <(nomem a) <(nomem e) || { echo "FAIL: 3 loader threads differ from 1"; exit 1; }
if cmp -s "$TMP/a.cmp" "$TMP/c.cmp"; then echo "FAIL: seeds 7 and 8 gave identical metrics"; exit 1; fi
echo "ok: identical metrics for the same seed ($(wc -l <"$TMP/a.cmp") records), different for another"
