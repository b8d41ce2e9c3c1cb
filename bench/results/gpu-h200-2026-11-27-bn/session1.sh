#!/usr/bin/env bash
# One device call: build + gpu tests + 1 epoch cnn_bn O2; the WRN-16-4 batch-512 O2 per-op
# profile with the new BatchNorm kernels and (rebuilt) with the old cuDNN file; then the step
# benchmark. Everything is bundled into $OUT/res.tgz after each stage.
set -u
res=/tmp/res; rm -rf "$res"; mkdir -p "$res"
pack() { tar czf "$OUT/res.tgz" -C /tmp res 2>/dev/null; }
prof="--set model.preset=wrn --set model.depth=16 --set model.widen=4 --set amp.opt_level=O2 --set data.batch_size=512 --set data.drop_last=true --set train.max_steps=60 --set train.eval_every=0 --set log.profile=true"
t0=$(date +%s)
OUT=$res/a MPDIST_GPU_TRAIN_ARGS="--set amp.opt_level=O2" bash tests/gpu/run.sh > "$res/a.txt" 2>&1; echo "a rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"
cp build-gpu/gpu-ctest.log "$res/" 2>/dev/null; pack
mkdir -p $res/p_new $res/p_old
OUT=$res/p_new MPDIST_GPU_TRAIN_ARGS="$prof" bash tests/gpu/run.sh > "$res/p_new.txt" 2>&1; echo "p_new rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"; pack
cp engine/backend_cuda/batchnorm.cu /tmp/new.cu; cp .gpu-old/batchnorm.cu engine/backend_cuda/batchnorm.cu
OUT=$res/p_old MPDIST_GPU_TRAIN_ARGS="$prof" bash tests/gpu/run.sh > "$res/p_old.txt" 2>&1; echo "p_old rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"; pack
cp /tmp/new.cu engine/backend_cuda/batchnorm.cu
OUT=$res/s MPDIST_GPU_TRAIN=0 MPDIST_GPU_STEP=1 MPDIST_GPU_STEP_STEPS=60 MPDIST_GPU_STEP_TIMEOUT=60 bash tests/gpu/run.sh > "$res/s.txt" 2>&1; echo "s rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"
cp -r runs/bench-gpu "$res/" 2>/dev/null; pack
tail -n 14 "$res/a.txt"; for p in p_new p_old; do echo "== $p"; grep -A8 "^profile (rank" "$res/$p/gpu-run.log"; grep "summary\|result:" "$res/$p/gpu-run.log"; done; cat runs/bench-gpu/goals.txt; cat "$res/times.txt"
