#!/usr/bin/env bash
# The training step as a graph (amp.cuda_graphs, issue 48) on the staged CPU backend
# (MPDIST_CPU_STAGED=1), which records a capture and replays it as CUDA does (what a capture
# holds is fixed at the capture: a value the host changes afterwards and passes by value is not
# seen by a launch). For the MLP on Fashion-MNIST (O2 fp16, dynamic loss scale), resnet20 on
# synthetic CIFAR-shaped data (O0), cnn_bn with its dropout layer (O2) and a small gpt with
# dropout on the embeddings, the attention probabilities (flash and matrix) and the residual
# branches (O2), with a cosine learning rate that changes at every step:
#   - a run with amp.cuda_graphs = "on" captures its third step and launches the graph for every
#     step that logs nothing (the summary's "graph" record, the progress line);
#   - its checkpoint (parameters, optimizer state, scaler, RNG, data position) and its metrics
#     but for timings are bitwise those of the same run with "off" (the dropout masks of a launch
#     are those of its own step: the index the ops read from the state);
#   - with train.accum_steps = 2 (the MLP) and 3 (cnn_bn over two epochs, each ending with a
#     step of 2), each kind of micro-batch (first, middle, last) is a graph of its own,
#     bitwise the eager run as above;
#   - "on" where the step cannot be captured is refused with exit 2 naming why (the plain CPU
#     backend).
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/resume.bash"
export MPDIST_CPU_STAGED=1


# compare A B LAUNCHES [CAPTURES]: A launched its graphs (CAPTURES of them, default 1: one per
# kind of micro-batch) for all but the warm-up and logged steps, and ended bitwise where B
# (eager) did.
compare() {
  local a=$1 b=$2 want=$3 kinds=${4:-1} launches
  launches=$(sed -nE "s/.*\"graph\":\\{\"captured_at\":3,\"captures\":$kinds,\"launches\":([0-9]+)\\}.*/\\1/p" "$TMP/$a.jsonl")
  [ "${launches:-0}" = "$want" ] ||
    { echo "FAIL: $a launched its graphs ${launches:-0} times (want $want, $kinds captured at step 3)"; grep summary "$TMP/$a.jsonl"; exit 1; }
  grep -q '^graph: step 3 captured' "$TMP/$a.out" || { echo "FAIL: no capture line"; cat "$TMP/$a.out"; exit 1; }
  ! grep -q '"graph"' "$TMP/$b.jsonl" || { echo "FAIL: the eager run $b launched a graph"; exit 1; }
  same_state "$b" "$a"
}

MLP=$SRC/configs/fashion-mnist-mlp.cfg
COMMON_MLP=(--set data.train_limit=2048 --set data.test_limit=256 --set train.max_steps=30
  --set log.every=10 --set 'schedule.type="cosine"' --set amp.opt_level=O2 --set train.epochs=1)
graphs mlp-on on "$MLP" "${COMMON_MLP[@]}"
graphs mlp-off off "$MLP" "${COMMON_MLP[@]}"
compare mlp-on mlp-off 25 # 30 steps: 3 logged, 2 warm-up

WRN=$SRC/configs/cifar-wrn16-4.cfg
COMMON_RN=(--set 'model.preset="resnet20"' --set model.depth=20 --set 'data.format="synthetic"'
  --set data.synthetic_train=192 --set data.synthetic_test=32 --set 'data.synthetic_shape=[16,16,3]'
  --set data.batch_size=16 --set train.max_steps=12 --set log.every=6 --set train.epochs=1
  --set 'schedule.type="cosine"' --set amp.opt_level=O0 --set train.eval_every=0)
graphs rn-on on "$WRN" "${COMMON_RN[@]}"
graphs rn-off off "$WRN" "${COMMON_RN[@]}"
compare rn-on rn-off 8 # 12 steps: 2 logged, 2 warm-up

# Dropout: each launch draws its own step's masks.
CNN=$SRC/configs/fashion-mnist-cnn-bn.cfg
COMMON_CNN=(--set data.train_limit=1024 --set data.test_limit=128 --set train.max_steps=12
  --set log.every=6 --set train.epochs=1 --set 'schedule.type="cosine"' --set amp.opt_level=O2)
graphs cnn-on on "$CNN" "${COMMON_CNN[@]}"
graphs cnn-off off "$CNN" "${COMMON_CNN[@]}"
compare cnn-on cnn-off 8 # 12 steps: 2 logged, 2 warm-up
GPT=$SRC/configs/fortunes-gpt.cfg
COMMON_GPT=(--set model.dim=32 --set model.depth=2 --set model.heads=2 --set data.context=32
  --set data.batch_size=8 --set data.train_limit=256 --set data.test_limit=32 --set train.epochs=1
  --set train.max_steps=12 --set log.every=6 --set 'schedule.type="cosine"' --set amp.opt_level=O2
  --set model.dropout=0.2)
for attn in flash matrix; do
  graphs "gpt-$attn-on" on "$GPT" "${COMMON_GPT[@]}" --set "model.attention=\"$attn\""
  graphs "gpt-$attn-off" off "$GPT" "${COMMON_GPT[@]}" --set "model.attention=\"$attn\""
  compare "gpt-$attn-on" "gpt-$attn-off" 8
done

# Gradient accumulation: a graph for the first and one for the last micro-batch of a step (and
# one for the middle ones with 3), each micro-batch's masks its own.
ACC=(--set train.max_steps=12 --set log.every=6)
graphs mlp-acc-on on "$MLP" "${COMMON_MLP[@]}" "${ACC[@]}" --set train.accum_steps=2
graphs mlp-acc-off off "$MLP" "${COMMON_MLP[@]}" "${ACC[@]}" --set train.accum_steps=2
compare mlp-acc-on mlp-acc-off 16 2 # 12 steps: 2 logged, 2 warm-up; 2 micro-batches each
# cnn_bn: 41 batches an epoch, so each epoch ends with a step of 2 micro-batches (at the
# epoch's end, a host point: eager); steps 3-28 but the logged 5, 10, ..., 25 and those two:
# 19 steps of 3 launches
CNN_ACC=(--set data.train_limit=2624 --set train.max_steps=28 --set log.every=5 --set train.epochs=2
  --set train.accum_steps=3)
graphs cnn-acc-on on "$CNN" "${COMMON_CNN[@]}" "${CNN_ACC[@]}"
graphs cnn-acc-off off "$CNN" "${COMMON_CNN[@]}" "${CNN_ACC[@]}"
compare cnn-acc-on cnn-acc-off 57 3

# Where the step cannot be captured: "on" is refused.
expect_exit 2 '--set amp.cuda_graphs: "on", but this run cannot capture its step: the plain CPU backend' \
  env -u MPDIST_CPU_STAGED "$MPDIST" "$MLP" "${COMMON_MLP[@]}" --set 'amp.cuda_graphs="on"'
exit "$failures"
