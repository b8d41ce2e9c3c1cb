#!/usr/bin/env bash
# The CPU backend against PyTorch on the CPU (issue 21): trains mpdist's presets mlp (784-512-256-
# 10), cnn_bn and resnet20 on Fashion-MNIST, and optionally gpt (byte-level, Debian's fortunes,
# data.format "text") and vit, at each opt level of LEVELS, and the same models in PyTorch FP32
# (bench/torch_models.py: same layers; for gpt and vit the same parameters and init rules, same
# data, same batches in the same order), with the same batch, steps and threads each, and prints
# a markdown table: model, mpdist images/s (gpt: tokens/s) per level, PyTorch FP32, the ratios
# mpdist O0/PyTorch and half level/O0, and the final training and test losses; then, from the
# engine's own counters (log.profile), the per-op table of each model and level: milliseconds
# per step and share of the step, op by op and phase by phase, and the largest share of an op
# other than GEMM/convolution (conv2d, linear, attention's matmuls are inside "attention").
#
# How: for each model, REPEATS rounds of (mpdist at every level, PyTorch), alternating so that
# all see the same machine state. mpdist is one process (mpirun -np 1 --bind-to none: mpirun
# would bind one rank to one core, where its threads would take turns) with OMP_NUM_THREADS and
# OPENBLAS_NUM_THREADS = THREADS (plus its one loader thread); PyTorch runs
# torch.set_num_threads(THREADS). Both train with Adam (lr LR, betas 0.9/0.999, eps 1e-8, no
# weight decay, constant lr) and dropout as the preset has it (cnn_bn 0.25, gpt 0.1, others 0).
# A rate is the median over the timing windows of EVERY steps after the first (mpdist: its step
# records' images_per_s, host wall time; PyTorch the same windows timed with
# time.perf_counter); tokens/s = windows/s x context. The table gives the median over the
# rounds of each rate, and each ratio as the median of the rounds' ratios (a round's runs are
# side by side). final loss: the last step's training loss; test: mean loss over the first TEST
# test samples (validation windows for gpt). The initial weights differ, drawn by each framework.
# Writes runs/bench-cpu/table.md, profile.md, raw.csv and each run's log, config and metrics.
# Then it checks issue 21's goals: mpdist O0 at least 1.3x PyTorch for mlp, cnn_bn and resnet20;
# each half level at least 0.85x O0 for cnn_bn and resnet20; no op other than GEMM/convolution
# above 15% of a cnn_bn step at any level measured. Exits 1 when a run failed or a goal is missed
# (after writing the tables), 2 when it cannot start.
#
# Usage: bench/cpu_speed.sh [MODEL...] [-- extra mpdist args]   (MODEL: mlp, cnn_bn, resnet20,
#        gpt, vit; default mlp cnn_bn resnet20)
#   MPDIST_BENCH_BUILD     build directory holding mpdist (default: build, built by launch/build.sh;
#                          when set, nothing is checked or built)
#   MPDIST_CPU_LEVELS      mpdist's levels, ";"-separated "LEVEL HALF" (default "O0 fp16;O2 fp16;
#                          O2 bf16"; the half type is ignored at O0)
#   MPDIST_TCPU_REPEATS    rounds per model (default 3)
#   MPDIST_TCPU_STEPS      steps per run (default 60); MPDIST_TCPU_EVERY steps per window (10)
#   MPDIST_TCPU_BATCH      samples per step (default 128; gpt 16, vit 64)
#   MPDIST_TCPU_DIM, _DEPTH, _HEADS   gpt, vit: model.dim, depth, heads (default 128, 4, 4)
#   MPDIST_TCPU_CONTEXT    gpt: data.context, bytes per window (default 128)
#   MPDIST_TCPU_STEM       vit: model.stem, conv (default, as configs/fashion-mnist-vit.cfg) or patch
#   MPDIST_TCPU_LR         Adam's learning rate (default 0.001); MPDIST_TCPU_TEST (default 256)
#   MPDIST_TCPU_THREADS    threads of each framework (default 2)
#   MPDIST_TCPU_TIMEOUT    seconds per run (default 900)
#   MPDIST_CPU_REPORT      1: run nothing, print the tables and check the goals from the runs
#                          already in runs/bench-cpu (give the same models, levels, REPEATS
#                          and STEPS)
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
[ ${#models[@]} -gt 0 ] || models=(mlp cnn_bn resnet20)
IFS=';' read -r -a levels <<<"${MPDIST_CPU_LEVELS:-O0 fp16;O2 fp16;O2 bf16}"
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
out=runs/bench-cpu

die() { echo "cpu_speed: $*" >&2; exit 2; }
for m in "${models[@]}"; do
  case $m in mlp | cnn_bn | resnet20 | gpt | vit) ;; *) die "unknown model '$m' (mlp, cnn_bn, resnet20, gpt, vit)" ;; esac
