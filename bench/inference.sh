#!/usr/bin/env bash
# Inference per precision (issue 21), as the ResNeXt article measured it: trains each model on
# Fashion-MNIST at O0 (Adam, lr 0.001, batch 128, STEPS steps), exports its checkpoint three ways
# and evaluates each export on the test set with the matching opt level:
#   fp32       mpdist export --dtype fp32                         eval at O0
#   fp16       mpdist export --dtype fp16                         eval at O3 fp16, BatchNorm fp16
#   fp16-bn32  mpdist export --dtype fp16 --keep-batchnorm-fp32   eval at O3 fp16, BatchNorm FP32
# and prints a markdown table per model and mode: the export's size, test accuracy, images/s
# (the median over ROUNDS rounds, each round running the three modes one after the other) and
# bytes: the weights and buffers rank 0 holds, plus the most its activations and workspace held
# during the evaluation (mpdist eval's "eval:" line, whose rate leaves the first batch out;
# activations are sized for training at data.batch_size, and the gradients, optimizer state and
# masters the trainer also holds are left out), with each mode's ratio to fp32. The models: cnn_bn, resnet20 and a small ResNeXt (depth 11, cardinality 4, width 4:
# the CIFAR ResNeXt-29 8x64d of the preset's defaults takes minutes a step on 2 cores).
# Writes runs/bench-inf/table.md, raw.csv and each run's config and log. Exits 1 when a run
# failed, 2 when it cannot start.
#
# Usage: bench/inference.sh [MODEL...] [-- extra mpdist args for training and eval]
#        (MODEL: cnn_bn, resnet20, resnext; default all three; e.g. -- --set amp.device=cuda)
#   MPDIST_BENCH_BUILD   build directory holding mpdist (default: build, built by launch/build.sh;
#                        when set, nothing is checked or built)
#   MPDIST_INF_STEPS     training steps (default: cnn_bn 469 (one epoch), resnet20 200, resnext 60)
#   MPDIST_INF_TEST      test images evaluated (default: cnn_bn 10000, resnet20 5000, resnext 1000)
#   MPDIST_INF_ROUNDS    rounds of the three evaluations (default 3)
#   MPDIST_INF_THREADS   OpenBLAS/OpenMP threads of the one process (default 2; mpirun runs it
#                        with --bind-to none, so they have as many cores)
#   MPDIST_INF_RETRAIN   0: keep a checkpoint already in runs/bench-inf/MODEL (default 1: train)
#   MPDIST_INF_TIMEOUT   seconds per run (default 1800)
#   MPDIST_INF_DATA      the Fashion-MNIST directory (default /usr/share/datasets/fashion-mnist)
# The table's first line names the CPU, or the GPU (nvidia-smi) when the extra arguments set
# amp.device=cuda (tests/gpu/run.sh runs it so with MPDIST_GPU_INF=1).
set -euo pipefail
source "$(dirname "$0")/common.bash"
bench_build
models=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do models+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
[ ${#models[@]} -gt 0 ] || models=(cnn_bn resnet20 resnext)
rounds=${MPDIST_INF_ROUNDS:-3}
threads=${MPDIST_INF_THREADS:-2}
retrain=${MPDIST_INF_RETRAIN:-1}
tmo=${MPDIST_INF_TIMEOUT:-1800}
fmnist=${MPDIST_INF_DATA:-/usr/share/datasets/fashion-mnist}
out=runs/bench-inf
modes=(fp32 fp16 fp16-bn32)

die() { echo "inference: $*" >&2; exit 2; }
for m in "${models[@]}"; do
  case $m in cnn_bn | resnet20 | resnext) ;; *) die "unknown model '$m' (cnn_bn, resnet20, resnext)" ;; esac
done
for v in rounds threads; do [ "${!v}" -ge 1 ] 2>/dev/null || die "$v must be an integer >= 1 (got '${!v}')"; done
[ -x "$build/mpdist" ] || die "$build/mpdist not found (MPDIST_BENCH_BUILD=$build)"
[ -e "$fmnist/t10k-images-idx3-ubyte.gz" ] || die "no Fashion-MNIST in $fmnist (launch/deps.sh installs it; MPDIST_INF_DATA names another)"
# shellcheck source=launch/env.sh
source launch/env.sh
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
mkdir -p "$out"
raw=$out/raw.csv
echo "model,mode,round,status,file_bytes,accuracy,images_per_s,weights,activations,workspace" >"$raw"

steps_of() { case $1 in cnn_bn) echo "${MPDIST_INF_STEPS:-469}" ;; resnet20) echo "${MPDIST_INF_STEPS:-200}" ;; *) echo "${MPDIST_INF_STEPS:-60}" ;; esac; }
test_of() { case $1 in cnn_bn) echo "${MPDIST_INF_TEST:-10000}" ;; resnet20) echo "${MPDIST_INF_TEST:-5000}" ;; *) echo "${MPDIST_INF_TEST:-1000}" ;; esac; }
# config MODEL: the training configuration (all keys the bench relies on explicit).
config() {
  local model="preset = \"$1\";"
  [ "$1" = resnext ] && model="preset = \"resnext\"; depth = 11; cardinality = 4; width = 4;"
  cat <<EOF
# bench/inference.sh: $1, $(steps_of "$1") steps at O0, then evaluated per export
data: { format = "idx"; path = "$fmnist"; batch_size = 128; test_limit = $(test_of "$1"); };
model: { $model };
amp: { opt_level = "O0"; };
optim: { name = "adam"; lr = 0.001; beta1 = 0.9; beta2 = 0.999; eps = 1e-8; weight_decay = 0.0; };
schedule: { type = "constant"; };
train: { epochs = 100000; max_steps = $(steps_of "$1"); seed = 42; eval_every = 0; };
log: { progress = "none"; };
checkpoint: { dir = "$out/$1"; };
EOF
}
level_of() { # the eval's --set arguments for MODE
  case $1 in
    fp32) echo "--set amp.opt_level=O0" ;;
    fp16) echo "--set amp.opt_level=O3 --set amp.half=fp16 --set amp.keep_batchnorm_fp32=false" ;;
    fp16-bn32) echo "--set amp.opt_level=O3 --set amp.half=fp16 --set amp.keep_batchnorm_fp32=true" ;;
  esac
}
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) printf "%.1f\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

