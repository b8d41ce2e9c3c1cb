#!/usr/bin/env bash
# Transformers on the CPU against PyTorch: trains mpdist's gpt preset (byte-level, Debian's
# fortunes, data.format "text") and vit preset (Fashion-MNIST) at O0 FP32, and the same models in
# PyTorch FP32 (bench/torch_transformers.py: same parameters and init rules, same data, same
# batches in the same order), with the same batch, steps and 2 threads each, and prints a
# markdown table: model, mpdist O0 tokens/s (vit: images/s), PyTorch FP32, ratio mpdist/PyTorch,
# final training loss and test loss of each.
#
# How: for each model, REPEATS rounds of (mpdist, PyTorch), alternating so that both see the
# same machine state. mpdist is one process (mpirun -np 1) with OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS = 2 (plus its one loader thread); PyTorch runs torch.set_num_threads(2).
# Both train with Adam (lr LR, betas 0.9/0.999, eps 1e-8, no weight decay, constant lr) and
# dropout as the preset has it (gpt 0.1, vit 0). A rate is the median over the timing windows of
# EVERY steps after the first (mpdist: its step records' images_per_s, host wall time; PyTorch
# the same windows timed with time.perf_counter); tokens/s = windows/s x context. The table
# gives the median over the rounds. final loss: the last step's training loss (the same batch
# for both; the initial weights differ, drawn by each framework); test: mean loss over the first
# TEST validation windows (test images), the same for both.
# Writes runs/bench-transformer/table.md, raw.csv and each run's log, config and metrics. Exits 1
# when a run failed (after writing the table), 2 when it cannot start.
#
# Usage: bench/transformer_cpu.sh [MODEL...] [-- extra mpdist args]   (MODEL: gpt, vit; default
#        both)
#   MPDIST_BENCH_BUILD     build directory holding mpdist (default: build, built by launch/build.sh;
#                          when set, nothing is checked or built)
#   MPDIST_TCPU_REPEATS    rounds of (mpdist, PyTorch) per model (default 3)
#   MPDIST_TCPU_STEPS      steps per run (default 60); MPDIST_TCPU_EVERY steps per window (10)
#   MPDIST_TCPU_BATCH      samples per step (default gpt 16, vit 64)
#   MPDIST_TCPU_DIM, _DEPTH, _HEADS   model.dim, depth, heads (default the presets': 128, 4, 4)
#   MPDIST_TCPU_CONTEXT    gpt: data.context, bytes per window (default 128)
#   MPDIST_TCPU_STEM       vit: model.stem, conv (default, as configs/fashion-mnist-vit.cfg) or patch
#   MPDIST_TCPU_LR         Adam's learning rate (default 0.001); MPDIST_TCPU_TEST (default 256)
#   MPDIST_TCPU_THREADS    threads of each framework (default 2)
#   MPDIST_TCPU_TIMEOUT    seconds per run (default 900)
#   MPDIST_PYTHON          the python with PyTorch (default /usr/bin/python3, Debian's
#                          python3-torch)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
build=${MPDIST_BENCH_BUILD:-}
if [ -z "$build" ]; then
  build=build
  bash launch/deps.sh --check python3-torch
  bash launch/build.sh build >/dev/null
fi
models=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do models+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
[ ${#models[@]} -gt 0 ] || models=(gpt vit)
repeats=${MPDIST_TCPU_REPEATS:-3}
steps=${MPDIST_TCPU_STEPS:-60}
every=${MPDIST_TCPU_EVERY:-10}
dim=${MPDIST_TCPU_DIM:-128} depth=${MPDIST_TCPU_DEPTH:-4} heads=${MPDIST_TCPU_HEADS:-4}
context=${MPDIST_TCPU_CONTEXT:-128}
stem=${MPDIST_TCPU_STEM:-conv}
lr=${MPDIST_TCPU_LR:-0.001}
ntest=${MPDIST_TCPU_TEST:-256}
threads=${MPDIST_TCPU_THREADS:-2}
tmo=${MPDIST_TCPU_TIMEOUT:-900}
py=${MPDIST_PYTHON:-/usr/bin/python3}
fortunes=/usr/share/games/fortunes fmnist=/usr/share/datasets/fashion-mnist
out=runs/bench-transformer

die() { echo "transformer_cpu: $*" >&2; exit 2; }
for m in "${models[@]}"; do case $m in gpt | vit) ;; *) die "unknown model '$m' (gpt, vit)" ;; esac; done
for v in repeats steps every threads; do
  [ "${!v}" -ge 1 ] 2>/dev/null || die "$v must be an integer >= 1 (got '${!v}')"
