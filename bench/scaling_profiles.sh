#!/usr/bin/env bash
# Step profiles for the scaling model (cluster/step_model.py, docs/scaling.md): for each preset
# and opt level one rank trains STEPS steps twice, with log.profile = true (the per-op table and
# the metrics' "backward" record: each gradient's bytes and when backward completed it; on a GPU
# the device is synchronised around every op) and without (the step's own time, the median of
# the step records after the first); cluster/make_profile.py then writes OUT/PRESET-OPT.json with
# the profiled run's phases and ready times scaled to the unprofiled step.
# Presets: bench/presets.bash (resnet20 and wrn16-4 on synthetic 32x32x3 data, gpt on the fortunes
# text).
#
# Usage: bench/scaling_profiles.sh [OUT]     (default bench/results/scaling-profiles)
#   MPDIST_BIN               mpdist (default build/mpdist)
#   MPDIST_SCALING_DEVICE    cuda (default) or cpu
#   MPDIST_SCALING_MODELS    default "resnet20 wrn16-4 gpt"
#   MPDIST_SCALING_OPTS      default "O0 O2"
#   MPDIST_SCALING_STEPS     default 60 (log.every 10; at least 20)
#   MPDIST_SCALING_FORTUNES  the fortunes text for gpt (default: its config's data.path)
#   MPDIST_SCALING_BATCH     one batch for every preset (default: resnet20 128, wrn16-4 512,
#                            gpt the config's 32, the batches of the GPU step table)
# Exits 2 when it cannot start, 1 when a run failed (its log named).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
home=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$home/bench/results/scaling-profiles}
case $out in /*) ;; *) out=$PWD/$out ;; esac # the runs below change directory
bin=${MPDIST_BIN:-$home/build/mpdist}
device=${MPDIST_SCALING_DEVICE:-cuda}
steps=${MPDIST_SCALING_STEPS:-60}
die() { echo "scaling_profiles: $*" >&2; exit 2; }
[ -x "$bin" ] || die "$bin: no mpdist (build it, or set MPDIST_BIN)"
[[ $device = cuda || $device = cpu ]] || die "MPDIST_SCALING_DEVICE must be cuda or cpu"
[[ $steps =~ ^[0-9]+$ ]] && [ "$steps" -ge 20 ] || die "MPDIST_SCALING_STEPS must be 20 or more"
source "$home/bench/presets.bash"
presets_check scaling_profiles ${MPDIST_SCALING_MODELS:-resnet20 wrn16-4 gpt}
mkdir -p "$out/runs"
source "$home/launch/env.sh"
for model in ${MPDIST_SCALING_MODELS:-resnet20 wrn16-4 gpt}; do
  FORTUNES=${MPDIST_SCALING_FORTUNES:-} preset_args "$model"
  batch=${MPDIST_SCALING_BATCH:-$batch}
  for opt in ${MPDIST_SCALING_OPTS:-O0 O2}; do
    for prof in true false; do
      tag=$model-$opt
      [ $prof = false ] || tag+=-profiled
      echo "scaling_profiles: $tag"
      rm -f "$out/runs/$tag.jsonl"
      bind=() # a GPU rank not bound to one core (its loader's threads); the CPU's threads stay
      [ "$device" = cpu ] || bind=(--bind-to none)
      (cd "$home" && mpirun -np 1 ${bind[@]+"${bind[@]}"} "$bin" "$cfg" "${args[@]}" --set amp.device="$device" \
        --set amp.opt_level="$opt" --set data.batch_size="$batch" --set data.drop_last=true --set data.test_limit="$batch" \
        --set train.max_steps="$steps" --set train.eval_every=0 --set log.every=10 \
        --set log.progress=none --set log.profile=$prof --set "log.metrics=\"$out/runs/$tag.jsonl\"" \
        --set checkpoint.dir=\"\") \
        >"$out/runs/$tag.log" 2>&1 || { tail -3 "$out/runs/$tag.log" >&2; echo "scaling_profiles: $tag failed (log: $out/runs/$tag.log)" >&2; exit 1; }
    done
    step_ms=$(python3 -c '
import json, statistics, sys
ms = [r["step_ms"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"][1:]
print(statistics.median(ms))' "$out/runs/$model-$opt.jsonl")
    python3 "$home/cluster/make_profile.py" "$out/runs/$model-$opt-profiled.jsonl" -o "$out/$model-$opt.json" \
      --name "$model $opt, batch $batch ($device)" --step-ms "$step_ms" \
      --source "bench/scaling_profiles.sh on $(hostname), $(date -u +%FT%TZ): $device, mpdist $(cd "$home" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $steps steps, unprofiled step $step_ms ms"
  done
done
echo "scaling_profiles: $out/*.json"
