#!/usr/bin/env bash
# Asynchronous checkpoints (issue 51): with checkpoint.async = true rank 0 copies the state into
# a host snapshot at the step boundary and a writer thread writes the file while training goes
# on. On 2 ranks at O2 (the MLP, SGD with momentum, 79 steps an epoch, a checkpoint every 100
# steps, gzip level 9 so that a write takes a while):
#   - the files at steps 100, 200 and 300 hold exactly what the synchronous saves hold;
#   - training steps ran while a save was in flight (the checkpoint records' steps_during_write;
#     the test hook MPDIST_TEST_CKPT_WAIT_STEPS=2 holds the writer until the main thread has
#     counted 2 steps or waits for it, so that a slow step, under ASan on a busy machine, cannot
#     outlast the write: a main thread that blocked on the writer still counts none);
#   - a run stopped by the step budget at 150 and resumed with --resume auto ends bitwise equal to
#     the uninterrupted synchronous run (parameters, optimizer, scaler, RNG, data position, and
#     the metrics but for timings and checkpoint records);
#   - a process killed (SIGKILL, from the writer thread) in the middle of writing its second
#     checkpoint leaves the first whole and loadable, and the run resumed from it ends bitwise
#     equal too.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set data.train_limit=10000 --set data.test_limit=1000 --set train.epochs=8
        --set train.max_steps=300 --set log.every=10 --set log.progress=plain
        --set checkpoint.every_steps=100 --set checkpoint.keep=10)
ASYNC=(--set checkpoint.async=true --set checkpoint.deflate=9)
source "$(dirname "$0")/resume.bash"

run sync 2 O2
MPDIST_TEST_CKPT_WAIT_STEPS=2 run async 2 O2 "${ASYNC[@]}"
for step in 100 200 300; do
  f=ckpt-$(printf %08d $step).h5
  for obj in /params /optim /scaler /rng /data; do
    h5diff "$TMP/sync/$f" "$TMP/async/$f" "$obj" "$obj" >"$TMP/diff" 2>&1 ||
      { echo "FAIL: the async $f differs from the synchronous one in $obj:"; head "$TMP/diff"; exit 1; }
  done
done
echo "ok: the async checkpoints at steps 100, 200 and 300 hold the synchronous saves' state"
records=$(grep -c '"type":"checkpoint","step":[0-9]*,"path":"[^"]*","bytes":[1-9][0-9]*,"async":true' "$TMP/async.jsonl" || true)
[ "$records" = 3 ] || { echo "FAIL: want 3 async checkpoint records, got $records:"; grep checkpoint "$TMP/async.jsonl"; exit 1; }
grep -q '"type":"checkpoint","step":100,.*"async":false' "$TMP/sync.jsonl" ||
  { echo "FAIL: no synchronous checkpoint record"; grep checkpoint "$TMP/sync.jsonl"; exit 1; }
during=$(sed -nE 's/.*"type":"checkpoint".*"steps_during_write":([0-9]+).*/\1/p' "$TMP/async.jsonl" | sort -n | tail -1)
[ "${during:-0}" -ge 2 ] || { echo "FAIL: no training step ran while a save was written:"; grep checkpoint "$TMP/async.jsonl"; exit 1; }
grep -q '^checkpoint: .*ckpt-00000100.h5 (.* MB in .* s in the background, [0-9]* steps meanwhile; the step stalled .* s)$' "$TMP/async.out" ||
  { echo "FAIL: no background checkpoint line"; grep checkpoint "$TMP/async.out"; exit 1; }
echo "ok: up to $during training steps ran while a save was in flight"
for r in sync async; do
  echo "  $r: stall per save (s): $(sed -nE 's/.*"type":"checkpoint".*"stall_s":([0-9.e-]+).*/\1/p' "$TMP/$r.jsonl" | tr '\n' ' ')"
done

# Stopped by the step budget at 150 (the save at 100 and the one at the stop, both in the
# background) and resumed.
run budget 2 O2 "${ASYNC[@]}" --set train.step_budget=150
METRICS=budget DIR=budget run budget-b 2 O2 "${ASYNC[@]}" --resume auto
grep -q "resumed from .*ckpt-00000150.h5: step 150" "$TMP/budget-b.out" || { echo "FAIL: not resumed at 150"; cat "$TMP/budget-b.out"; exit 1; }
same_state sync budget

# Killed by the writer thread after 5 datasets of its second checkpoint, while the main thread
# trains on.
killed_save crash "${ASYNC[@]}"
last=$(sed -nE 's/.*"type":"step","step":([0-9]+),.*/\1/p' "$TMP/crash.jsonl" | tail -1)
echo "ok: killed while writing ckpt-200 (the last step logged: $last)"
METRICS=crash DIR=crash run crash-b 2 O2 "${ASYNC[@]}" --resume auto
grep -q "resumed from .*ckpt-00000100.h5: step 100" "$TMP/crash-b.out" || { echo "FAIL: crash resume"; cat "$TMP/crash-b.out"; exit 1; }
same_state sync crash
