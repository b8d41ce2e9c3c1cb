#!/usr/bin/env bash
# Same seed and rank count: two runs give bitwise identical metrics (every field but the
# timings), and a different seed gives different ones (so the comparison can fail).
source "$(dirname "$0")/common.bash"

run() { # run NAME SEED
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" \
    --set data.train_limit=6000 --set data.test_limit=1000 --set train.max_steps=150 \
    --set log.every=5 --set train.seed=$2 --set "log.metrics=\"$TMP/$1.jsonl\"" >"$TMP/$1.out" 2>&1 ||
    { echo "FAIL: run $1 exited $?"; cat "$TMP/$1.out"; exit 1; }
  # Drop the wall-clock fields; everything else must match to the last printed digit.
  sed -E 's/"(images_per_s|step_ms|comm_ms|wall_s)":[^,}]*,?//g' "$TMP/$1.jsonl" >"$TMP/$1.cmp"
}

run a 7
run b 7
run c 8
[ "$(grep -c '"type":"step"' "$TMP/a.cmp")" = 30 ] || { echo "FAIL: want 30 step records"; exit 1; }
grep -q '"loss":0\.[0-9]\{6,\}' "$TMP/a.cmp" || { echo "FAIL: losses lack full precision"; exit 1; }
cmp "$TMP/a.cmp" "$TMP/b.cmp" || { echo "FAIL: same seed, different metrics"; diff "$TMP/a.cmp" "$TMP/b.cmp" | head; exit 1; }
if cmp -s "$TMP/a.cmp" "$TMP/c.cmp"; then echo "FAIL: seeds 7 and 8 gave identical metrics"; exit 1; fi
echo "ok: identical metrics for the same seed ($(wc -l <"$TMP/a.cmp") records), different for another"
