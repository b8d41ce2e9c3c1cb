#!/usr/bin/env bash
# Activation memory per preset with the planned arena (issue 48, docs/memory.md): for each model
# at batch 128 on its usual input (Fashion-MNIST's 28x28x1, CIFAR's 32x32x3, the fortunes text's
# 128-byte context) and each opt level in LEVELS, `mpdist --dry-run` builds the model and prints
# the plan: the arena's bytes (what the allocator counts as activations: every activation and
# scratch tensor of a step) and what the tensors of the same model without its fused ops
# (BatchNorm + ReLU, add + ReLU) took each with bytes of its own, as before the plan; the same
# with model.recompute = true. Nothing trains and the bytes do not
# depend on the machine, but a dry run builds the model and allocates and zeroes the arena: the
# resnext row at O0 holds 8.4 GiB of host memory (leave it out with MPDIST_PLAN_MODELS on a
# smaller machine, where the memory check refuses it); gpt reads the fortunes text
# (fortunes-min). Writes bench/results/activation-plan.md and .csv
# and checks issue 48's goal: resnet20 and WRN-16-4 at O2, activation + scratch bytes at most
# 0.5x of before (exit 1 when missed, after writing the tables).
# Usage: bench/activation_plan.sh [-- extra mpdist args]
#   MPDIST_BENCH_BUILD     build directory holding mpdist (default: build, built by
#                          launch/build.sh)
#   MPDIST_PLAN_MODELS     presets (default "mlp cnn_bn resnet20 wrn resnext vit gpt")
#   MPDIST_PLAN_LEVELS     opt levels (default "O0 O2")
#   MPDIST_PLAN_BATCH      batch (default 128)
#   MPDIST_PLAN_OUT        where the tables go (default bench/results/activation-plan)
set -euo pipefail
source "$(dirname "$0")/common.bash"
bench_build
[ "${1:-}" = -- ] && shift
extra=("$@")
# Unset: the defaults; set but blank, a list of nothing to run, refused below.
read -r -a models <<<"${MPDIST_PLAN_MODELS-mlp cnn_bn resnet20 wrn resnext vit gpt}"
read -r -a levels <<<"${MPDIST_PLAN_LEVELS-O0 O2}"
batch=${MPDIST_PLAN_BATCH:-128}
out=${MPDIST_PLAN_OUT:-bench/results/activation-plan}
[[ $batch =~ ^[1-9][0-9]*$ ]] || { echo "activation_plan: MPDIST_PLAN_BATCH must be a positive integer (got '$batch')" >&2; exit 2; }
[ ${#models[@]} -gt 0 ] || { echo "activation_plan: MPDIST_PLAN_MODELS names no model" >&2; exit 2; }
[ ${#levels[@]} -gt 0 ] || { echo "activation_plan: MPDIST_PLAN_LEVELS names no opt level (O0 to O3)" >&2; exit 2; }
for l in "${levels[@]}"; do
  [[ $l =~ ^O[0-3]$ ]] || { echo "activation_plan: unknown opt level '$l' (O0 to O3)" >&2; exit 2; }
done
# The config of each preset, into args: synthetic data in its shape where a file would be read.
args_of() {
  local img=(--set 'data.format="synthetic"' --set data.synthetic_train=256 --set data.synthetic_test=128
    --set 'data.synthetic_shape=[28,28,1]')
  case $1 in
    mlp | cnn_bn) args=(configs/fashion-mnist-cnn-bn.cfg "${img[@]}" --set "model.preset=\"$1\"") ;;
    resnet20) args=(configs/cifar-wrn16-4.cfg --set 'model.preset="resnet20"' --set model.depth=20) ;;
    wrn) args=(configs/cifar-wrn16-4.cfg) ;;
    resnext) args=(configs/cifar-wrn16-4.cfg --set 'model.preset="resnext"' --set model.depth=29) ;;
    vit) args=(configs/fashion-mnist-vit.cfg "${img[@]}") ;;
    gpt) args=(configs/fortunes-gpt.cfg) ;;
    *) return 1 ;;
  esac
}
for m in "${models[@]}"; do
  args_of "$m" || { echo "activation_plan: unknown model '$m' (mlp cnn_bn resnet20 wrn resnext vit gpt)" >&2; exit 2; }
done
mkdir -p "$out"
# plan MODEL LEVEL RECOMPUTE: "planned before" bytes from the dry run's plan line (before: every
# tensor of the model without the fused ops in bytes of its own, the layout before issue 48)
plan() {
  local line
  args_of "$1"
  line=$("$build/mpdist" "${args[@]}" --dry-run --set "amp.opt_level=\"$2\"" --set 'amp.device="cpu"' \
    --set "data.batch_size=$batch" --set "model.recompute=$3" "${extra[@]}" 2>&1 | grep '^activation plan:') ||
    { echo "activation_plan: the dry run of $1 at $2 printed no plan" >&2; exit 1; }
  sed -E 's/.* in ([0-9]+) bytes, .*, ([0-9]+) unfused and unplanned .*/\1 \2/' <<<"$line"
}
csv=$out/activation-plan.csv md=$out/activation-plan.md
echo "model,opt_level,batch,before_bytes,planned_bytes,ratio,recompute_bytes,recompute_ratio" >"$csv"
{
  echo "# Activation + scratch bytes per rank, planned arena against each tensor in bytes of its own"
  echo
  echo "\`bash bench/activation_plan.sh\` at commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%d); batch $batch; the bytes do not depend on the machine."
  echo
  echo "| model | opt level | before (MiB) | planned (MiB) | planned / before | recompute (MiB) | recompute / before |"
  echo "|---|---|---:|---:|---:|---:|---:|"
} >"$md"
goals=0
for m in "${models[@]}"; do
  for l in "${levels[@]}"; do
    pb=$(plan "$m" "$l" false) # a failed dry run ends the script (set -e)
    ab=$(plan "$m" "$l" true)
    read -r planned before <<<"$pb"
    read -r again _ <<<"$ab"
    r=$(awk -v a="$planned" -v b="$before" 'BEGIN { printf "%.3f", a / b }')
    rr=$(awk -v a="$again" -v b="$before" 'BEGIN { printf "%.3f", a / b }')
    echo "$m,$l,$batch,$before,$planned,$r,$again,$rr" >>"$csv"
    awk -v m="$m" -v l="$l" -v b="$before" -v p="$planned" -v r="$r" -v a="$again" -v rr="$rr" \
      'BEGIN { M = 1048576; printf "| %s | %s | %.1f | %.1f | %s | %.1f | %s |\n", m, l, b / M, p / M, r, a / M, rr }' >>"$md"
    if [ "$l" = O2 ] && { [ "$m" = resnet20 ] || [ "$m" = wrn ]; }; then
      awk -v r="$r" 'BEGIN { exit !(r <= 0.5) }' ||
        { echo "goal missed: $m at O2 keeps ${r}x of its activation + scratch bytes (goal <= 0.5)"; goals=1; }
    fi
  done
done
cat "$md"
exit "$goals"
