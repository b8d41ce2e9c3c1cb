#!/usr/bin/env bash
# The CPU backend against PyTorch on the CPU (issues 21, 44): trains mpdist's presets mlp
# (784-512-256-10), cnn_bn and resnet20 on Fashion-MNIST, and optionally gpt (byte-level,
# Debian's fortunes, data.format "text") and vit, at each opt level of LEVELS, and the same
# models in PyTorch FP32 (bench/torch_models.py: same layers; for gpt and vit the same parameters
# and init rules, same data, same batches in the same order), with the same global batch and
# steps, each framework at its best thread setting, and prints markdown tables: per model each
# framework's best rate and the ratios of the bests (mpdist O0 / the best PyTorch, half level /
# O0), then each framework's winning setting with its range and final losses; then, from the
# engine's own counters (log.profile), the per-op table of each model and level: milliseconds
# per step and share of the step, op by op and phase by phase, and the largest share of an op
# other than GEMM/convolution (conv2d, linear, attention's matmuls are inside "attention").
#
# How: each framework at its best setting, found by a sweep, not assumed (issue 44). The
# frameworks are mpdist at each level of LEVELS and each PyTorch peer: Debian's python3-torch and,
# when bench/torch_venv.sh has installed it (--install-torch does), the current release from the
# Python package registry. For each model:
#   1. screening (round 0): every setting of each framework's grid runs once. mpdist's grid
#      (ranks/omp/blas: processes, OMP_NUM_THREADS, OPENBLAS_NUM_THREADS): ranks=1/omp=T/blas=T
#      and ranks=T/omp=1/blas=1 (T = THREADS; mpdist takes one thread count per rank for
#      OpenBLAS, oneDNN and its own loops, OMP_NUM_THREADS first: docs/reproducibility.md; ranks=1
#      runs mpirun -np 1 --bind-to none so the threads share the cores, ranks=T --bind-to core,
#      each rank a share of the batch, the global batch the same). A PyTorch's grid: threads=T
#      and threads=1 (torch.set_num_threads, OMP_NUM_THREADS) x blas=1 and blas=T
#      (OPENBLAS_NUM_THREADS; only for a torch without MKL, whose GEMMs go to OpenBLAS's own
#      threads). Then PyTorch's CPU fast paths, tried one after another on the best so far and
#      kept when faster: channels_last (cnn_bn, resnet20, vit), mkldnn=off (the same models;
#      oneDNN is on by default), cap=avx512 (ATEN_CPU_CAPABILITY, where the CPU has AVX-512 and
#      the torch dispatches to less), attn=matrix (gpt, vit: the explicit T x T softmax instead
#      of torch's fused scaled_dot_product_attention, which bench/torch_models.py uses by
#      default where the torch has it, 2.0 and later), compile (torch.compile, where the torch
#      has it; it compiles in the first window, which is not timed).
#   2. rounds 1..REPEATS: the FINALISTS best screened settings of every framework, side by side,
#      alternating (even rounds in reverse order).
# Where a level of LEVELS trains in bf16, every PyTorch peer also runs as a framework of its own
# under torch.autocast to bf16 (pytorch-NAME-amp-bf16: PyTorch AMP's CPU path, bf16 matmuls and
# convolutions through oneDNN, on AMX or AVX512-BF16 where the CPU has them), the peer of the
# half levels: the table gives each bf16 level's ratio to the faster of them.
# bench/cpu_sweep.py then picks each framework's best (the finalist with the highest median over
# the rounds) and gives the ratios of the bests (the median over the rounds of the ratio of two
# runs in the same round); the goals are checked against the faster PyTorch.
# A rate is the median over the timing windows of EVERY steps after the first (mpdist: its step
# records' images_per_s, host wall time; PyTorch the same windows timed with
# time.perf_counter); tokens/s = windows/s x context. Both train with Adam (lr LR, betas
# 0.9/0.999, eps 1e-8, no weight decay, constant lr) and dropout as the preset has it (cnn_bn
# 0.25, gpt 0.1, others 0). final loss: the last step's training loss; test: mean loss over the
# first TEST test samples (validation windows for gpt). The initial weights differ, drawn by each
# framework. Writes runs/bench-cpu/table.md (the bests side by side, then per model the winning
# setting of each framework with its range), settings.csv (every setting's screening rate and
# rounds' median, min and max), goals.txt, profile.md (mpdist's per-op tables: each level's best
# setting, last round), raw.csv (every run) and each run's log, config and metrics.
# Goals checked (bench/cpu_sweep.py --help): issue 21's (mpdist O0 >= 1.3x PyTorch for mlp,
# cnn_bn and resnet20; each half level >= 0.85x O0 for cnn_bn and resnet20; no op other than
# GEMM/convolution above 15% of a cnn_bn step) and issue 49's (gpt and vit O0 >= 1.3x PyTorch,
# O2 bf16 >= 1.0x O0). Exits 1 when a run failed or a goal is missed (after writing the
# tables), 2 when it cannot start.
#
# Usage: bench/cpu_speed.sh [--install-torch] [MODEL...] [-- extra mpdist args]   (MODEL: mlp,
#        cnn_bn, resnet20, gpt, vit; default mlp cnn_bn resnet20)
#   --install-torch        first install the registry's PyTorch (bench/torch_venv.sh --install)
#   MPDIST_BENCH_BUILD     build directory holding mpdist (default: build, built by launch/build.sh;
#                          when set, nothing is checked or built)
#   MPDIST_CPU_LEVELS      mpdist's levels, ";"-separated "LEVEL HALF" (default "O0 fp16;O2 fp16;
#                          O2 bf16"; the half type is ignored at O0)
#   MPDIST_TCPU_REPEATS    rounds per model (default 3); MPDIST_TCPU_FINALISTS settings per
#                          framework in the rounds (default 2)
#   MPDIST_TCPU_MPDIST_GRID, MPDIST_TCPU_TORCH_GRID   the screened settings, space-separated
#                          (default: as above; a torch setting: threads=N[/blas=N][/channels_last]
#                          [/mkldnn=off][/cap=avx512][/attn=matrix][/compile])
#   MPDIST_TCPU_FASTPATHS  0: no fast paths tried (default 1)
#   MPDIST_TCPU_PEERS      the PyTorch peers, space-separated NAME=PYTHON (default
#                          "debian=/usr/bin/python3" and "pypi=<bench/torch_venv.sh's python>"
#                          when it is installed)
#   MPDIST_TCPU_STEPS      steps per run (default 60); MPDIST_TCPU_EVERY steps per window (10)
#   MPDIST_TCPU_BATCH      samples per step (default 128; gpt 16, vit 64)
#   MPDIST_TCPU_DIM, _DEPTH, _HEADS   gpt, vit: model.dim, depth, heads (default 128, 4, 4)
#   MPDIST_TCPU_CONTEXT    gpt: data.context, bytes per window (default 128)
#   MPDIST_TCPU_STEM       vit: model.stem, conv (default, as configs/fashion-mnist-vit.cfg) or patch
#   MPDIST_TCPU_LR         Adam's learning rate (default 0.001); MPDIST_TCPU_TEST (default 256)
#   MPDIST_TCPU_THREADS    cores to use, T above (default: the online cores)
#   MPDIST_TCPU_TIMEOUT    seconds per run (default 900)
#   MPDIST_TCPU_OUT        where the tables and runs go (default runs/bench-cpu)
#   MPDIST_CPU_REPORT      1: run nothing, print the tables and check the goals from the runs
#                          already in runs/bench-cpu/raw.csv
#   MPDIST_PYTHON          Debian's python with PyTorch (default /usr/bin/python3)
set -euo pipefail
source "$(dirname "$0")/common.bash"
die() { echo "cpu_speed: $*" >&2; exit 2; }
install_torch=0
[ "${1:-}" != --install-torch ] || { install_torch=1; shift; }
bench_build python3-torch
models=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do models+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp cnn_bn resnet20)
IFS=';' read -r -a levels <<<"${MPDIST_CPU_LEVELS:-O0 fp16;O2 fp16;O2 bf16}"
repeats=${MPDIST_TCPU_REPEATS:-3}
nfinal=${MPDIST_TCPU_FINALISTS:-2}
fastpaths=${MPDIST_TCPU_FASTPATHS:-1}
steps=${MPDIST_TCPU_STEPS:-60}
every=${MPDIST_TCPU_EVERY:-10}
dim=${MPDIST_TCPU_DIM:-128} depth=${MPDIST_TCPU_DEPTH:-4} heads=${MPDIST_TCPU_HEADS:-4}
context=${MPDIST_TCPU_CONTEXT:-128}
stem=${MPDIST_TCPU_STEM:-conv}
lr=${MPDIST_TCPU_LR:-0.001}
ntest=${MPDIST_TCPU_TEST:-256}
threads=${MPDIST_TCPU_THREADS:-$(getconf _NPROCESSORS_ONLN)}
tmo=${MPDIST_TCPU_TIMEOUT:-900}
report=${MPDIST_CPU_REPORT:-0}
fortunes=/usr/share/games/fortunes fmnist=/usr/share/datasets/fashion-mnist
out=${MPDIST_TCPU_OUT:-runs/bench-cpu}
raw=$out/raw.csv

