#!/usr/bin/env bash
# Per-op profiles on both clocks (docs/usage.md, log.profile_clock): for each preset of
# bench/presets.bash and each opt level, one rank trains STEPS steps with log.profile = true twice,
# on the host clock (the device synchronised around every op: an op's launches and its kernels)
# and on the device clock (CUDA events, nothing waits: the device's time per op), and OUT/profiles.md
# puts the two tables side by side (bench/profile_table.py --beside). An op much longer on the
# host clock than on the device's is bound by its launches; one as long on both, by its kernels.
# The unprofiled step is the device clock's run's (its step records).
#
# Usage: bench/gpu_profiles.sh [OUT]     (default runs/gpu-profiles)
#   MPDIST_BIN                mpdist (default build/mpdist)
#   MPDIST_PROFILES_DEVICE    cuda (default) or cpu (the script's own check: both clocks agree)
#   MPDIST_PROFILES_MODELS    default "resnet20 wrn16-4 gpt"
#   MPDIST_PROFILES_OPTS      default "O2"
#   MPDIST_PROFILES_BATCHES   batches for every preset (default: the preset's; e.g. "128 512")
#   MPDIST_PROFILES_STEPS     default 60 (at least 12)
#   MPDIST_PROFILES_FORTUNES  the fortunes text for gpt (default: its config's data.path)
# Exits 2 when it cannot start, 1 when a run failed (its log named).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
home=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$home/runs/gpu-profiles}
bin=${MPDIST_BIN:-$home/build/mpdist}
device=${MPDIST_PROFILES_DEVICE:-cuda}
steps=${MPDIST_PROFILES_STEPS:-60}
die() { echo "gpu_profiles: $*" >&2; exit 2; }
[ -x "$bin" ] || die "$bin: no mpdist (build it, or set MPDIST_BIN)"
[[ $device = cuda || $device = cpu ]] || die "MPDIST_PROFILES_DEVICE must be cuda or cpu"
[[ $steps =~ ^[0-9]+$ ]] && [ "$steps" -ge 12 ] || die "MPDIST_PROFILES_STEPS must be 12 or more"
for b in ${MPDIST_PROFILES_BATCHES:-}; do
  [[ $b =~ ^[1-9][0-9]*$ ]] || die "MPDIST_PROFILES_BATCHES: '$b' is not a batch size"
done
source "$home/bench/presets.bash"
presets_check gpu_profiles ${MPDIST_PROFILES_MODELS:-resnet20 wrn16-4 gpt}
mkdir -p "$out/runs"
source "$home/launch/env.sh"
bind=() # a GPU rank not bound to one core (its loader's threads); the CPU's threads stay
[ "$device" = cpu ] || bind=(--bind-to none)
summary() { grep '"type":"summary"' "$1" | tail -1; }
table=$out/profiles.md
{
  echo "# Per-op profiles, host clock beside device clock"
  echo
  echo "bench/gpu_profiles.sh on $(hostname), $(date -u +%FT%TZ): $device, mpdist" \
    "$(cd "$home" && git rev-parse --short HEAD 2>/dev/null || echo '?'), $steps steps a run," \
    "ms per step of the steps after the first; ratio = device / host."
} >"$table"
for model in ${MPDIST_PROFILES_MODELS:-resnet20 wrn16-4 gpt}; do
  FORTUNES=${MPDIST_PROFILES_FORTUNES:-} preset_args "$model"
  for batch in ${MPDIST_PROFILES_BATCHES:-$batch}; do
    for opt in ${MPDIST_PROFILES_OPTS:-O2}; do
      for clock in host device; do
        tag=$model-b$batch-$opt-$clock
        echo "gpu_profiles: $tag"
        rm -f "$out/runs/$tag.jsonl"
        (cd "$home" && mpirun -np 1 ${bind[@]+"${bind[@]}"} "$bin" "$cfg" "${args[@]}" --set amp.device="$device" \
          --set amp.opt_level="$opt" --set data.batch_size="$batch" --set data.drop_last=true --set data.test_limit="$batch" \
          --set train.max_steps="$steps" --set train.eval_every=0 --set log.every=10 --set log.progress=none \
          --set log.profile=true --set log.profile_clock="\"$clock\"" --set "log.metrics=\"$out/runs/$tag.jsonl\"" \
          --set checkpoint.dir=\"\") \
          >"$out/runs/$tag.log" 2>&1 || { tail -3 "$out/runs/$tag.log" >&2; echo "gpu_profiles: $tag failed (log: $out/runs/$tag.log)" >&2; exit 1; }
        summary "$out/runs/$tag.jsonl" >/dev/null || die "$tag: no summary record in $out/runs/$tag.jsonl"
      done
      base=$out/runs/$model-b$batch-$opt
      step_ms=$(python3 -c '
import json, statistics, sys
ms = [r["step_ms"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"][1:]
print("%.3f" % statistics.median(ms))' "$base-device.jsonl")
      {
        echo
        echo "## $model, batch $batch, $opt (unprofiled-speed step on the device clock: $step_ms ms, median)"
        echo
        python3 "$home/bench/profile_table.py" --names host device --beside "$(summary "$base-device.jsonl")" \
          "$(summary "$base-host.jsonl")"
      } >>"$table"
    done
  done
done
echo "gpu_profiles: $table"
