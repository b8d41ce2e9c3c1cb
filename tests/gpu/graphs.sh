#!/usr/bin/env bash
# The CUDA graphs stage of tests/gpu/run.sh (issue 48): the training step captured on the GPU
# (amp.cuda_graphs) against the same run without graphs, resnet20 on synthetic CIFAR-shaped
# data (32x32x3) on one rank, cosine learning rate (a new rate every step):
#   - correctness: O2 fp16 and O0, batch 128, 30 steps logged every 10: the graph run was
#     captured at step 3 and launched for every other step that logged nothing (the summary's
#     "graph" record), and its final checkpoint is bitwise the eager run's (h5diff of /params
#     /optim /scaler /buffers; both with amp.deterministic); the same for a WRN-10-2 with dropout
#     0.3 at O2, alone and with train.accum_steps = 2 (a graph per kind of micro-batch, 50
#     launches), and, where the
#     fortunes text is (MPDIST_GPU_GRAPH_TEXT, its directory), configs/fortunes-gpt.cfg with
#     dropout 0.1 at O2 with flash and with matrix attention (each launch's masks its own
#     step's: the kernels read the step index from the state)
#   - speed: O2 fp16 at batch 128 and 512, 300 steps logged every 100, eager and graphs
#     alternating, ROUNDS rounds each (default 3): images/s from each run's summary, the median
#     of each and their ratio (issue 48's goal: graphs >= 2x eager on resnet20 at batch 128)
# Usage: tests/gpu/graphs.sh BUILD OUT      (BUILD has mpdist; OUT gets the runs and
# graphs.txt, one line per check or row). MPDIST_GPU_GRAPH_ROUNDS sets ROUNDS,
# MPDIST_GPU_GRAPH_STEPS the speed runs' steps (default 300); MPDIST_GPU_GRAPH_SPEED=0 skips the
# speed rows; MPDIST_GPU_GRAPH_DEVICE=cpu (with
# MPDIST_CPU_STAGED=1) runs the checks on the staged CPU backend, the script's own test. Exits 1
# when a check failed. Needs a GPU (but for that test), h5diff and h5ls.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:?build directory} out=${2:?output directory}
cd "$(dirname "$0")/../.."
mpdist=$build/mpdist
rounds=${MPDIST_GPU_GRAPH_ROUNDS:-3} device=${MPDIST_GPU_GRAPH_DEVICE:-cuda}
speed=${MPDIST_GPU_GRAPH_SPEED:-1} steps=${MPDIST_GPU_GRAPH_STEPS:-300}
[[ $steps =~ ^[1-9][0-9]*$ ]] || { echo "graphs: MPDIST_GPU_GRAPH_STEPS must be a positive integer (got '$steps')" >&2; exit 2; }
[[ $device =~ ^(cuda|cpu)$ ]] || { echo "graphs: MPDIST_GPU_GRAPH_DEVICE must be cuda or cpu (got '$device')" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "graphs: MPDIST_GPU_GRAPH_ROUNDS must be a positive integer (got '$rounds')" >&2; exit 2; }
[ -x "$mpdist" ] || { echo "graphs: no mpdist in $build" >&2; exit 2; }
mkdir -p "$out"
report=$out/graphs.txt
source tests/gpu/checks.bash
common=(configs/cifar-wrn16-4.cfg --set 'model.preset="resnet20"' --set model.depth=20
  --set "amp.device=\"$device\"" --set 'data.format="synthetic"' --set data.synthetic_test=128
  --set 'data.synthetic_shape=[32,32,3]' --set 'schedule.type="cosine"' --set train.epochs=1
  --set train.eval_every=0 --set log.progress=plain)
# run NAME MODE [ARGS]: metrics to $out/NAME.jsonl, checkpoint at the end under $out/NAME/
run() {
  local name=$1 mode=$2
  shift 2
  rm -rf "${out:?}/$name" "$out/$name.jsonl"
  timeout "${MPDIST_GPU_RUN_TIMEOUT:-600}" "$mpdist" "${common[@]}" --set "amp.cuda_graphs=\"$mode\"" \
    --set "log.metrics=\"$out/$name.jsonl\"" --set "checkpoint.dir=\"$out/$name\"" "$@" \
    >"$out/$name.out" 2>&1
}
launches() { sed -nE 's/.*"graph":\{"captured_at":([0-9]+),"captures":([0-9]+),"launches":([0-9]+)\}.*/\1 \2 \3/p' "$out/$1.jsonl"; }
same_ckpt() { # same_ckpt A B: the final checkpoints hold the same training state
  local a b obj
  a=$(ls "$out/$1"/ckpt-*.h5 | tail -1) b=$(ls "$out/$2"/ckpt-*.h5 | tail -1)
  for obj in /params /optim /scaler /buffers; do
    # a model without BatchNorm has no /buffers: then neither file may
    if [ "$obj" = /buffers ] && ! h5ls "$a/buffers" >/dev/null 2>&1; then
      ! h5ls "$b/buffers" >/dev/null 2>&1 || return 1
      continue
    fi
    h5diff "$a" "$b" "$obj" "$obj" >"$out/diff.txt" 2>&1 || { head -5 "$out/diff.txt"; return 1; }
  done
}

