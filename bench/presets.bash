# The GPU step profiles' presets (bench/scaling_profiles.sh, bench/gpu_profiles.sh), sourced:
# preset_args MODEL sets cfg, batch and args (an array of --set options) for resnet20 (batch 128)
# and wrn16-4 (batch 512) on synthetic 32x32x3 data (configs/cifar-wrn16-4.cfg) and gpt on the
# fortunes text (configs/fortunes-gpt.cfg, batch 32; FORTUNES, when set, its data.path): the
# batches of the GPU step table. Returns 1 for another name.
preset_args() {
  case $1 in
    resnet20) cfg=configs/cifar-wrn16-4.cfg batch=128 args=(--set model.preset=resnet20 --set model.depth=20) ;;
    wrn16-4) cfg=configs/cifar-wrn16-4.cfg batch=512 args=() ;;
    gpt) cfg=configs/fortunes-gpt.cfg batch=32 args=()
      [ -z "${FORTUNES:-}" ] || args=(--set "data.path=\"$FORTUNES\"") ;;
    *) return 1 ;;
  esac
}

# presets_check WHO MODEL...: exits 2 with one line "WHO: unknown preset 'M' (...)" for the first
# MODEL preset_args does not know, before a script writes anything; sets nothing.
presets_check() {
  local who=$1 m
  shift
  for m in "$@"; do
    (preset_args "$m") || { echo "$who: unknown preset '$m' (resnet20, wrn16-4, gpt)" >&2; exit 2; }
  done
}