done
for l in "${levels[@]}"; do
  read -r lv hf <<<"$l"
  case "$lv/${hf:-}" in O[0-3]/fp16 | O[0-3]/bf16 | O0/*) ;; *) die "bad level '$l' in MPDIST_CPU_LEVELS (\"O2 fp16\")" ;; esac
done
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
report=${MPDIST_CPU_REPORT:-0}
[ "$report" = 1 ] && { [ -s "$raw" ] || die "MPDIST_CPU_REPORT=1: no $raw to report from"; }
[ "$report" = 1 ] || echo "model,round,framework,status,samples_per_s,tokens_per_s,final_loss,test_loss,log" >"$raw"

batch_of() { case $1 in gpt) echo "${MPDIST_TCPU_BATCH:-16}" ;; vit) echo "${MPDIST_TCPU_BATCH:-64}" ;; *) echo "${MPDIST_TCPU_BATCH:-128}" ;; esac; }
# fw_of LEVEL: the framework column of a level ("mpdist-O0", "mpdist-O2-fp16")
fw_of() { local lv hf; read -r lv hf <<<"$1"; if [ "$lv" = O0 ]; then echo mpdist-O0; else echo "mpdist-$lv-$hf"; fi; }
# config MODEL BATCH METRICS LEVEL HALF: mpdist's configuration for the model (all keys explicit).
config() {
  local data model
  case $1 in
    gpt) data="format = \"text\"; path = \"$fortunes\"; context = $context;"
         model="preset = \"gpt\"; dim = $dim; depth = $depth; heads = $heads; dropout = 0.1;" ;;
    vit) data="format = \"idx\"; path = \"$fmnist\";"
         model="preset = \"vit\"; dim = $dim; depth = $depth; heads = $heads; dropout = 0.0; stem = \"$stem\";" ;;
    mlp) data="format = \"idx\"; path = \"$fmnist\";"
         model="preset = \"mlp\"; hidden = [512, 256];" ;;
    *) data="format = \"idx\"; path = \"$fmnist\";"
       model="preset = \"$1\";" ;;
  esac
  cat <<EOF
# bench/cpu_speed.sh: $1, batch $2, $steps steps, $4 ${5:-}
data: { $data batch_size = $2; test_limit = $ntest; };
model: { $model };
amp: { opt_level = "$4"; half = "${5:-fp16}"; device = "cpu"; };
optim: { name = "adam"; lr = $lr; beta1 = 0.9; beta2 = 0.999; eps = 1e-8; weight_decay = 0.0; };
schedule: { type = "constant"; };
train: { epochs = 100000; max_steps = $steps; seed = 42; eval_every = 0; };
log: { every = $every; progress = "none"; metrics = "$3"; profile = true; };
EOF
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
nums() { sed -n "s/.*\"$1\": *\\([^,}]*\\).*/\\1/p"; } # KEY's value on each line of stdin
num() { nums "$1" | tail -1; }
why() { # the reason a run failed, for the CSV (no commas)
  local msg
  [ "$1" != 124 ] || { echo "timed out after $tmo s"; return; }
  msg=$(grep -m1 -E '^(mpdist: error:|torch_models:|Traceback)' "$2" 2>/dev/null || grep -v '^[[:space:]]*$' "$2" 2>/dev/null | tail -1 || true)
  printf 'exit %s: %s' "$1" "${msg:-no output}" | tr ',\n' '; '
}