for m in "${models[@]}"; do
  case $m in mlp | cnn_bn | resnet20 | gpt | vit) ;; *) die "unknown model '$m' (mlp, cnn_bn, resnet20, gpt, vit)" ;; esac
done
for l in "${levels[@]}"; do
  read -r lv hf <<<"$l"
  case "$lv/${hf:-}" in O[0-3]/fp16 | O[0-3]/bf16 | O0/*) ;; *) die "bad level '$l' in MPDIST_CPU_LEVELS (\"O2 fp16\")" ;; esac
done
for v in repeats nfinal steps every threads tmo; do
  [[ "${!v}" =~ ^[0-9]+$ ]] && [ "${!v}" -ge 1 ] || die "$v must be an integer >= 1 (got '${!v}')"
done
[ "$steps" -gt $((2 * every)) ] || die "STEPS ($steps) must exceed 2 x EVERY ($every): the first window is dropped"
if [ "$report" = 1 ]; then
  [ -s "$raw" ] || die "MPDIST_CPU_REPORT=1: no $raw to report from"
else
  [ -x "$build/mpdist" ] || die "$build/mpdist not found (MPDIST_BENCH_BUILD=$build)"
fi

# The PyTorch peers: NAME=PYTHON words.
if [ "$install_torch" = 1 ]; then bash bench/torch_venv.sh --install >/dev/null || die "bench/torch_venv.sh --install failed"; fi
if [ -n "${MPDIST_TCPU_PEERS+set}" ]; then
  read -ra peers <<<"$MPDIST_TCPU_PEERS"
else
  peers=("debian=${MPDIST_PYTHON:-/usr/bin/python3}")
  if v=$(bash bench/torch_venv.sh 2>/dev/null); then peers+=("pypi=$v"); else
    echo "cpu_speed: note: no PyTorch from the package registry (bench/torch_venv.sh --install, or --install-torch); Debian's only" >&2
  fi
fi
[ ${#peers[@]} -ge 1 ] || die "MPDIST_TCPU_PEERS names no peer"
declare -A peer_py peer_version peer_mkl peer_cap peer_compile
for p in "${peers[@]}"; do
  [[ "$p" =~ ^[a-z0-9]+=.+ ]] || die "bad peer '$p' in MPDIST_TCPU_PEERS (NAME=PYTHON)"
  peer_py[${p%%=*}]=${p#*=}
  [ "$report" = 1 ] && continue
  info=$("${p#*=}" - 2>/dev/null <<'PY'
import re, numpy, torch
cap = getattr(getattr(torch.backends, "cpu", None), "get_cpu_capability", None)
cap = cap() if cap else (re.findall(r"CPU capability usage: (\S+)", torch.__config__.show()) or ["unknown"])[0]
print(torch.__version__, int(torch.backends.mkl.is_available()), cap, int(hasattr(torch, "compile")))
PY
) || die "${p#*=} cannot import torch and numpy (Debian: apt-get install python3-torch; or bench/torch_venv.sh --install)"
  read -r "peer_version[${p%%=*}]" "peer_mkl[${p%%=*}]" "peer_cap[${p%%=*}]" "peer_compile[${p%%=*}]" <<<"$info"
done
cpu_avx512=0
grep -qw avx512f /proc/cpuinfo && cpu_avx512=1
# shellcheck source=launch/env.sh
source launch/env.sh
mkdir -p "$out"
[ "$report" = 1 ] || echo "model,stage,round,framework,setting,status,samples_per_s,tokens_per_s,final_loss,test_loss,version,log" >"$raw"

batch_of() { case $1 in gpt) echo "${MPDIST_TCPU_BATCH:-16}" ;; vit) echo "${MPDIST_TCPU_BATCH:-64}" ;; *) echo "${MPDIST_TCPU_BATCH:-128}" ;; esac; }
# fw_of LEVEL: the framework column of a level ("mpdist-O0", "mpdist-O2-fp16")
fw_of() { local lv hf; read -r lv hf <<<"$1"; if [ "$lv" = O0 ]; then echo mpdist-O0; else echo "mpdist-$lv-$hf"; fi; }
level_of() { local l; for l in "${levels[@]}"; do [ "$(fw_of "$l")" != "$1" ] || { echo "$l"; return; }; done; }
# frameworks: mpdist's levels, each PyTorch peer in FP32, and where a level trains in bf16 each
# peer under autocast to bf16 too (pytorch-NAME-amp-bf16, its peer for the half levels)
frameworks() {
  local l p amp=0
  for l in "${levels[@]}"; do fw_of "$l"; [[ $l != O0* && $l == *bf16 ]] && amp=1; done
  for p in "${peers[@]}"; do echo "pytorch-${p%%=*}"; done
  if [ "$amp" = 1 ]; then for p in "${peers[@]}"; do echo "pytorch-${p%%=*}-amp-bf16"; done; fi
}
# peer_of FRAMEWORK: the PyTorch peer's name of a pytorch-* framework
peer_of() { local p=${1#pytorch-}; echo "${p%-amp-bf16}"; }
uniq_words() { awk '{ for (i = 1; i <= NF; i++) if (!seen[$i]++) print $i }' <<<"$*"; }
# grid FRAMEWORK: its screened settings
grid() {
  local t=$threads
  case $1 in
    mpdist-*) uniq_words "${MPDIST_TCPU_MPDIST_GRID:-ranks=1/omp=$t/blas=$t ranks=$t/omp=1/blas=1}" ;;
    *) if [ -n "${MPDIST_TCPU_TORCH_GRID:-}" ]; then uniq_words "$MPDIST_TCPU_TORCH_GRID"
       elif [ "${peer_mkl[$(peer_of "$1")]}" = 1 ]; then uniq_words "threads=$t threads=1"
       else uniq_words "threads=$t/blas=1 threads=$t/blas=$t threads=1/blas=1 threads=1/blas=$t"; fi ;;
  esac
}
# fast_paths PEER MODEL: PyTorch's CPU fast paths worth trying on this model
fast_paths() {
  [ "$fastpaths" = 1 ] || return 0
  case $2 in cnn_bn | resnet20 | vit) echo channels_last; echo mkldnn=off ;; esac
  if [ "$cpu_avx512" = 1 ] && [ "${peer_cap[$1]}" != AVX512 ]; then echo cap=avx512; fi
  case $2 in gpt | vit) [ "${peer_compile[$1]}" != 1 ] || echo attn=matrix ;; esac
  if [ "${peer_compile[$1]}" = 1 ]; then echo compile; fi
}
# field SETTING KEY DEFAULT: KEY's value in a setting ("ranks=1/omp=2/blas=2"), or DEFAULT
field() { local w; for w in ${1//\// }; do [ "${w%%=*}" != "$2" ] || { echo "${w#*=}"; return; }; done; echo "$3"; }
has() { [[ "/$1/" == */"$2"/* || "/$1/" == */"$2"=* ]]; }
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
  cat <<CFG
