#!/usr/bin/env bash
# Bitwise resume of a byte-level GPT (issue 19) on the fortunes text: at O0 and O2 fp16, a
# 2-rank run with dropout (embeddings, attention probabilities, residual branches) stopped by
# the step budget in the middle of its second epoch (whose windows start at another offset
# than the first's) and resumed ends with the same parameters, optimizer, scaler, RNG and data
# position (h5diff, exact) and the same metrics, bits per byte included, as an uninterrupted
# run; the 2-rank checkpoint also resumes on 1 rank and trains on to the end.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fortunes-gpt.cfg
COMMON=(--set model.dim=32 --set model.depth=2 --set model.heads=2 --set data.context=32
        --set data.batch_size=8 --set data.train_limit=256 --set data.test_limit=32
        --set train.epochs=2 --set log.every=4 --set log.progress=plain)
source "$(dirname "$0")/resume.bash"

for level in O0 O2; do
  run full-$level 2 $level
  grep -q '"test_bpb"' "$TMP/full-$level.jsonl" || { echo "FAIL: no bits per byte in the metrics"; exit 1; }
  run budget-$level 2 $level --set train.step_budget=21
  grep -q "stopped at step 21 by train.step_budget" "$TMP/budget-$level.out" ||
    { echo "FAIL: no stop at 21"; cat "$TMP/budget-$level.out"; exit 1; }
  METRICS=budget-$level DIR=budget-$level run budget-$level-b 2 $level --resume auto
  grep -q "resumed from .*ckpt-00000021.h5: step 21" "$TMP/budget-$level-b.out" ||
    { echo "FAIL: not resumed at 21"; cat "$TMP/budget-$level-b.out"; exit 1; }
  same_state full-$level budget-$level
done
cp -r "$TMP/budget-O2" "$TMP/one"
rm "$(ckpt one)"
run one 1 O2 --resume auto
grep -q "^done: 43 steps" "$TMP/one.out" || { echo "FAIL: 1 rank: want 43 steps (21, then 176 windows of epoch 2 in batches of 8)"; cat "$TMP/one.out"; exit 1; }
echo "ok: the 2-rank checkpoint at step 21 resumed on 1 rank: $(grep '^done' "$TMP/one.out")"
echo "all checks passed"
