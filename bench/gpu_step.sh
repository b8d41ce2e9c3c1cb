#!/usr/bin/env bash
# Issue 7's one-GPU step benchmark: mpdist's training step at each opt level against PyTorch's,
# for WRN-16-4 and resnet20 on synthetic 32x32x3 data (10 classes) at batch 128 and 512.
#
# What is measured, and how:
#   mpdist   mpirun -np 1 $build/mpdist configs/cifar-wrn16-4.cfg (resnet20: --set
#            model.preset=resnet20 model.depth=20) with amp.device=cuda, train.max_steps=STEPS,
#            train.eval_every=0 and a step record every EVERY steps, for the rows O0 (FP32,
#            amp.allow_tf32=false), O0+TF32, O1 fp16, O2 fp16, O2 bf16 and O3 fp16. A step
#            record's images_per_s and step_ms are the host wall time of its window of EVERY
#            steps; the first window (warm-up: cuDNN algorithm choice, first allocations) is
#            dropped and the median of the others is reported. Peak memory is the summary's
#            peak_mem_bytes (the engine's counted device bytes); input wait and skipped steps
#            come from the summary too.
#   PyTorch  bench/pytorch_ref.py, same model, batch and input shape, in fp32 (TF32 off) and amp
#            (fp16 autocast, GradScaler, channels_last, fused SGD): EVERY warm-up steps, then
#            STEPS - EVERY steps timed between torch.cuda.synchronize() calls; its peak memory is
#            torch.cuda.max_memory_allocated(); it also counts the training FLOPs per image.
#   Derived  TFLOP/s = PyTorch's FLOPs per image x the row's images/s; mpdist/PyTorch images/s
#            (O0 rows against PyTorch fp32, O1-O3 against PyTorch amp); speed-up and memory of
#            each row against mpdist O0; and the issue's goals, PASS or FAIL for each model and
#            batch: O2 fp16 >= 3x O0 images/s; O2 fp16 peak memory <= 0.55x O0; at batch 128,
#            O2 fp16 >= 1.2x PyTorch amp images/s with no more peak memory.
# Writes runs/bench-gpu/table.txt, table.csv (first line: GPU and date), goals.txt, and each run's
# log, metrics (.jsonl) and PyTorch JSON line. Exits 1 when a run failed or a goal was missed
# (after writing everything), 2 when it cannot start.
#
# Usage: bench/gpu_step.sh [-- extra mpdist args]
#   MPDIST_BENCH_BUILD       build directory holding mpdist (default build-gpu; nothing is built)
#   MPDIST_GPU_STEP_DRY=1    print the commands without running them (works without a GPU)
#   MPDIST_GPU_STEP_MODELS   default "wrn16-4 resnet20"
#   MPDIST_GPU_STEP_BATCHES  default "128 512"
#   MPDIST_GPU_STEP_STEPS    steps per mpdist run (default 120); MPDIST_GPU_STEP_EVERY (default 20)
#   MPDIST_GPU_STEP_TIMEOUT  seconds per run (default 180)
#   MPDIST_PYTHON            the python with PyTorch (default python3); MPDIST_PYTHON_LD_LIBRARY_PATH,
#                            when set, is its LD_LIBRARY_PATH (tests/gpu/run.sh passes the host's)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
build=${MPDIST_BENCH_BUILD:-build-gpu}
dry=${MPDIST_GPU_STEP_DRY:-0}
read -ra models <<<"${MPDIST_GPU_STEP_MODELS:-wrn16-4 resnet20}"
read -ra batches <<<"${MPDIST_GPU_STEP_BATCHES:-128 512}"
steps=${MPDIST_GPU_STEP_STEPS:-120}
every=${MPDIST_GPU_STEP_EVERY:-20}
tmo=${MPDIST_GPU_STEP_TIMEOUT:-180}
py=${MPDIST_PYTHON:-python3}
[ "${1:-}" != -- ] || shift
extra=("$@")
hostenv=(env)
[ -z "${MPDIST_PYTHON_LD_LIBRARY_PATH+set}" ] || hostenv=(env "LD_LIBRARY_PATH=$MPDIST_PYTHON_LD_LIBRARY_PATH")
cfg=configs/cifar-wrn16-4.cfg
out=runs/bench-gpu
# label opt_level half allow_tf32
rows=("O0 O0 fp16 false" "O0+TF32 O0 fp16 true" "O1 O1 fp16 false" "O2 O2 fp16 false"
  "O2-bf16 O2 bf16 false" "O3 O3 fp16 false")