# bench/cpu_speed.sh: $1, batch $2, $steps steps, $4 ${5:-}
data: { $data batch_size = $2; test_limit = $ntest; };
model: { $model };
amp: { opt_level = "$4"; half = "${5:-fp16}"; device = "cpu"; };
optim: { name = "adam"; lr = $lr; beta1 = 0.9; beta2 = 0.999; eps = 1e-8; weight_decay = 0.0; };
schedule: { type = "constant"; };
train: { epochs = 100000; max_steps = $steps; seed = 42; eval_every = 0; };
log: { every = $every; progress = "none"; metrics = "$3"; profile = true; };
CFG
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
# tag_of MODEL STAGE ROUND FW SETTING: the file name of a run
tag_of() { echo "$1-$2$3-$4-$(tr '/=' '_-' <<<"$5")"; }

# run_mpdist MODEL STAGE ROUND FW SETTING: one mpdist run, its row in raw.csv
run_mpdist() {
  local lv hf tag m rc=0 s windows ips test_loss tokens=1 ranks omp blas batch bind=none cfg
  [ "$1" = gpt ] && tokens=$context
  read -r lv hf <<<"$(level_of "$4")"
  ranks=$(field "$5" ranks 1) omp=$(field "$5" omp "$threads") blas=$(field "$5" blas "$threads")
  batch=$(batch_of "$1")
  [ $((batch % ranks)) = 0 ] || die "$1: batch $batch is not a multiple of ranks=$ranks"
  [ "$ranks" = 1 ] || bind=core
  tag=$(tag_of "$1" "$2" "$3" "$4" "$5") cfg=$out/$1-$4.cfg
  m=$out/$tag.jsonl
  config "$1" "$batch" "$m" "$lv" "$hf" >"$cfg"
  rm -f "$m"
  echo "== $1 $2 $3: $4 [$5]" >&2
  OMP_NUM_THREADS=$omp OPENBLAS_NUM_THREADS=$blas timeout "$tmo" mpirun -np "$ranks" --bind-to "$bind" \
    -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS "$build/mpdist" "$cfg" \
    --set data.batch_size=$((batch / ranks)) ${extra[@]+"${extra[@]}"} >"$out/$tag.log" 2>&1 || rc=$?
  s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
  windows=$(grep -c '"type":"step"' "$m" 2>/dev/null || true)
  if [ "$rc" = 0 ] && [ -n "$s" ] && [ "${windows:-0}" -ge 2 ]; then
    ips=$(grep '"type":"step"' "$m" | tail -n +2 | nums images_per_s | median)
    test_loss=$(num test_loss <<<"$s")
    [ -n "$test_loss" ] || test_loss=$(grep '"type":"eval"' "$m" | tail -1 | num loss)
    echo "$1,$2,$3,$4,$5,ok,$ips,$(awk -v a="$ips" -v t="$tokens" 'BEGIN { print a * t }'),$(num final_loss <<<"$s"),$test_loss,$("$build/mpdist" --version | awk '{ print $2 }'),$out/$tag.log" >>"$raw"
  else
    [ "$rc" != 0 ] || rc="0 but ${windows:-0} step records${s:+ and a summary}"
    echo "$1,$2,$3,$4,$5,failed: $(why "$rc" "$out/$tag.log"),,,,,,$out/$tag.log" >>"$raw"
  fi
}

