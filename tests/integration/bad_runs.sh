#!/usr/bin/env bash
# Runs that go bad (issue 18, items 1 and 5):
# - SIGSEGV in one rank ends the whole job promptly with one line naming the rank (AddressSanitizer's
#   report in the sanitizer build, which keeps its own handler), no process left behind;
# - weights made inf by weight decay (O0, and O2's FP32 masters), or a test loss made NaN by the
#   normalisation, end with exit 5 naming the first bad parameter, never as "done";
# - a batch a layer refuses in training is a config error at set-up, said once.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set 'model.hidden=[3]' --set data.train_limit=256 --set data.test_limit=64
        --set log.progress=none --set train.max_steps=4)

# A fatal signal in one rank ends the job: one line, no rank left behind, no hang.
timeout 120 mpirun -np 2 "$MPDIST" "$CFG" --set data.train_limit=20000 --set train.epochs=50 \
  --set log.progress=none --set "log.metrics=\"$TMP/segv.jsonl\"" >"$TMP/segv.out" 2>&1 &
job=$!
for _ in $(seq 100); do
  [ -s "$TMP/segv.jsonl" ] && break
  sleep 0.2
done
ranks=$(pgrep -f -- "$MPDIST $CFG --set data.train_limit=20000" | sort -n)
victim=$(tail -1 <<<"$ranks")
start=$(date +%s)
kill -SEGV "$victim"
rc=0
wait "$job" || rc=$?
took=$(($(date +%s) - start))
left=$(pgrep -f -- "$MPDIST $CFG --set data.train_limit=20000" || true)
if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ -n "$left" ] || [ "$took" -gt 30 ] ||
   ! grep -Eq '^mpdist: error: rank [01] on .*: fatal signal SIGSEGV|AddressSanitizer: SEGV' "$TMP/segv.out"; then
  echo "FAIL: SIGSEGV to rank pid $victim: exit $rc after ${took}s, left: ${left:-none}"
  cat "$TMP/segv.out"
  failures=$((failures + 1))
else
  echo "ok: SIGSEGV in one rank ended the job in ${took}s with exit $rc, none left"
fi

# Weights or the test loss gone non-finite end with exit 5, never "done".
expect_exit 5 "diverged: parameter fc1.weight holds inf or NaN" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set optim.weight_decay=1e308 --set "log.metrics=\"$TMP/wd.jsonl\""
expect_exit 5 "diverged: parameter fc1.weight holds inf or NaN" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --set optim.weight_decay=1e30 --set "log.metrics=\"$TMP/wd2.jsonl\""
expect_exit 5 "diverged: the test loss after epoch 1 is -?nan with finite parameters" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set data.std=1e-30 --set "log.metrics=\"$TMP/mean.jsonl\""
# Inputs the input dtype cannot hold at all: said before any step (exit 3), not a divergence.
expect_exit 3 "data.mean and data.std take pixel value 0 of channel 0 to -[0-9.e+]+, beyond fp32's range" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set data.mean=1e300 --set "log.metrics=\"$TMP/mean2.jsonl\""
# --dry-run says it too (it passed such settings before 2026-12-03): the set-up's own check.
expect_exit 3 "data.mean and data.std take pixel value 0 of channel 0 to -inf, beyond fp16's range" \
  "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --set data.std=1e-320 --dry-run
# Batches a layer refuses in training are said at set-up, once for all ranks (exit 2), dry runs
# too; before 2026-12-03 each rank printed the layer's error in the step that reached the batch,
# then MPI_Abort. BatchNorm over the one value a channel that the last batch leaves (34 samples
# over 2 ranks in batches of 16), and attention dropout past the 2^32 counters of a step.
cat >"$TMP/bn_tail.cfg" <<'EOF'
data: { format = "synthetic"; synthetic_shape = [1, 1, 2]; synthetic_train = 34; synthetic_test = 32;
        batch_size = 16; loader_threads = 0; };