die() { echo "gpu_step: $*" >&2; exit 2; }
[ "$steps" -gt $((2 * every)) ] 2>/dev/null || die "STEPS ($steps) must exceed 2 x EVERY ($every): one window is dropped, the median needs more"
for m in "${models[@]}"; do case $m in wrn16-4 | resnet20) ;; *) die "unknown model '$m' (wrn16-4, resnet20)" ;; esac; done
# shellcheck source=launch/env.sh
source launch/env.sh
if [ "$dry" = 1 ]; then
  echo "gpu_step: MPDIST_GPU_STEP_DRY=1: the commands, not run"
  [ -x "$build/mpdist" ] || echo "gpu_step: note: $build/mpdist is not built here"
else
  [ -x "$build/mpdist" ] || die "$build/mpdist not found (MPDIST_BENCH_BUILD=$build; tests/gpu/run.sh builds it)"
  [ -f "$cfg" ] || die "$cfg not found"
  mkdir -p "$out"
  rm -f "$out/goals.txt" "$out/table.txt" "$out/table.csv"
fi
gpu=$("${hostenv[@]}" nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1) || true
header="# GPU: ${gpu:-unknown (nvidia-smi failed)}; $(date -u +%Y-%m-%dT%H:%M:%SZ); mpdist $build; $steps steps, windows of $every"
raw=$out/raw.csv
[ "$dry" = 1 ] || echo "model,batch,row,status,images_per_s,step_ms,peak_mem_bytes,input_wait_s,skipped_steps,flops_per_image,log" >"$raw"

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
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
why() { # the reason a run failed, for the CSV (no commas)
  local msg
  [ "$1" != 124 ] || { echo "timed out after $tmo s"; return; }
  msg=$(grep -m1 -E '^(mpdist: error:|pytorch_ref:)' "$2" 2>/dev/null || grep -v '^[[:space:]]*$' "$2" 2>/dev/null | tail -1 || true)
  printf 'exit %s: %s' "$1" "${msg:-no output}" | tr ',\n' '; '
}