# run_torch MODEL STAGE ROUND FW SETTING: one PyTorch run, its row in raw.csv
run_torch() {
  local peer tag j args rc=0 t blas cap envs
  peer=$(peer_of "$4") tag=$(tag_of "$1" "$2" "$3" "$4" "$5")
  t=$(field "$5" threads "$threads") blas=$(field "$5" blas 1) cap=$(field "$5" cap "")
  envs=("OMP_NUM_THREADS=$t" "OPENBLAS_NUM_THREADS=$blas" "MKL_NUM_THREADS=$t")
  [ -z "$cap" ] || envs+=("ATEN_CPU_CAPABILITY=$cap")
  echo "== $1 $2 $3: $4 [$5]" >&2
  args=(--model "$1" --batch "$(batch_of "$1")" --steps "$steps" --every "$every" --threads "$t"
        --lr "$lr" --seed 42 --test-limit "$ntest" --mkldnn "$(field "$5" mkldnn on)"
        --attention "$(field "$5" attn sdpa)")
  if has "$5" channels_last; then args+=(--channels-last); fi
  if has "$5" compile; then args+=(--compile); fi
  if [[ $4 == *-amp-bf16 ]]; then args+=(--amp bf16); fi
  case $1 in
    gpt) args+=(--dim "$dim" --depth "$depth" --heads "$heads" --dropout 0.1 --context "$context" --data "$fortunes") ;;
    vit) args+=(--dim "$dim" --depth "$depth" --heads "$heads" --dropout 0 --data "$fmnist" --stem "$stem") ;;
    mlp) args+=(--hidden 512,256 --data "$fmnist") ;;
    *) args+=(--data "$fmnist") ;;
  esac
  env "${envs[@]}" timeout "$tmo" "${peer_py[$peer]}" bench/torch_models.py train "${args[@]}" >"$out/$tag.log" 2>&1 || rc=$?
  j=$(grep '^{"framework"' "$out/$tag.log" | tail -1 || true)
  if [ "$rc" = 0 ] && [ -n "$j" ]; then
    echo "$1,$2,$3,$4,$5,ok,$(num samples_per_s <<<"$j"),$(num tokens_per_s <<<"$j"),$(num final_loss <<<"$j"),$(num test_loss <<<"$j"),$(num torch <<<"$j" | tr -d '" '),$out/$tag.log" >>"$raw"
  else
    echo "$1,$2,$3,$4,$5,failed: $(why "$rc" "$out/$tag.log"),,,,,${peer_version[$peer]},$out/$tag.log" >>"$raw"
  fi
}
run_one() { case $4 in mpdist-*) run_mpdist "$@" ;; *) run_torch "$@" ;; esac; }
sweep() { python3 bench/cpu_sweep.py "$@"; }

