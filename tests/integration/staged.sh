#!/usr/bin/env bash
# The copy path a GPU takes, on the CPU: with MPDIST_CPU_STAGED=1 the CPU backend declares its
# memory not the host's, so batches and labels are copied in, initialisation, the broadcasts of
# parameters, BatchNorm statistics and optimizer state and checkpoint writes and reads go through
# host copies (engine/host_swap.h), and the gradient buckets and the step's agreement take the
# device path a GPU takes with NCCL (summed in place, ordered on the compute stream; a second MPI
# transport stands in for NCCL, comm/comm_device.c). A 2-rank cnn_bn run at O2 with
# FP32 gradients on the wire, stopped at step 30 and resumed to 60, must give bitwise the
# checkpoints and metrics of the same runs without staging (the staged run's metrics name its
# backend "cpu-staged"); so must a 30-step run at O3 with Adam and fp16 on the wire, and
# `mpdist eval` of the final checkpoint. Limits: the staged memory is host memory, so a host
# access that skips the copies still gives the right values here; only a GPU run shows those.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-cnn-bn.cfg
COMMON=(--set data.train_limit=3000 --set data.test_limit=500 --set train.max_steps=60
        --set log.every=5 --set log.progress=plain --set amp.opt_level=O2 --set comm.grad_dtype=\"fp32\")

run() { # run NAME [ARGS]: metrics to $TMP/NAME.jsonl, checkpoints in $TMP/NAME/
  local name=$1
  shift
  timeout 300 mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "log.metrics=\"$TMP/$name.jsonl\"" \
    --set "checkpoint.dir=\"$TMP/$name\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -20 "$TMP/$name.out"; exit 1; }
}
strip() { grep -v '"type":"checkpoint"' "$1" | sed -E 's/"(time_s|loader)":\{[^}]*\},?//g; s/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms|wall_s|peak_mem_bytes|device_peak_bytes|host_peak_bytes|mem)":[^,}]*,?//g; s/"(workspace|data)":[0-9]*,?//g; s/"backend":"cpu(-staged)?"//'; }
ckpt() { ls "$TMP/$1"/ckpt-*.h5 | tail -1; }

for mode in plain staged; do
  export MPDIST_CPU_STAGED=$([ $mode = staged ] && echo 1 || echo 0)
  run $mode --set train.step_budget=30
  grep -q "stopped at step 30" "$TMP/$mode.out" || { echo "FAIL: $mode: no stop at 30"; cat "$TMP/$mode.out"; exit 1; }
  run $mode --resume auto
  run $mode-adam --set amp.opt_level=O3 --set optim.name=\"adam\" --set optim.lr=0.001 \
    --set comm.grad_dtype=\"fp16\" --set train.max_steps=30
  timeout 300 mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" --checkpoint "$(ckpt $mode)" \
    >"$TMP/$mode.eval" 2>&1 || { echo "FAIL: eval $mode exited $?"; cat "$TMP/$mode.eval"; exit 1; }
done
unset MPDIST_CPU_STAGED
cmp <(grep -i accuracy "$TMP/plain.eval") <(grep -i accuracy "$TMP/staged.eval") ||
  { echo "FAIL: staged eval differs"; cat "$TMP/plain.eval" "$TMP/staged.eval"; exit 1; }
grep -qi accuracy "$TMP/staged.eval" || { echo "FAIL: eval printed no accuracy"; cat "$TMP/staged.eval"; exit 1; }
cmp <(strip "$TMP/plain-adam.jsonl") <(strip "$TMP/staged-adam.jsonl") ||
  { echo "FAIL: staged O3 Adam metrics differ"; diff <(strip "$TMP/plain-adam.jsonl") <(strip "$TMP/staged-adam.jsonl") | head; exit 1; }
h5diff "$(ckpt plain-adam)" "$(ckpt staged-adam)" /optim /optim >"$TMP/diff" 2>&1 ||
  { echo "FAIL: staged O3 Adam optimizer state differs:"; head "$TMP/diff"; exit 1; }
grep -q '"type":"eval"' "$TMP/staged.jsonl" || { echo "FAIL: no evaluation record"; exit 1; }
grep -q '"backend":"cpu-staged"' "$TMP/staged.jsonl" || { echo "FAIL: the staged run did not use the staged backend"; exit 1; }
for obj in /params /buffers /optim /scaler /rng /data; do
  h5diff "$(ckpt plain)" "$(ckpt staged)" "$obj" "$obj" >"$TMP/diff" 2>&1 ||
    { echo "FAIL: staged and plain checkpoints differ in $obj:"; head -20 "$TMP/diff"; exit 1; }
done
cmp <(strip "$TMP/plain.jsonl") <(strip "$TMP/staged.jsonl") ||
  { echo "FAIL: staged metrics differ"; diff <(strip "$TMP/plain.jsonl") <(strip "$TMP/staged.jsonl") | head; exit 1; }
echo "ok: staged copies give the plain run's checkpoint ($(basename "$(ckpt staged)")) and $(grep -c '"type":"step"' "$TMP/staged.jsonl") step records bitwise"
