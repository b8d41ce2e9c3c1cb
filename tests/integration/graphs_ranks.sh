#!/usr/bin/env bash
# The training step as a graph on several ranks (amp.cuda_graphs, issue 48): the gradients'
# collectives go into the graph (on a GPU NCCL's own nodes; on the staged CPU backend here,
# MPDIST_CPU_STAGED=1, a host call in the recorded graph that runs each over the second MPI
# transport where the graph holds it: comm/comm_device.h). On 2 ranks, with a cosine learning
# rate that changes at every step:
#   - the MLP at O2 fp16 (half gradients all-reduced, predivide by the world), with
#     comm.grad_dtype = "bf16" for FP32 gradients at O1 (a wire buffer converted in the graph);
#   - resnet20 at O0 with ZeRO-1 (reduce-scatter, the sharded norm's sum, the weights'
#     all-gather, all inside the graph);
#   - cnn_bn with dropout at O2 and train.accum_steps = 3 (the first and middle micro-batches'
#     graphs hold no collective, the last one's every bucket);
# each run with "on" captures step 3 on every rank and launches its graphs for every step that
# logs nothing, and ends with a checkpoint and metrics (timings aside) bitwise those of the same
# run with "off". A graph whose collectives ran at the capture instead of at each launch, or
# with the buffers or scales of the capture's step, would differ.
# labels: integration mpi
source "$(dirname "$0")/common.bash"
source "$(dirname "$0")/resume.bash"
export MPDIST_CPU_STAGED=1

LAUNCH=(mpirun -np 2) # graphs (resume.bash) on 2 ranks

# pair NAME LAUNCHES KINDS CFG [ARGS]: NAME-on launched its KINDS graphs LAUNCHES times in all,
# captured at step 3, and ended bitwise where NAME-off (eager) did.
pair() {
  local name=$1 want=$2 kinds=$3 cfg=$4 launches
  shift 4
  graphs "$name-on" on "$cfg" "$@"
  graphs "$name-off" off "$cfg" "$@"
  launches=$(sed -nE "s/.*\"graph\":\\{\"captured_at\":3,\"captures\":$kinds,\"launches\":([0-9]+)\\}.*/\\1/p" "$TMP/$name-on.jsonl")
  [ "${launches:-0}" = "$want" ] ||
    { echo "FAIL: $name-on launched its graphs ${launches:-0} times (want $want, $kinds captured at step 3)"; grep summary "$TMP/$name-on.jsonl"; exit 1; }
  grep -q '^graph: step 3 captured' "$TMP/$name-on.out" ||
    { echo "FAIL: no capture line"; cat "$TMP/$name-on.out"; exit 1; }
  grep -q '^comm: .*the device path, on a second MPI transport' "$TMP/$name-on.out" ||
    { echo "FAIL: $name-on did not take the device path"; cat "$TMP/$name-on.out"; exit 1; }
  ! grep -q '"graph"' "$TMP/$name-off.jsonl" || { echo "FAIL: the eager run launched a graph"; exit 1; }
  same_state "$name-off" "$name-on"
}

MLP=$SRC/configs/fashion-mnist-mlp.cfg
COMMON_MLP=(--set data.train_limit=2048 --set data.test_limit=256 --set train.max_steps=16
  --set log.every=10 --set 'schedule.type="cosine"' --set train.epochs=1)
pair mlp 12 1 "$MLP" "${COMMON_MLP[@]}" --set amp.opt_level=O2 # 16 steps: 10 and 16 logged, 2 warm-up
pair mlp-wire 12 1 "$MLP" "${COMMON_MLP[@]}" --set amp.opt_level=O1 --set 'comm.grad_dtype="bf16"'

WRN=$SRC/configs/cifar-wrn16-4.cfg
pair rn-zero 8 1 "$WRN" --set 'model.preset="resnet20"' --set model.depth=20 \
  --set 'data.format="synthetic"' --set data.synthetic_train=768 --set data.synthetic_test=32 \
  --set 'data.synthetic_shape=[16,16,3]' --set data.batch_size=32 --set train.max_steps=12 \
  --set log.every=6 --set train.epochs=1 --set 'schedule.type="cosine"' --set amp.opt_level=O0 \
  --set train.eval_every=0 --set optim.zero=1

# cnn_bn: 1536 images, global batch 128 = 12 micro-batches, 4 steps of 3 an epoch, over 3 epochs;
# each epoch's last step ends at a host point (eager), and so do the logged 5 and 10: steps 3-12
# but 4, 5, 8, 10 and 12 launch (5 steps of 3 launches)
CNN=$SRC/configs/fashion-mnist-cnn-bn.cfg
pair cnn-acc 15 3 "$CNN" --set data.train_limit=1536 --set data.test_limit=128 \
  --set train.max_steps=12 --set log.every=5 --set train.epochs=3 --set 'schedule.type="cosine"' \
  --set amp.opt_level=O2 --set train.accum_steps=3
exit "$failures"
