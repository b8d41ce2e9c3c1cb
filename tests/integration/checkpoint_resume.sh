#!/usr/bin/env bash
# Bitwise resume (issue 5): at O0 and O2, a 2-rank run stopped at step 300 (by the step budget,
# and by SIGTERM at whatever step it lands on) and resumed to step 600 ends with the same
# parameters, optimizer state, scaler state and RNG/data position (h5diff of the final
# checkpoints, exact) and the same metrics (every field but timings) as an uninterrupted run.
# 300 is in the middle of an epoch (79 steps per epoch). Also: a writer killed between datasets
# leaves the previous checkpoint and resume "auto" uses it; a corrupt newest checkpoint is
# reported and the one before it is used; resuming on 4 and on 1 rank trains on.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set data.train_limit=10000 --set data.test_limit=1000 --set train.epochs=8
        --set train.max_steps=600 --set log.every=10 --set log.progress=plain)

source "$(dirname "$0")/resume.bash"

for level in O0 O2; do
  run full-$level 2 $level
  # Stopped by the step budget at 300, resumed by "auto" to 600 (same metrics file, kept up to 300).
  run budget-$level 2 $level --set train.step_budget=300
  grep -q "stopped at step 300 by train.step_budget" "$TMP/budget-$level.out" || { echo "FAIL: no stop at 300"; cat "$TMP/budget-$level.out"; exit 1; }
  METRICS=budget-$level DIR=budget-$level run budget-$level-b 2 $level --resume auto
  grep -q "resumed from .*ckpt-00000300.h5: step 300" "$TMP/budget-$level-b.out" || { echo "FAIL: not resumed at 300"; exit 1; }
  same_state full-$level budget-$level
  # Stopped by SIGTERM to both ranks (as Slurm sends it) once step 100 is logged.
  timeout 300 mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=$level \
    --set "log.metrics=\"$TMP/term-$level.jsonl\"" --set "checkpoint.dir=\"$TMP/term-$level\"" >"$TMP/term.out" 2>&1 &
  pid=$!
  for _ in $(seq 600); do grep -qs '"step":[1-9][0-9][0-9],' "$TMP/term-$level.jsonl" && break; sleep 0.05; done
  pkill -TERM -P "$(pgrep -P $pid -x mpirun)" || true
  wait $pid || { echo "FAIL: SIGTERM run exited $?"; cat "$TMP/term.out"; exit 1; }
  stop=$(sed -nE 's/^stopped at step ([0-9]+) by SIGTERM.*/\1/p' "$TMP/term.out")
  [ -n "$stop" ] && [ "$stop" -lt 600 ] || { echo "FAIL: the run did not stop on SIGTERM"; cat "$TMP/term.out"; exit 1; }
  METRICS=term-$level DIR=term-$level run term-$level-b 2 $level --resume auto
  echo "ok: SIGTERM stopped $level at step $stop (step $((stop % 79)) of its epoch)"
  same_state full-$level term-$level
done

# cnn_bn at O2: BatchNorm running statistics (/buffers, rank 0's, which every rank evaluates with) and
# dropout masks (from (seed, step)) continue bitwise too; stopped at step 20 of 32 (16 a epoch).
CNN=(--set model.preset=cnn_bn --set data.train_limit=1024 --set data.batch_size=32
     --set train.epochs=2 --set train.max_steps=32 --set log.every=2)
run cnn-full 2 O2 "${CNN[@]}"
run cnn 2 O2 "${CNN[@]}" --set train.step_budget=20
METRICS=cnn DIR=cnn run cnn-b 2 O2 "${CNN[@]}" --resume auto
h5diff "$(ckpt cnn-full)" "$(ckpt cnn)" /buffers /buffers >/dev/null || { echo "FAIL: BatchNorm statistics differ"; exit 1; }
same_state cnn-full cnn

# A writer killed after 5 datasets of its second checkpoint: ckpt-100 stays whole, the torn file
# is only a temporary.
killed_save crash
METRICS=crash DIR=crash run crash-b 2 O2 --set checkpoint.every_steps=100 --resume auto
grep -q "resumed from .*ckpt-00000100.h5: step 100" "$TMP/crash-b.out" || { echo "FAIL: crash resume"; cat "$TMP/crash-b.out"; exit 1; }
same_state full-O2 crash
# The newest of ckpt-500/600 corrupted (a flipped byte in a parameter): auto says so and uses
# ckpt-500, and the run still ends bitwise equal.
newest=$TMP/crash/ckpt-00000600.h5
h5dump -d /params/fc1.weight -b LE -o "$TMP/raw.bin" "$newest" >/dev/null
pattern=$(od -An -tx1 -j 40000 -N 16 "$TMP/raw.bin" | tr -d ' \n' | sed 's/../\\x&/g')
offset=$(LC_ALL=C grep -obUaP "$pattern" "$newest" | head -1 | cut -d: -f1)
printf '\x5a' | dd of="$newest" bs=1 seek=$((offset + 5)) conv=notrunc status=none
rm "$TMP/crash/ckpt-00000400.h5"
METRICS=crash DIR=crash run crash-c 2 O2 --resume auto
grep -q "warning: .*ckpt-00000600.h5: dataset /params/fc1.weight is corrupt" "$TMP/crash-c.out" ||
  { echo "FAIL: the corrupt newest checkpoint was not reported"; cat "$TMP/crash-c.out"; exit 1; }