for model in "${models[@]}"; do
  preset=(--set model.preset=wrn --set model.depth=16 --set model.widen=4)
  [ "$model" = resnet20 ] && preset=(--set model.preset=resnet20 --set model.depth=20)
  for batch in "${batches[@]}"; do
    for r in "${rows[@]}"; do
      read -r label opt half tf32 <<<"$r"
      tag=$model-b$batch-$label
      m=$out/$tag.jsonl
      rc=0
      [ "$dry" = 1 ] || rm -f "$m"
      run "$tag" mpirun -np 1 "$build/mpdist" "$cfg" "${preset[@]}" --set amp.device=cuda \
        --set amp.opt_level="$opt" --set amp.half="$half" --set amp.allow_tf32="$tf32" \
        --set data.batch_size="$batch" --set data.drop_last=true --set data.test_limit="$batch" \
        --set train.max_steps="$steps" --set train.eval_every=0 --set log.every="$every" \
        --set log.progress=none --set "log.metrics=\"$m\"" ${extra[@]+"${extra[@]}"} || rc=$?
      [ "$dry" = 1 ] && continue
      s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
      windows=$(grep -c '"type":"step"' "$m" 2>/dev/null || true)
      if [ "$rc" = 0 ] && [ -n "$s" ] && [ "${windows:-0}" -ge 2 ]; then
        ips=$(grep '"type":"step"' "$m" | tail -n +2 | nums images_per_s | median)
        ms=$(grep '"type":"step"' "$m" | tail -n +2 | nums step_ms | median)
        echo "$model,$batch,$label,ok,$ips,$ms,$(num peak_mem_bytes <<<"$s"),$(num input_wait <<<"$s"),$(num skipped_steps <<<"$s"),,$out/$tag.log" >>"$raw"
      else
        [ "$rc" != 0 ] || rc="0 but ${windows:-0} step records${s:+ and a summary}"
        echo "$model,$batch,$label,failed: $(why "$rc" "$out/$tag.log"),,,,,,,$out/$tag.log" >>"$raw"
      fi
    done
    for mode in fp32 amp; do
      tag=$model-b$batch-pytorch-$mode
      rc=0
      run "$tag" "${hostenv[@]}" "$py" bench/pytorch_ref.py --model "$model" --batch "$batch" \
        --mode "$mode" --steps $((steps - every)) --warmup "$every" || rc=$?
      [ "$dry" = 1 ] && continue
      j=$(grep '^{"framework"' "$out/$tag.log" | tail -1 || true)
      [ -z "$j" ] || echo "$j" >"$out/$tag.json"
      if [ "$rc" = 0 ] && [ -n "$j" ]; then
        echo "$model,$batch,PyTorch-$mode,ok,$(num images_per_s <<<"$j"),$(num step_ms <<<"$j"),$(num peak_mem_bytes <<<"$j"),,,$(num train_flops_per_image <<<"$j"),$out/$tag.log" >>"$raw"
      else
        echo "$model,$batch,PyTorch-$mode,failed: $(why "$rc" "$out/$tag.log"),,,,,,,$out/$tag.log" >>"$raw"
      fi
    done
  done
done

# The optimizer step alone against the bandwidth floor (bench/optim_bw.c, built as bench_optim);
# its table is appended to table.txt below.
optim_rc=0
if [ -f bench/optim_bw.c ]; then
  echo "== optimizer bandwidth ($build/bench_optim --device cuda)"
  run optim "$build/bench_optim" --device cuda || optim_rc=$?
  [ "$dry" = 1 ] || [ "$optim_rc" = 0 ] || echo "gpu_step: bench_optim failed (exit $optim_rc; $out/optim.log)"
else
  echo "== optimizer bandwidth: skipped (bench/optim_bw.c not present)"
fi
[ "$dry" != 1 ] || exit 0

