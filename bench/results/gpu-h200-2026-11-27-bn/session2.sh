#!/usr/bin/env bash
# Second call: build, gpu tests, 1 epoch cnn_bn O2, the opt-level table (issue 6's accuracy
# check); then the resnet20 batch-128 O2 per-op profile. Bundled into $OUT/res2.tgz.
set -u
res=/tmp/res2; rm -rf "$res"; mkdir -p "$res"
pack() { tar czf "$OUT/res2.tgz" -C /tmp res2 2>/dev/null; }
t0=$(date +%s)
OUT=$res/t MPDIST_GPU_TABLE=1 MPDIST_GPU_TRAIN_ARGS="--set amp.opt_level=O2" bash tests/gpu/run.sh > "$res/t.txt" 2>&1; echo "t rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"
cp build-gpu/gpu-ctest.log "$res/" 2>/dev/null; cp -r runs/bench-opt "$res/" 2>/dev/null; pack
prof="--set model.preset=resnet20 --set amp.opt_level=O2 --set data.batch_size=128 --set data.drop_last=true --set train.max_steps=100 --set train.eval_every=0 --set log.profile=true"
OUT=$res/p MPDIST_GPU_CTEST_TIMEOUT=1 MPDIST_GPU_TRAIN_ARGS="$prof" bash tests/gpu/run.sh > "$res/p.txt" 2>&1; echo "p rc $? $(( $(date +%s) - t0 )) s" | tee -a "$res/times.txt"; pack
tail -n 14 "$res/t.txt"; grep -A14 "^profile (rank" "$res/p/gpu-run.log"; cat "$res/times.txt"