for model in "${models[@]}"; do
  [ "$report" = 1 ] && break
  mapfile -t fws < <(frameworks)
  for fw in "${fws[@]}"; do
    for s in $(grid "$fw"); do run_one "$model" screen 0 "$fw" "$s"; done
    [[ $fw == pytorch-* ]] || continue
    best=$(sweep best-screened "$raw" "$model" "$fw") || continue
    for fp in $(fast_paths "$(peer_of "$fw")" "$model"); do
      has "$best" "${fp%%=*}" && continue
      run_one "$model" screen 0 "$fw" "$best/$fp"
      a=$(sweep rate "$raw" "$model" "$fw" "$best") || a=0
      b=$(sweep rate "$raw" "$model" "$fw" "$best/$fp") || b=0
      if awk -v a="$a" -v b="$b" 'BEGIN { exit !(b > a) }'; then best=$best/$fp; fi
    done
  done
  declare -A fin=()
  for fw in "${fws[@]}"; do fin[$fw]=$(sweep finalists "$raw" "$model" "$fw" "$nfinal" | tr '\n' ' '); done
  for round in $(seq 1 "$repeats"); do
    order=("${fws[@]}")
    [ $((round % 2)) = 1 ] || mapfile -t order < <(printf '%s\n' "${fws[@]}" | tac)
    for fw in "${order[@]}"; do
      for s in ${fin[$fw]}; do run_one "$model" round "$round" "$fw" "$s"; done
    done
  done
  unset fin
