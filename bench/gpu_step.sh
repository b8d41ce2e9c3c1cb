#!/usr/bin/env bash
# The one-GPU step benchmark (issues 7, 44, 48, 49): mpdist's training step at each opt level
# against PyTorch's, for WRN-16-4 and resnet20 on synthetic 32x32x3 data (10 classes) at batch 128
# and 512, and for the transformers (gpt: configs/fortunes-gpt.cfg at batch 32; gpt2-small:
# configs/gpt2-small.cfg at batch 8, context 1024; on the fortunes text, model.attention "auto"),
# in ROUNDS rounds that alternate mpdist and PyTorch (even rounds in reverse order), so that a
# change can be told from the machine's noise.
#
# What is measured, and how:
#   mpdist   mpirun -np 1 --bind-to none (PyTorch's process is not bound either; mpirun would
#            bind one rank to one core, its loader's threads with it) $build/mpdist
#            configs/cifar-wrn16-4.cfg (resnet20: --set
#            model.preset=resnet20 model.depth=20) with amp.device=cuda, train.max_steps=STEPS,
#            train.eval_every=0 and a step record every EVERY steps, for the rows O0 (FP32,
#            amp.allow_tf32=false), O0+TF32, O1 fp16, O2 fp16, O2 bf16 and O3 fp16, with
#            amp.conv_algo=timed (cuDNN's algorithms timed per shape, as PyTorch's
#            cudnn.benchmark; MPDIST_GPU_STEP_CONV_ALGO=heuristic for cuDNN's first listed). The
#            first window (warm-up: the algorithms' trials, first allocations) is dropped; the run's
#            images/s is the images over the time of the other windows (host wall time), step_ms
#            and device_ms (device time from clock marks, CUDA events at the windows' ends) their
#            mean. Device memory is the summary's device_peak_bytes (the engine's counters of
#            what its backend allocated on the device: weights, masters, gradients, optimizer
#            state, activations, workspaces) and device_used_peak_bytes (cudaMemGetInfo's total -
#            free at its highest); host memory its host_peak_bytes (the dataset, pinned loader
#            slots); input wait (the loader's own, not a wait for the GPU to free a slot), the
#            loader's mean time to build a batch on one thread (loader_fill_ms; an input wait
#            near it every step is the ring of slots pacing a host that runs ahead of the GPU)
#            and skipped steps come from the summary too.
#   PyTorch  bench/pytorch_ref.py, same model, batch and input shape, as its users run it:
#            fp32 (TF32 off, NCHW), amp (fp16 autocast, GradScaler, channels_last), amp-bf16
#            (bf16 autocast) and amp-compile (amp with torch.compile; where it does not work, the
#            row says why), all with cudnn.benchmark and fused SGD (gpt: fused AdamW, clipping,
#            scaled_dot_product_attention, random bytes for input): EVERY warm-up steps, then
#            STEPS - EVERY timed steps, host time between synchronizes and device time between
#            CUDA events; device memory torch.cuda.max_memory_allocated() (device allocations
#            only, as mpdist's device_peak_bytes) and mem_get_info's total - free at its highest;
#            it also counts the training FLOPs per image.
#   Derived  bench/gpu_step_report.py: per row the median over the rounds and the range; the
#            ratios to PyTorch (O0 rows against fp32, O1-O3 against the faster of amp and
#            amp-compile) and to mpdist O0 as the median of the rounds' side-by-side ratios;
#            TFLOP/s from PyTorch's FLOPs per image; and the goals of issues 7 and 48 on the
#            medians and on device memory (bench/gpu_step_report.py --help).
# Writes runs/bench-gpu/table.txt, table.csv (first line: GPU, driver, date, commit, steps),
# goals.txt, raw.csv (every run) and each run's log, metrics (.jsonl) and PyTorch JSON line.
# Exits 1 when a run failed or a goal was missed (after writing everything), 2 when it cannot
# start.
#
# Usage: bench/gpu_step.sh [-- extra mpdist args]
#   MPDIST_BENCH_BUILD       build directory holding mpdist (default build-gpu; nothing is built)
#   MPDIST_GPU_STEP_DRY=1    print the commands without running them (works without a GPU)
#   MPDIST_GPU_STEP_MODELS   default "wrn16-4 resnet20"; also gpt, gpt2-small
#   MPDIST_GPU_STEP_BATCHES  default "128 512" (gpt: 32, gpt2-small: 8, their configs')
#   MPDIST_GPU_STEP_TEXT     the text for gpt and gpt2-small (default /usr/share/games/fortunes)
#   MPDIST_GPU_STEP_ATTENTION  their model.attention (default auto: matrix on CUDA)
#   MPDIST_GPU_STEP_ROWS     mpdist's rows (default "O0 O0+TF32 O1 O2 O2-bf16 O3"; also
#                            O2+flash and O2-bf16+flash: gpt and gpt2-small with
#                            model.attention "flash", the tiled kernels, beside the others')
#   MPDIST_GPU_STEP_TORCH    PyTorch's modes (default "fp32 amp amp-compile"; also amp-bf16)
#   MPDIST_GPU_STEP_STEPS    steps per mpdist run (default 240); MPDIST_GPU_STEP_EVERY (default
#                            20): at least 200 timed steps after the warm-up window
#   MPDIST_GPU_STEP_ROUNDS   default 3
#   MPDIST_GPU_STEP_CONV_ALGO  mpdist's amp.conv_algo: timed (default) or heuristic
#   MPDIST_GPU_STEP_TIMEOUT  seconds per run (default 300)
#   MPDIST_GPU_STEP_REPORT=1 run nothing: the tables and goals from runs/bench-gpu/raw.csv
#   MPDIST_PYTHON            the python with PyTorch (default python3); MPDIST_PYTHON_LD_LIBRARY_PATH,
#                            when set, is its LD_LIBRARY_PATH (tests/gpu/run.sh passes the host's)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
build=${MPDIST_BENCH_BUILD:-build-gpu}
dry=${MPDIST_GPU_STEP_DRY:-0}
report=${MPDIST_GPU_STEP_REPORT:-0}
read -ra models <<<"${MPDIST_GPU_STEP_MODELS:-wrn16-4 resnet20}"
read -ra batches <<<"${MPDIST_GPU_STEP_BATCHES:-}"
text=${MPDIST_GPU_STEP_TEXT:-/usr/share/games/fortunes}
attention=${MPDIST_GPU_STEP_ATTENTION:-auto}
read -ra rows <<<"${MPDIST_GPU_STEP_ROWS:-O0 O0+TF32 O1 O2 O2-bf16 O3}"
read -ra modes <<<"${MPDIST_GPU_STEP_TORCH:-fp32 amp amp-compile}"
steps=${MPDIST_GPU_STEP_STEPS:-240}
every=${MPDIST_GPU_STEP_EVERY:-20}
rounds=${MPDIST_GPU_STEP_ROUNDS:-3}
conv_algo=${MPDIST_GPU_STEP_CONV_ALGO:-timed}
tmo=${MPDIST_GPU_STEP_TIMEOUT:-300}
py=${MPDIST_PYTHON:-python3}
[ "${1:-}" != -- ] || shift
extra=("$@")
hostenv=(env)
[ -z "${MPDIST_PYTHON_LD_LIBRARY_PATH+set}" ] || hostenv=(env "LD_LIBRARY_PATH=$MPDIST_PYTHON_LD_LIBRARY_PATH")
cfg=configs/cifar-wrn16-4.cfg
out=runs/bench-gpu
raw=$out/raw.csv