failed=0
for m in "${models[@]}"; do
  cfg=$out/$m.cfg
  config "$m" >"$cfg"
  if [ "$retrain" = 1 ] || ! ls "$out/$m"/ckpt-*.h5 >/dev/null 2>&1; then
    rm -rf "${out:?}/$m"
    echo "== $m: training $(steps_of "$m") steps at O0"
    timeout "$tmo" mpirun -np 1 --bind-to none "$build/mpdist" "$cfg" ${extra[@]+"${extra[@]}"} >"$out/$m-train.log" 2>&1 ||
      { echo "inference: $m: training failed (see $out/$m-train.log)" >&2; failed=1; continue; }
  fi
  ckpt=$(ls "$out/$m"/ckpt-*.h5 | tail -1)
  for mode in "${modes[@]}"; do
    case $mode in fp32) flags=(--dtype fp32) ;; fp16) flags=(--dtype fp16) ;; *) flags=(--dtype fp16 --keep-batchnorm-fp32) ;; esac
    "$build/mpdist" export "$ckpt" "$out/$m-$mode.h5" "${flags[@]}" >/dev/null ||
      { echo "inference: $m: export $mode failed" >&2; failed=1; continue 2; }
  done
  for r in $(seq 1 "$rounds"); do
    for mode in "${modes[@]}"; do
      log=$out/$m-$mode-r$r.log
      read -ra lv <<<"$(level_of "$mode")"
      status=ok
      timeout "$tmo" mpirun -np 1 --bind-to none "$build/mpdist" eval "$cfg" --checkpoint "$out/$m-$mode.h5" "${lv[@]}" \
        ${extra[@]+"${extra[@]}"} >"$log" 2>&1 || { status=failed; failed=1; }
      acc=$(sed -n 's/^test accuracy: //p' "$log" | tail -1)
      read -r ips w a ws <<<"$(sed -nE 's/^eval: [0-9]+ samples in [0-9.]+ s, ([0-9.]+) samples\/s; bytes: weights ([0-9]+), activations ([0-9]+), workspace ([0-9]+)$/\1 \2 \3 \4/p' "$log")"
      [ -n "${ips:-}" ] || { status=failed; failed=1; }
      echo "$m,$mode,$r,$status,$(stat -c %s "$out/$m-$mode.h5"),${acc:-},${ips:-},${w:-},${a:-},${ws:-}" >>"$raw"
      echo "$m $mode round $r: $status, accuracy ${acc:-?}, ${ips:-?} images/s"
    done
  done
done

{
  case " ${extra[*]-} " in
    *amp.device=cuda*) echo "GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1 || echo unknown), CPU: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores; $(date -u +%Y-%m-%dT%H:%M:%SZ)" ;;
    *) echo "CPU: $(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) cores, $(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1); $(date -u +%Y-%m-%dT%H:%M:%SZ)" ;;
  esac
  echo "Fashion-MNIST, trained at O0 (Adam, batch 128), evaluated at batch 128 on 1 process, $threads threads; median of $rounds rounds"
  echo
  echo "| model | mode | file bytes | file/fp32 | test accuracy | images/s | images/s / fp32 | bytes (MiB) | bytes/fp32 |"
  echo "|---|---|---:|---:|---:|---:|---:|---:|---:|"
  for m in "${models[@]}"; do
    base_f="" base_i="" base_b=""
    for mode in "${modes[@]}"; do
      rows=$(awk -F, -v m="$m" -v d="$mode" '$1 == m && $2 == d && $4 == "ok"' "$raw")
      [ -n "$rows" ] || { echo "| $m | $mode | | | | | | | (failed) |"; continue; }
      f=$(cut -d, -f5 <<<"$rows" | head -1)
      acc=$(cut -d, -f6 <<<"$rows" | sort -u | paste -sd/ -)
      ips=$(cut -d, -f7 <<<"$rows" | median)
      b=$(awk -F, '{ print $8 + $9 + $10 }' <<<"$rows" | median)
      [ "$mode" = fp32 ] && base_f=$f base_i=$ips base_b=$b
      awk -v m="$m" -v d="$mode" -v f="$f" -v a="$acc" -v i="$ips" -v b="$b" -v bf="$base_f" -v bi="$base_i" -v bb="$base_b" \
        'function r(x, y) { return y > 0 ? sprintf("%.3f", x / y) : "" }
         BEGIN { printf "| %s | %s | %d | %s | %s | %.0f | %s | %.2f | %s |\n", m, d, f, r(f, bf), a, i, r(i, bi), b / 1048576, r(b, bb) }'
    done
  done
} >"$out/table.md"
cat "$out/table.md"
echo "(table: $out/table.md; runs: $out/)"
exit "$failed"