# against LABEL NAME WANT ARGS...: graph-NAME ("on") and eager-NAME ("off") train with ARGS,
# the graph run's summary says WANT ("captured_at captures launches"), and its checkpoint is
# bitwise the eager run's. Both under amp.deterministic: O0's FP32 backward filter otherwise took
# cuDNN's ALGO_0, which sums with atomics (an H200, 2026-11-30), and no two runs need agree.
against() {
  local label=$1 name=$2 want=$3 got
  shift 3
  set -- "$@" --set amp.deterministic=true
  check "$label: the graph run trains" run "graph-$name" on "$@"
  check "$label: the eager run trains" run "eager-$name" off "$@"
  got=$(launches "graph-$name")
  check "$label: captured at step 3, captures and launches as expected (want '$want', got '${got:-none}')" \
    test "$got" = "$want"
  check "$label: the graph run's checkpoint is bitwise the eager run's" same_ckpt "graph-$name" "eager-$name"
}

for level in O2 O0; do
  against "$level" "$level" "3 1 25" --set "amp.opt_level=\"$level\"" --set data.batch_size=128 \
    --set data.synthetic_train=4096 --set train.max_steps=30 --set log.every=10
done
# dropout: each launch draws its own step's masks (the kernels read the step from the state)
args=(--set 'model.preset="wrn"' --set model.depth=10 --set model.widen=2 --set model.dropout=0.3
  --set 'amp.opt_level="O2"' --set data.batch_size=128 --set data.synthetic_train=4096
  --set train.max_steps=30 --set log.every=10)
against dropout drop "3 1 25" "${args[@]}"
# accumulation: a graph for the first and one for the last micro-batch, each its own masks
against accumulation acc "3 2 50" "${args[@]}" --set train.accum_steps=2 --set data.synthetic_train=8192
text=${MPDIST_GPU_GRAPH_TEXT:-}
if [ -n "$text" ] && [ -d "$text" ]; then
  image=("${common[@]}")
  common=(configs/fortunes-gpt.cfg --set "amp.device=\"$device\"" --set "data.path=\"$text\""
    --set 'schedule.type="cosine"' --set train.epochs=1 --set train.eval_every=0
    --set log.progress=plain)
  for attn in flash matrix; do
    against "gpt $attn" "gpt-$attn" "3 1 25" --set "model.attention=\"$attn\"" --set model.dropout=0.1 \
      --set 'amp.opt_level="O2"' --set data.train_limit=4096 --set data.test_limit=64 \
      --set train.max_steps=30 --set log.every=10
  done
  common=("${image[@]}")
else
  say "SKIP gpt with dropout: no fortunes text (MPDIST_GPU_GRAPH_TEXT='$text')"
fi

[ "$speed" = 0 ] && batches=() || batches=(128 512)
for batch in ${batches[@]+"${batches[@]}"}; do
  alternate "$out/speed-$batch.txt" "$rounds" "speed-$batch" off on \
    --set 'amp.opt_level="O2"' --set "data.batch_size=$batch" \
    --set "data.synthetic_train=$((batch * steps))" --set "train.max_steps=$steps" --set log.every=100
  eager=$(medians "$out/speed-$batch.txt" off) graph=$(medians "$out/speed-$batch.txt" on)
  say "$(awk -v b="$batch" -v r="$rounds" -v s="$steps" -v g="$graph" -v e="$eager" 'BEGIN {
    printf "resnet20 O2 fp16 batch %d, %d rounds of %d steps: eager %.0f images/s, graphs %.0f images/s (medians), graphs / eager %.2f", b, r, s, e, g, (e > 0 ? g / e : 0) }')"
done
exit $((failures > 0))