done
[ "$steps" -gt $((2 * every)) ] || die "STEPS ($steps) must exceed 2 x EVERY ($every): the first window is dropped"
[ -x "$build/mpdist" ] || die "$build/mpdist not found (MPDIST_BENCH_BUILD=$build)"
"$py" -c 'import torch, numpy' 2>/dev/null || die "$py cannot import torch (Debian: apt-get install python3-torch; or set MPDIST_PYTHON)"
# shellcheck source=launch/env.sh
source launch/env.sh
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
mkdir -p "$out"
raw=$out/raw.csv
echo "model,round,framework,status,samples_per_s,tokens_per_s,final_loss,test_loss,log" >"$raw"

# config MODEL BATCH METRICS: mpdist's configuration for the model (all keys explicit).
config() {
  local data model
  if [ "$1" = gpt ]; then
    data="format = \"text\"; path = \"$fortunes\"; context = $context;"
    model="preset = \"gpt\"; dim = $dim; depth = $depth; heads = $heads; dropout = 0.1;"
  else
    data="format = \"idx\"; path = \"$fmnist\";"
    model="preset = \"vit\"; dim = $dim; depth = $depth; heads = $heads; dropout = 0.0; stem = \"$stem\";"
  fi
  cat <<EOF
# bench/transformer_cpu.sh: $1, batch $2, $steps steps
data: { $data batch_size = $2; test_limit = $ntest; };
model: { $model };
amp: { opt_level = "O0"; device = "cpu"; };
optim: { name = "adam"; lr = $lr; beta1 = 0.9; beta2 = 0.999; eps = 1e-8; weight_decay = 0.0; };
schedule: { type = "constant"; };
train: { epochs = 100000; max_steps = $steps; seed = 42; eval_every = 0; };
log: { every = $every; progress = "none"; metrics = "$3"; };
EOF
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
nums() { sed -n "s/.*\"$1\": *\\([^,}]*\\).*/\\1/p"; } # KEY's value on each line of stdin
num() { nums "$1" | tail -1; }
why() { # the reason a run failed, for the CSV (no commas)
  local msg
  [ "$1" != 124 ] || { echo "timed out after $tmo s"; return; }
  msg=$(grep -m1 -E '^(mpdist: error:|torch_transformers:|Traceback)' "$2" 2>/dev/null || grep -v '^[[:space:]]*$' "$2" 2>/dev/null | tail -1 || true)
  printf 'exit %s: %s' "$1" "${msg:-no output}" | tr ',\n' '; '
}

for model in "${models[@]}"; do
  if [ "$model" = gpt ]; then batch=${MPDIST_TCPU_BATCH:-16} tokens=$context; else batch=${MPDIST_TCPU_BATCH:-64} tokens=1; fi
  for round in $(seq 1 "$repeats"); do
    tag=$model-r$round-mpdist
    m=$out/$tag.jsonl
    config "$model" "$batch" "$m" >"$out/$model.cfg"
    rm -f "$m"
    rc=0
    echo "== $model round $round: mpdist" >&2
    timeout "$tmo" mpirun -np 1 -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS "$build/mpdist" \
      "$out/$model.cfg" ${extra[@]+"${extra[@]}"} >"$out/$tag.log" 2>&1 || rc=$?
    s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
    windows=$(grep -c '"type":"step"' "$m" 2>/dev/null || true)
    if [ "$rc" = 0 ] && [ -n "$s" ] && [ "${windows:-0}" -ge 2 ]; then
      ips=$(grep '"type":"step"' "$m" | tail -n +2 | nums images_per_s | median)
      test_loss=$(num test_loss <<<"$s")
      [ -n "$test_loss" ] || test_loss=$(grep '"type":"eval"' "$m" | tail -1 | num loss)
      echo "$model,$round,mpdist,ok,$ips,$(awk -v a="$ips" -v t="$tokens" 'BEGIN { print a * t }'),$(num final_loss <<<"$s"),$test_loss,$out/$tag.log" >>"$raw"
    else
      [ "$rc" != 0 ] || rc="0 but ${windows:-0} step records${s:+ and a summary}"
      echo "$model,$round,mpdist,failed: $(why "$rc" "$out/$tag.log"),,,,,$out/$tag.log" >>"$raw"
    fi
    tag=$model-r$round-pytorch
    rc=0
    echo "== $model round $round: PyTorch" >&2
    args=(--model "$model" --batch "$batch" --steps "$steps" --every "$every" --threads "$threads"
          --dim "$dim" --depth "$depth" --heads "$heads" --lr "$lr" --seed 42 --test-limit "$ntest")
    if [ "$model" = gpt ]; then args+=(--dropout 0.1); else args+=(--dropout 0); fi
    if [ "$model" = gpt ]; then args+=(--context "$context" --data "$fortunes"); else args+=(--data "$fmnist" --stem "$stem"); fi
    timeout "$tmo" "$py" bench/torch_transformers.py train "${args[@]}" >"$out/$tag.log" 2>&1 || rc=$?
    j=$(grep '^{"framework"' "$out/$tag.log" | tail -1 || true)
    if [ "$rc" = 0 ] && [ -n "$j" ]; then
      echo "$model,$round,pytorch,ok,$(num samples_per_s <<<"$j"),$(num tokens_per_s <<<"$j"),$(num final_loss <<<"$j"),$(num test_loss <<<"$j"),$out/$tag.log" >>"$raw"
    else
      echo "$model,$round,pytorch,failed: $(why "$rc" "$out/$tag.log"),,,,,$out/$tag.log" >>"$raw"
    fi
  done
done

{
  echo "CPU: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "$steps steps, windows of $every, median of $repeats rounds; $threads threads each; Adam lr $lr; PyTorch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo
  echo "| model | unit | batch | mpdist O0 | PyTorch FP32 | mpdist/PyTorch | mpdist final (test) loss | PyTorch final (test) loss |"
  echo "|---|---|---:|---:|---:|---:|---|---|"
  for model in "${models[@]}"; do
    ok() { awk -F, -v m="$model" -v f="$1" '$1 == m && $3 == f && $4 == "ok"' "$raw"; }
    unit=tokens/s col=6 batch=${MPDIST_TCPU_BATCH:-16}
    [ "$model" = vit ] && unit=images/s col=5 batch=${MPDIST_TCPU_BATCH:-64}
    a=$(ok mpdist | cut -d, -f$col | median) b=$(ok pytorch | cut -d, -f$col | median)
    la=$(ok mpdist | tail -1 | awk -F, '{ printf "%.4f (%.4f)", $7, $8 }')
    lb=$(ok pytorch | tail -1 | awk -F, '{ printf "%.4f (%.4f)", $7, $8 }')
    ratio=$(awk -v a="$a" -v b="$b" 'BEGIN { if (a != "" && b + 0 > 0) printf "%.2f", a / b; else print "-" }')
    fmt() { awk -v v="$1" 'BEGIN { if (v == "") print "failed"; else printf "%.0f", v }'; }
    echo "| $model | $unit | $batch | $(fmt "$a") | $(fmt "$b") | $ratio | ${la:-failed} | ${lb:-failed} |"
  done
} | tee "$out/table.md"
echo "(table: $out/table.md; every run: $raw; logs, configs and metrics: $out/)"
failed=$(awk -F, 'NR > 1 && $4 != "ok"' "$raw" | wc -l)
if [ "$failed" -ne 0 ]; then
  echo "transformer_cpu: $failed runs failed:" >&2
  awk -F, 'NR > 1 && $4 != "ok" { print "  " $1 " round " $2 " " $3 ": " $4 " (" $9 ")" }' "$raw" >&2
  exit 1
fi