model: { layers = ({ type = "batchnorm"; }, { type = "flatten"; }, { type = "linear"; out = 10; }); };
train: { epochs = 1; max_steps = 0; };
log: { progress = "none"; };
EOF
expect_exit 2 "bn_tail.cfg: data.drop_last: the last batch of each epoch holds 1 of a rank.s 17 samples: layer layers.0: batchnorm in training needs more than one value per channel \(batch 1 of 1 x 1\); data.drop_last = true drops that batch" \
  mpirun -np 2 "$MPDIST" "$TMP/bn_tail.cfg"
expect_exit 2 "bn_tail.cfg: data.drop_last: the last batch" "$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=17 --dry-run
expect_ok "drop_last = true trains it" "$MPDIST" "$TMP/bn_tail.cfg" --set data.drop_last=true
expect_exit 2 "data.batch_size = 33: layer attn: attention dropout over a batch of 33 \(8 heads, 4096 tokens\) draws 4429185024 counters, more than the 2\^32 of a step" \
  "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" --set data.context=4096 --set data.batch_size=33 --set model.heads=8 \
  --set model.dim=16 --set model.depth=1 --set model.dropout=0.1 --dry-run
# A resumed epoch with another batch size is cut anew: 32 samples left at data.batch_size = 31
# end with a batch of 1, refused before the first step of the resumed run.
mkdir -p "$TMP/bn_ck"
expect_ok "2 steps of the BatchNorm model, saved" "$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=64 \
  --set train.max_steps=2 --set "checkpoint.dir=\"$TMP/bn_ck\"" --set checkpoint.every_steps=2
expect_exit 2 "the rest of the resumed epoch ends with a batch of 1 of a rank.s 32 samples \(data.batch_size = 31 on 1 rank\): layer layers.0: batchnorm" \
  "$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=64 --set data.batch_size=31 \
  --set "checkpoint.dir=\"$TMP/bn_ck\"" --resume auto
# With data.drop_last = true the same rest (32 samples at data.batch_size = 33) is dropped: the
# epoch ends there, evaluated, and the next epoch trains its one batch, step 3. Before
# 2026-12-03 the rest trained as a short batch, one step more (4 in all).
"$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=64 --set data.batch_size=33 \
  --set data.drop_last=true --set train.epochs=2 --set "checkpoint.dir=\"$TMP/bn_ck\"" \
  --set "log.metrics=\"$TMP/drop.jsonl\"" --resume auto >"$TMP/drop.out" 2>&1 || true
expect_ok "a resumed rest under a batch, dropped: 3 steps" grep -q "^done: 3 steps" "$TMP/drop.out"
expect_ok "the drop said" grep -q "^note: the rest of epoch 1 is 32 samples a rank, less than data.batch_size = 33: data.drop_last = true drops it" "$TMP/drop.out"
# In the last epoch (train.epochs = 1) the dropped rest still ends the run: evaluated, with its
# summary, no step taken (not "nothing to do").
mkdir -p "$TMP/bn_ck2"
"$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=64 --set train.max_steps=2 \
  --set "checkpoint.dir=\"$TMP/bn_ck2\"" --set checkpoint.every_steps=2 >/dev/null 2>&1
"$MPDIST" "$TMP/bn_tail.cfg" --set data.synthetic_train=64 --set data.batch_size=33 \
  --set data.drop_last=true --set "checkpoint.dir=\"$TMP/bn_ck2\"" \
  --set "log.metrics=\"$TMP/drop2.jsonl\"" --resume auto >"$TMP/drop2.out" 2>&1 || true
expect_ok "the last epoch's dropped rest ends the run: done, evaluated, summarised" \
  bash -c "grep -q '^done: 2 steps' '$TMP/drop2.out' && grep -q '\"type\":\"eval\",\"epoch\":0' '$TMP/drop2.jsonl' &&
           grep -q '\"type\":\"summary\"' '$TMP/drop2.jsonl'"
expect_ok "epoch 1 evaluated before step 3" \
  test "$(grep -o '"type":"[a-z]*"' "$TMP/drop.jsonl" | head -2 | tr -d '\n')" = '"type":"eval""type":"step"'
finish