# Derived columns and goals: a first pass over raw.csv collects every row, the second prints.
awk -F, -v header="$header" -v csv="$out/table.csv" -v goals="$out/goals.txt" '
  function r(k, f) { return (k in ok) ? val[k, f] : "" }
  function ratio(a, b) { return (a != "" && b != "" && b + 0 > 0) ? sprintf("%.2f", a / b) : "" }
  NR == FNR { if (FNR > 1 && $4 == "ok") { k = $1 SUBSEP $2 SUBSEP $3; ok[k] = 1
                for (f = 5; f <= 10; f++) val[k, f] = $f
                if ($10 != "") flops[$1, $2] = $10 }
              next }
  FNR == 1 { print header > csv
             print "model,batch,row,status,images_per_s,step_ms,peak_mem_bytes,tflops,vs_pytorch,speedup_vs_O0,mem_vs_O0,input_wait_s,skipped_steps,log" > csv
             print header
             printf "%-8s %5s %-13s %10s %8s %9s %7s %7s %6s %7s  %s\n", "model", "batch", "row", "images/s", "step_ms", "peak_MiB", "TFLOP/s", "vs_PyT", "x_O0", "mem_O0", "status"
             next }
  { m = $1; b = $2; row = $3; k = m SUBSEP b SUBSEP row
    tf = ($5 != "" && (m, b) in flops) ? sprintf("%.1f", flops[m, b] * $5 / 1e12) : ""
    ref = (row ~ /^O0/) ? "PyTorch-fp32" : "PyTorch-amp"
    vs = (row ~ /^PyTorch/) ? "" : ratio($5, r(m SUBSEP b SUBSEP ref, 5))
    o0 = m SUBSEP b SUBSEP "O0"
    sp = ratio($5, r(o0, 5)); mr = ratio($7, r(o0, 7))
    print m "," b "," row "," $4 "," $5 "," $6 "," $7 "," tf "," vs "," sp "," mr "," $8 "," $9 "," $11 > csv
    if ($4 == "ok")
      printf "%-8s %5s %-13s %10.0f %8.2f %9.1f %7s %7s %6s %7s  ok\n", m, b, row, $5, $6, $7 / 1048576, tf, vs, sp, mr
    else
      printf "%-8s %5s %-13s %10s %8s %9s %7s %7s %6s %7s  %s (log: %s)\n", m, b, row, "-", "-", "-", "-", "-", "-", "-", $4, $11
    order[++n] = m SUBSEP b }
  function goal(text, pass, measured) {
    line = measured ? sprintf("%s %s", pass ? "PASS" : "FAIL", text) : sprintf("FAIL %s: not measured (a run failed)", text)
    print line; print line > goals }
  END { print "" ; printf "" > goals
    for (i = 1; i <= n; i++) { if (done[order[i]]++) continue
      split(order[i], mb, SUBSEP); m = mb[1]; b = mb[2]
      o0 = m SUBSEP b SUBSEP "O0"; o2 = m SUBSEP b SUBSEP "O2"; pa = m SUBSEP b SUBSEP "PyTorch-amp"
      have = (o0 in ok) && (o2 in ok)
      s = have ? r(o2, 5) / r(o0, 5) : 0; mm = have ? r(o2, 7) / r(o0, 7) : 0
      goal(sprintf("%s batch %s: O2 fp16 >= 3x O0 images/s%s", m, b, have ? sprintf(" (%.2fx)", s) : ""), s >= 3, have)
      goal(sprintf("%s batch %s: O2 fp16 peak memory <= 0.55x O0%s", m, b, have ? sprintf(" (%.2fx)", mm) : ""), mm <= 0.55, have)
      if (b == 128) { hp = (o2 in ok) && (pa in ok)
        s = hp ? r(o2, 5) / r(pa, 5) : 0; mm = hp ? r(o2, 7) / r(pa, 7) : 0
        goal(sprintf("%s batch %s: O2 fp16 >= 1.2x PyTorch amp images/s with no more peak memory%s", m, b, hp ? sprintf(" (%.2fx images/s, %.2fx memory)", s, mm) : ""), s >= 1.2 && mm <= 1, hp) } } }
' "$raw" "$raw" | tee "$out/table.txt"
tee -a "$out/table.txt" <<EOF
images/s, step_ms: mpdist: median over the step records' windows of $every steps after the first
  (host wall time); PyTorch: $((steps - every)) steps after $every warm-up steps, between cuda synchronizes.
peak_MiB: mpdist: the engine's counted device bytes (summary peak_mem_bytes); PyTorch:
  torch.cuda.max_memory_allocated() over model build, warm-up and timed steps.
TFLOP/s: PyTorch's FlopCounterMode count of forward + backward per image (convolutions and
  matmuls) x the row's images/s. vs_PyT: O0 and O0+TF32 against PyTorch fp32, which has TF32
  OFF (so O0+TF32's ratio compares TF32 with full FP32); O1, O2, O2-bf16, O3 against PyTorch
  amp (fp16 autocast, channels_last, fused SGD). x_O0, mem_O0: against mpdist O0.
EOF
[ ! -f bench/optim_bw.c ] || { echo; cat "$out/optim.log" 2>/dev/null || true; } | tee -a "$out/table.txt"
echo "(table: $out/table.txt, $out/table.csv; goals: $out/goals.txt; logs: $out/)"
failed=$(awk -F, 'NR > 1 && $4 != "ok"' "$raw" | wc -l)
[ "$optim_rc" = 0 ] || failed=$((failed + 1))
missed=$(grep -c '^FAIL' "$out/goals.txt" || true)
if [ "$failed" -ne 0 ] || [ "$missed" -ne 0 ]; then
  echo "gpu_step: $failed runs failed, $missed goals missed"
  exit 1
fi