die() { echo "gpu_step: $*" >&2; exit 2; }
for v in steps every rounds tmo; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "$v must be an integer >= 1 (got '${!v}')"
done
[ "$steps" -gt $((2 * every)) ] || die "STEPS ($steps) must exceed 2 x EVERY ($every): one window is dropped, the median needs more"
for m in "${models[@]}"; do case $m in wrn16-4 | resnet20 | gpt | gpt2-small) ;; *) die "unknown model '$m' (wrn16-4, resnet20, gpt, gpt2-small)" ;; esac; done
for b in ${batches[@]+"${batches[@]}"}; do [[ "$b" =~ ^[1-9][0-9]*$ ]] || die "bad batch '$b'"; done
case $attention in auto | flash | matrix) ;; *) die "MPDIST_GPU_STEP_ATTENTION must be auto, flash or matrix (got '$attention')" ;; esac
texts=$(printf '%s\n' "${models[@]}" | grep -c '^gpt' || true)
# batches_of MODEL: the batches a model runs at (MPDIST_GPU_STEP_BATCHES, else its own)
batches_of() {
  if [ ${#batches[@]} -gt 0 ]; then echo "${batches[@]}"; return; fi
  case $1 in gpt) echo 32 ;; gpt2-small) echo 8 ;; *) echo 128 512 ;; esac
}
all_rows="O0 O0+TF32 O1 O2 O2-bf16 O3 O2+flash O2-bf16+flash"
for r in "${rows[@]}"; do
  case " $all_rows " in *" $r "*) ;; *) die "unknown row '$r' ($all_rows)" ;; esac
done
case $conv_algo in timed | heuristic) ;; *) die "MPDIST_GPU_STEP_CONV_ALGO must be timed or heuristic (got '$conv_algo')" ;; esac
for m in ${modes[@]+"${modes[@]}"}; do case $m in fp32 | amp | amp-bf16 | amp-compile) ;; *) die "unknown PyTorch mode '$m' (fp32 amp amp-bf16 amp-compile)" ;; esac; done
# shellcheck source=launch/env.sh
source launch/env.sh
if [ "$report" = 1 ]; then
  [ -s "$raw" ] || die "MPDIST_GPU_STEP_REPORT=1: no $raw to report from"