# run_mpdist MODEL ROUND LEVEL: one mpdist run, its row in raw.csv
run_mpdist() {
  local lv hf fw tag m rc=0 s windows ips test_loss tokens=1
  [ "$1" = gpt ] && tokens=$context
  read -r lv hf <<<"$3"
  fw=$(fw_of "$3") tag=$1-r$2-$(fw_of "$3")
  m=$out/$tag.jsonl
  config "$1" "$(batch_of "$1")" "$m" "$lv" "$hf" >"$out/$1-$fw.cfg"
  rm -f "$m"
  echo "== $1 round $2: $fw" >&2
  timeout "$tmo" mpirun -np 1 --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS "$build/mpdist" \
    "$out/$1-$fw.cfg" ${extra[@]+"${extra[@]}"} >"$out/$tag.log" 2>&1 || rc=$?
  s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
  windows=$(grep -c '"type":"step"' "$m" 2>/dev/null || true)
  if [ "$rc" = 0 ] && [ -n "$s" ] && [ "${windows:-0}" -ge 2 ]; then
    ips=$(grep '"type":"step"' "$m" | tail -n +2 | nums images_per_s | median)
    test_loss=$(num test_loss <<<"$s")
    [ -n "$test_loss" ] || test_loss=$(grep '"type":"eval"' "$m" | tail -1 | num loss)
    echo "$1,$2,$fw,ok,$ips,$(awk -v a="$ips" -v t="$tokens" 'BEGIN { print a * t }'),$(num final_loss <<<"$s"),$test_loss,$out/$tag.log" >>"$raw"
  else
    [ "$rc" != 0 ] || rc="0 but ${windows:-0} step records${s:+ and a summary}"
    echo "$1,$2,$fw,failed: $(why "$rc" "$out/$tag.log"),,,,,$out/$tag.log" >>"$raw"
  fi
}

# run_torch MODEL ROUND: one PyTorch run, its row in raw.csv
run_torch() {
  local tag=$1-r$2-pytorch rc=0 j args
  echo "== $1 round $2: PyTorch" >&2
  args=(--model "$1" --batch "$(batch_of "$1")" --steps "$steps" --every "$every" --threads "$threads"
        --lr "$lr" --seed 42 --test-limit "$ntest")
  case $1 in
    gpt) args+=(--dim "$dim" --depth "$depth" --heads "$heads" --dropout 0.1 --context "$context" --data "$fortunes") ;;
    vit) args+=(--dim "$dim" --depth "$depth" --heads "$heads" --dropout 0 --data "$fmnist" --stem "$stem") ;;
    mlp) args+=(--hidden 512,256 --data "$fmnist") ;;
    *) args+=(--data "$fmnist") ;;
  esac
  timeout "$tmo" "$py" bench/torch_models.py train "${args[@]}" >"$out/$tag.log" 2>&1 || rc=$?
  j=$(grep '^{"framework"' "$out/$tag.log" | tail -1 || true)
  if [ "$rc" = 0 ] && [ -n "$j" ]; then
    echo "$1,$2,pytorch,ok,$(num samples_per_s <<<"$j"),$(num tokens_per_s <<<"$j"),$(num final_loss <<<"$j"),$(num test_loss <<<"$j"),$out/$tag.log" >>"$raw"
  else
    echo "$1,$2,pytorch,failed: $(why "$rc" "$out/$tag.log"),,,,,$out/$tag.log" >>"$raw"
  fi
}

for model in "${models[@]}"; do
  [ "$report" = 1 ] && break
  for round in $(seq 1 "$repeats"); do
    for l in "${levels[@]}"; do run_mpdist "$model" "$round" "$l"; done
    run_torch "$model" "$round"
  done
done