done

{
  echo "CPU: $(getconf _NPROCESSORS_ONLN) cores, $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1) (family $(sed -n 's/^cpu family[[:space:]]*: //p' /proc/cpuinfo | head -1) model $(sed -n 's/^model[[:space:]]*: //p' /proc/cpuinfo | head -1); $(if [ "$cpu_avx512" = 1 ]; then echo AVX-512; elif grep -qw avx2 /proc/cpuinfo; then echo "AVX2, no AVX-512"; else echo "no AVX2"; fi)); $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf '%s steps, windows of %s; %s cores; Adam lr %s; peers:' "$steps" "$every" "$threads" "$lr"
  for p in "${peers[@]}"; do printf ' pytorch-%s (torch %s, %s)' "${p%%=*}" "${peer_version[${p%%=*}]:-?}" "${peer_cap[${p%%=*}]:-?}"; done
  printf '\n\n'
} >"$out/head.md"
rc=0
sweep report "$raw" "$out" >"$out/report.txt" || rc=$?
cat "$out/head.md" "$out/table.md" >"$out/table.tmp" && mv "$out/table.tmp" "$out/table.md"
cat "$out/head.md" "$out/report.txt"

# The per-op tables: each model and level's best setting, last round, from its summary's profile_ms.
{
  echo "Per-op time from mpdist's own counters (log.profile; the steps after the first), ms per step and share of the step; each level's best setting, last round"
  for model in "${models[@]}"; do
    for l in "${levels[@]}"; do
      fw=$(fw_of "$l")
      best=$(awk -F, -v m="$model" -v f="$fw" '$1 == m && $2 == f && $10 == 1 { print $3 }' "$out/settings.csv")
      [ -n "$best" ] || continue
      s=$(grep -h '"type":"summary"' "$out/$(tag_of "$model" round "$repeats" "$fw" "$best").jsonl" 2>/dev/null || true)
      [ -n "$s" ] || continue
      echo
      echo "$model, ${fw#mpdist-} [$best]:"
      echo
      python3 bench/profile_table.py "$s"
    done
  done
} | tee "$out/profile.md"
echo "(tables: $out/table.md, $out/settings.csv, $out/goals.txt, $out/profile.md; every run: $raw; logs, configs and metrics: $out/)"
while read -r level share; do
  echo "FAIL cnn_bn, $level: an op other than GEMM/convolution takes $share of a step (goal <= 15%)" | tee -a "$out/goals.txt"
  rc=1
done < <(awk '/^[a-z0-9_]+, .*:$/ { m = $1; lv = $2 }
              m == "cnn_bn," && /the largest op other than/ { v = $NF; sub(/%/, "", v); if (v + 0 > 15) print lv, $NF }' "$out/profile.md")
exit "$rc"