elif [ "$dry" = 1 ]; then
  echo "gpu_step: MPDIST_GPU_STEP_DRY=1: the commands, not run"
  [ -x "$build/mpdist" ] || echo "gpu_step: note: $build/mpdist is not built here"
else
  [ -x "$build/mpdist" ] || die "$build/mpdist not found (MPDIST_BENCH_BUILD=$build; tests/gpu/run.sh builds it)"
  [ -f "$cfg" ] || die "$cfg not found"
  [ "$texts" = 0 ] || [ -e "$text" ] || die "no text for gpt at $text (MPDIST_GPU_STEP_TEXT)"
  mkdir -p "$out"
  rm -f "$out/goals.txt" "$out/table.txt" "$out/table.csv"
  echo "model,batch,row,round,status,images_per_s,step_ms,device_ms,device_peak_bytes,device_used_peak_bytes,host_peak_bytes,input_wait_s,skipped_steps,flops_per_image,log,loader_fill_ms" >"$raw"
fi
gpu=$("${hostenv[@]}" nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1) || true
header="# GPU: ${gpu:-unknown (nvidia-smi failed)}; $(date -u +%Y-%m-%dT%H:%M:%SZ); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); mpdist $build; $steps steps (windows of $every, the first dropped), amp.conv_algo=$conv_algo, PyTorch $((steps - every)) after $every warm-up; $rounds rounds"

# run TAG CMD...: runs CMD (stdout and stderr to $out/TAG.log) under the timeout; prints it when dry.
run() {
  local tag=$1 rc=0
  shift
  if [ "$dry" = 1 ]; then printf '%q ' timeout "$tmo" "$@"; echo; return 0; fi
  timeout "$tmo" "$@" >"$out/$tag.log" 2>&1 || rc=$?
  return $rc
}
nums() { sed -n "s/.*\"$1\": *\\([^,}]*\\).*/\\1/p"; } # KEY's value on each line of stdin
num() { nums "$1" | tail -1; }
fill_ms() { # the loader's mean milliseconds to build a batch, from the summary on stdin
  sed -n 's/.*"loader":{"batches":\([0-9.e+-]*\),"fill_s":\([0-9.e+-]*\).*/\1 \2/p' |
    awk '$1 > 0 { printf "%.6g", 1e3 * $2 / $1 }'
}
why() { # the reason a run failed, for the CSV (no commas)
  local msg
  [ "$1" != 124 ] || { echo "timed out after $tmo s"; return; }
  msg=$(grep -m1 -E '^(mpdist: error:|pytorch_ref:)' "$2" 2>/dev/null || grep -v '^[[:space:]]*$' "$2" 2>/dev/null | tail -1 || true)
  printf 'exit %s: %s' "$1" "${msg:-no output}" | tr ',\n' '; '
}

# run_mpdist MODEL BATCH ROW ROUND: one mpdist run, its row in raw.csv
run_mpdist() {
  local model=$1 batch=$2 label=$3 round=$4 opt=${3%%[-+]*} half=fp16 tf32=false tag m rc=0 s w preset
  local att=$attention
  case $label in O2-bf16*) half=bf16 ;; O0+TF32) tf32=true ;; esac
  case $label in *+flash) att=flash ;; esac
  local c=$cfg
  case $model in
  wrn16-4) preset=(--set model.preset=wrn --set model.depth=16 --set model.widen=4) ;;
  resnet20) preset=(--set model.preset=resnet20 --set model.depth=20) ;;
  *) c=configs/fortunes-gpt.cfg
    [ "$model" = gpt ] || c=configs/gpt2-small.cfg
    preset=(--set "data.path=\"$text\"" --set "model.attention=\"$att\"") ;;
  esac
  tag=$model-b$batch-$label-r$round m=$out/$tag.jsonl
  [ "$dry" = 1 ] || rm -f "$m"
  run "$tag" mpirun -np 1 --bind-to none "$build/mpdist" "$c" "${preset[@]}" --set amp.device=cuda \
    --set amp.opt_level="$opt" --set amp.half="$half" --set amp.allow_tf32="$tf32" \
    --set amp.conv_algo="$conv_algo" --set data.batch_size="$batch" --set data.drop_last=true \
    --set data.test_limit="$batch" \
    --set train.max_steps="$steps" --set train.eval_every=0 --set log.every="$every" \
    --set log.progress=none --set "log.metrics=\"$m\"" ${extra[@]+"${extra[@]}"} || rc=$?
  [ "$dry" = 1 ] && return 0
  s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
  w=$(grep '"type":"step"' "$m" 2>/dev/null | tail -n +2 || true)
  if [ "$rc" = 0 ] && [ -n "$s" ] && [ -n "$w" ]; then
    # images over time: each window's images_per_s x its time (steps x step_ms)
    echo "$model,$batch,$label,$round,ok,$(awk -v e="$every" '
        { ips = $1; ms = $2; t = e * ms / 1e3; img += ips * t; tt += t; sms += ms; n++
          if ($3 != "null" && $3 != "") { dms += $3; nd++ } }
        END { printf "%.6g,%.6g,%s", img / tt, sms / n, nd ? sprintf("%.6g", dms / nd) : "" }' \
        < <(paste -d' ' <(nums images_per_s <<<"$w") <(nums step_ms <<<"$w") <(nums device_ms <<<"$w"))),$(num device_peak_bytes <<<"$s"),$(num device_used_peak_bytes <<<"$s"),$(num host_peak_bytes <<<"$s"),$(num input_wait <<<"$s"),$(num skipped_steps <<<"$s"),,$out/$tag.log,$(fill_ms <<<"$s")" >>"$raw"
  else
    [ "$rc" != 0 ] || rc="0 but no step record after the first window${s:+ and a summary}"
    echo "$model,$batch,$label,$round,failed: $(why "$rc" "$out/$tag.log"),,,,,,,,,,$out/$tag.log" >>"$raw"
  fi
}