# rate MODEL FW ROUND: that run's rate (tokens/s for gpt), empty when it failed
rate() {
  local col=5
  [ "$1" = gpt ] && col=6
  awk -F, -v m="$1" -v f="$2" -v r="$3" '$1 == m && $3 == f && $2 == r && $4 == "ok"' "$raw" | cut -d, -f$col
}
# rates MODEL FW: the median over the rounds
rates() { for r in $(seq 1 "$repeats"); do rate "$1" "$2" "$r"; done | median; }
# ratio MODEL FW_A FW_B: the median over the rounds of A's rate / B's (side by side in a round)
ratio() {
  local r
  for r in $(seq 1 "$repeats"); do
    awk -v a="$(rate "$1" "$2" "$r")" -v b="$(rate "$1" "$3" "$r")" 'BEGIN { if (a != "" && b + 0 > 0) print a / b }'
  done | median | awk '{ printf "%.2f", $1 }'
}
fmt() { awk -v v="$1" 'BEGIN { if (v == "") print "failed"; else printf "%.0f", v }'; }
# loss MODEL FW: "final (test)" of its last good run
loss() { awk -F, -v m="$1" -v f="$2" '$1 == m && $3 == f && $4 == "ok"' "$raw" | tail -1 | awk -F, '{ printf "%.4f (%.4f)", $7, $8 }'; }
{
  echo "CPU: $(nproc) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "$steps steps, windows of $every, median of $repeats rounds; $threads threads each; Adam lr $lr; PyTorch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null)"
  echo
  head="| model | unit | batch |" rule="|---|---|---:|" halves=()
  for l in "${levels[@]}"; do
    f=$(fw_of "$l")
    head+=" ${f#mpdist-} |"
    rule+="---:|"
    [ "$f" = mpdist-O0 ] || halves+=("$f")
  done
  head+=" PyTorch FP32 | O0/PyTorch |"
  rule+="---:|---:|"
  for f in ${halves[@]+"${halves[@]}"}; do head+=" ${f#mpdist-}/O0 |"; rule+="---:|"; done
  echo "$head mpdist O0 final (test) loss | PyTorch final (test) loss |"
  echo "$rule---|---|"
  for model in "${models[@]}"; do
    unit=images/s
    [ "$model" = gpt ] && unit=tokens/s
    row="| $model | $unit | $(batch_of "$model") |"
    for l in "${levels[@]}"; do row+=" $(fmt "$(rates "$model" "$(fw_of "$l")")") |"; done
    row+=" $(fmt "$(rates "$model" pytorch)") | $(ratio "$model" mpdist-O0 pytorch) |"
    for f in ${halves[@]+"${halves[@]}"}; do row+=" $(ratio "$model" "$f" mpdist-O0) |"; done
    la=$(loss "$model" mpdist-O0) lb=$(loss "$model" pytorch)
    echo "$row ${la:-failed} | ${lb:-failed} |"
  done
} | tee "$out/table.md"

# The per-op tables: each model and level's last round, from its summary record's profile_ms.
{
  echo "Per-op time from mpdist's own counters (log.profile; the steps after the first), ms per step and share of the step; last round"
  for model in "${models[@]}"; do
    for l in "${levels[@]}"; do
      s=$(grep -h '"type":"summary"' "$out/$model-r$repeats-$(fw_of "$l").jsonl" 2>/dev/null || true)
      [ -n "$s" ] || continue
      echo
      echo "$model, $(fw_of "$l" | sed 's/^mpdist-//'):"
      echo
      "$py" bench/profile_table.py "$s"
    done
  done
} | tee "$out/profile.md"
echo "(tables: $out/table.md, $out/profile.md; every run: $raw; logs, configs and metrics: $out/)"
goals=0
miss() { echo "goal missed: $*"; goals=1; }
at_least() { awk -v r="$1" -v g="$2" 'BEGIN { exit !(r != "" && r + 0 >= g) }'; }
for model in "${models[@]}"; do
  case $model in mlp | cnn_bn | resnet20) ;; *) continue ;; esac
  r=$(ratio "$model" mpdist-O0 pytorch)
  at_least "$r" 1.3 || miss "$model: mpdist O0 at ${r:-no}x PyTorch's FP32 images/s (goal >= 1.3)"
  [ "$model" = mlp ] && continue
  for l in "${levels[@]}"; do
    f=$(fw_of "$l")
    [ "$f" = mpdist-O0 ] && continue
    r=$(ratio "$model" "$f" mpdist-O0)
    at_least "$r" 0.85 || miss "$model: ${f#mpdist-} at ${r:-no}x of O0's images/s (goal >= 0.85)"
  done
done
while read -r level share; do
  miss "cnn_bn, $level: an op other than GEMM/convolution takes $share of a step (goal <= 15%)"
done < <(awk '/^[a-z0-9_]+, .*:$/ { m = $1; lv = $2; sub(/:$/, "", lv) }
              m == "cnn_bn," && /the largest op other than/ { v = $NF; sub(/%/, "", v); if (v + 0 > 15) print lv, $NF }' "$out/profile.md")
failed=$(awk -F, 'NR > 1 && $4 != "ok"' "$raw" | wc -l)
if [ "$failed" -ne 0 ]; then
  echo "cpu_speed: $failed runs failed:" >&2
  awk -F, 'NR > 1 && $4 != "ok" { print "  " $1 " round " $2 " " $3 ": " $4 " (" $9 ")" }' "$raw" >&2
  exit 1
fi
exit "$goals"