grep -q "resumed from .*ckpt-00000500.h5: step 500" "$TMP/crash-c.out" || { echo "FAIL: not resumed at 500"; exit 1; }
echo "ok: $(grep warning "$TMP/crash-c.out")"
same_state full-O2 crash

# Other rank counts: the 2-rank checkpoint at step 300 (epoch 3, 8064 samples into it) on 4
# ranks and on 1 rank, without a step limit: the rest of epoch 3 re-sharded (1936 samples: 8
# batches of 64 per rank on 4 ranks, 31 on 1), then epochs 4-7 of 40 or 157 steps.
acc() { sed -nE 's/^test accuracy: ([0-9.]+)$/\1/p' "$TMP/$1.out"; }
for np in 4 1; do
  cp -r "$TMP/budget-O2" "$TMP/ranks-$np"
  rm "$TMP/ranks-$np/ckpt-00000600.h5"
  run ranks-$np $np O2 --resume auto --set train.max_steps=0
  want=$([ $np = 4 ] && echo 468 || echo 959)
  grep -q "^done: $want steps" "$TMP/ranks-$np.out" || { echo "FAIL: $np ranks: want $want steps"; grep '^done' "$TMP/ranks-$np.out"; exit 1; }
  grep -q "note: the checkpoint was written with global batch 128 (2 ranks), this run has $((64 * np))" "$TMP/ranks-$np.out" ||
    { echo "FAIL: no note of the global batch change"; cat "$TMP/ranks-$np.out"; exit 1; }
  awk -v a="$(acc ranks-$np)" -v b="$(acc full-O2)" 'BEGIN { exit !(a > 0.8 && a > b - 0.02) }' ||
    { echo "FAIL: $np ranks reached accuracy $(acc ranks-$np), 2 ranks $(acc full-O2)"; exit 1; }
  echo "ok: resumed on $np rank(s): $(grep '^done' "$TMP/ranks-$np.out"), accuracy $(acc ranks-$np) (2 ranks: $(acc full-O2))"
done

# data.shuffle changed mid-epoch: the rest of the epoch comes in another order, said in a note
# (before 2026-12-03 nothing was said).
cp -r "$TMP/budget-O2" "$TMP/shuffle"
rm "$TMP/shuffle/ckpt-00000600.h5"
run shuffle 2 O2 --resume auto --set data.shuffle=false --set train.max_steps=301
grep -q "^note: the checkpoint was written with data.shuffle = true, this run has false: the rest of epoch 4 is taken in the new order" "$TMP/shuffle.out" ||
  { echo "FAIL: no note of the shuffle change"; cat "$TMP/shuffle.out"; exit 1; }
echo "ok: a resume with another data.shuffle mid-epoch says so"

# The schedule keeps its place in the epochs on another global batch: a step decay due at
# epoch 2 (512 samples: 4 steps an epoch on 2 ranks, 8 on 1), the 2-rank run stopped at step 5
# (epoch 1, one step into it) and resumed on 1 rank, whose rest of epoch 1 is 6 steps: the decay
# comes with step 12 (0-based 11), where epoch 2 starts. Before 2026-12-03 it came at the
# resumed run's own step 16 (17 in the metrics): 2 epochs of the new batch from step 0.
SCHED=(--set data.train_limit=512 --set train.max_steps=0 --set train.epochs=4
       --set schedule.type='"step"' --set schedule.step_epochs=2.0 --set schedule.gamma=0.1
       --set schedule.warmup_epochs=0.0 --set train.eval_every=0 --set log.every=1)
decay_step() { # the first step record of METRICS whose lr is below the first record's
  python3 - "$1" <<'P'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith('{"type":"step"')]
first = recs[0]["lr"]
print(next((r["step"] for r in recs if r["lr"] < first), "none"))
P
}
run sched-2 2 O0 "${SCHED[@]}" --set train.step_budget=5
cp -r "$TMP/sched-2" "$TMP/sched-cap" && cp "$TMP/sched-2.jsonl" "$TMP/sched-cap.jsonl"
run sched-2 1 O0 "${SCHED[@]}" --resume auto
decay=$(decay_step "$TMP/sched-2.jsonl")
[ "$decay" = 12 ] || { echo "FAIL: the decay due at epoch 2 came with step $decay, not 12"; exit 1; }
echo "ok: the step decay of epoch 2 came with step 12 after a resume from 2 ranks on 1"
# A run that train.max_steps ends (20, before the 27 its epochs give) counts its schedule in
# steps, as max_steps does: no offset, the decay at the run's step 16 (17 in the metrics).
run sched-cap 1 O0 "${SCHED[@]}" --set train.max_steps=20 --resume auto
decay=$(decay_step "$TMP/sched-cap.jsonl")
[ "$decay" = 17 ] || { echo "FAIL: with train.max_steps the decay came with step $decay, not 17"; exit 1; }
echo "ok: with train.max_steps ending the run, the schedule counts steps (decay with step 17)"
echo "all checks passed"