# run_torch MODEL BATCH MODE ROUND: one PyTorch run, its row in raw.csv
run_torch() {
  local model=$1 batch=$2 mode=$3 round=$4 tag j rc=0
  tag=$model-b$batch-pytorch-$mode-r$round
  run "$tag" "${hostenv[@]}" "$py" bench/pytorch_ref.py --model "$model" --batch "$batch" \
    --mode "$mode" --steps $((steps - every)) --warmup "$every" || rc=$?
  [ "$dry" = 1 ] && return 0
  j=$(grep '^{"framework"' "$out/$tag.log" | tail -1 || true)
  [ -z "$j" ] || echo "$j" >"$out/$tag.json"
  if [ "$rc" = 0 ] && [ -n "$j" ]; then
    echo "$model,$batch,PyTorch-$mode,$round,ok,$(num images_per_s <<<"$j"),$(num step_ms <<<"$j"),$(num device_ms <<<"$j"),$(num device_peak_bytes <<<"$j"),$(num device_used_peak_bytes <<<"$j"),$(num host_peak_bytes <<<"$j"),,,$(num train_flops_per_image <<<"$j"),$out/$tag.log" >>"$raw"
  else
    echo "$model,$batch,PyTorch-$mode,$round,failed: $(why "$rc" "$out/$tag.log"),,,,,,,,,,$out/$tag.log" >>"$raw"
  fi
}

if [ "$report" != 1 ]; then
  for round in $(seq 1 "$rounds"); do
    for model in "${models[@]}"; do
      for batch in $(batches_of "$model"); do
        jobs=()
        for r in "${rows[@]}"; do jobs+=("mpdist $r"); done
        for m in ${modes[@]+"${modes[@]}"}; do jobs+=("torch $m"); done
        [ $((round % 2)) = 1 ] || mapfile -t jobs < <(printf '%s\n' "${jobs[@]}" | tac)
        for j in "${jobs[@]}"; do
          echo "== round $round: $model batch $batch: $j" >&2
          case $j in mpdist\ *) run_mpdist "$model" "$batch" "${j#mpdist }" "$round" ;; *) run_torch "$model" "$batch" "${j#torch }" "$round" ;; esac
        done
      done
    done
  done
fi

# The optimizer step alone against the bandwidth floor (bench/optim_bw.c, built as bench_optim);
# its table is appended to table.txt below.
optim_rc=0
if [ "$report" != 1 ]; then
  echo "== optimizer bandwidth ($build/bench_optim --device cuda)"
  run optim "$build/bench_optim" --device cuda || optim_rc=$?
  [ "$dry" = 1 ] || [ "$optim_rc" = 0 ] || echo "gpu_step: bench_optim failed (exit $optim_rc; $out/optim.log)"
fi
[ "$dry" != 1 ] || exit 0

rc=0
python3 bench/gpu_step_report.py "$raw" "$out" "$header" || rc=$?
[ "$rc" != 2 ] || exit 2
if [ "$report" != 1 ]; then
  { echo; cat "$out/optim.log" 2>/dev/null || true; } | tee -a "$out/table.txt"
fi
echo "(table: $out/table.txt, $out/table.csv; goals: $out/goals.txt; logs: $out/)"
[ "$optim_rc" = 0 ] || rc=1
exit "$rc"
