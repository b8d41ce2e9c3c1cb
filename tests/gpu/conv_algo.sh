#!/usr/bin/env bash
# The convolution-algorithm stage of tests/gpu/run.sh (issue 48): amp.conv_algo = "timed" (cuDNN's
# algorithms timed once per shape, the fastest kept, as PyTorch's cudnn.benchmark) against
# "heuristic" (cuDNN's first listed), on one rank, synthetic CIFAR-shaped data (32x32x3):
#   - correctness: resnet20 O2 fp16 and O0, batch 128, 20 steps with log.profile: each run trains,
#     prints its convolution plans after the profile (forward, backward data and backward filter),
#     each plan saying how it was chosen ("timed N ms" or "heuristic"), and the two runs' final
#     losses differ by at most 5% of the untrained loss ln 10 (other algorithms, other rounding,
#     the same training: near convergence 5% of the loss itself is noise between such runs);
#     half plans (O2) stay NHWC, and how many of O0's timed FP32 plans chose NCHW (the trial
#     times that layout too, with its copies) is reported
#   - speed: WRN-16-4 batch 512 (the issue's slowest row) at O0 and O2 fp16, 60 steps logged
#     every 20, heuristic and timed alternating, ROUNDS rounds each (default 2): images/s from
#     each run's summary, the median of each and their ratio
# Usage: tests/gpu/conv_algo.sh BUILD OUT      (BUILD has mpdist; OUT gets the runs and
# conv-algo.txt, one line per check or row). MPDIST_GPU_CONV_ROUNDS sets ROUNDS,
# MPDIST_GPU_CONV_SPEED=0 skips the speed rows. Exits 1 when a check failed. Needs a GPU.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:?build directory} out=${2:?output directory}
cd "$(dirname "$0")/../.."
mpdist=$build/mpdist
rounds=${MPDIST_GPU_CONV_ROUNDS:-2} speed=${MPDIST_GPU_CONV_SPEED:-1}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "conv_algo: MPDIST_GPU_CONV_ROUNDS must be a positive integer (got '$rounds')" >&2; exit 2; }
[[ $speed =~ ^[01]$ ]] || { echo "conv_algo: MPDIST_GPU_CONV_SPEED must be 0 or 1 (got '$speed')" >&2; exit 2; }
[ -x "$mpdist" ] || { echo "conv_algo: no mpdist in $build" >&2; exit 2; }
mkdir -p "$out"
report=$out/conv-algo.txt
source tests/gpu/checks.bash
common=(configs/cifar-wrn16-4.cfg --set 'amp.device="cuda"' --set 'data.format="synthetic"'
  --set data.synthetic_test=128 --set 'data.synthetic_shape=[32,32,3]' --set train.epochs=1
  --set train.eval_every=0 --set log.progress=plain)
# run NAME ALGO [ARGS]: metrics to $out/NAME.jsonl, output to $out/NAME.out
run() {
  local name=$1 algo=$2
  shift 2
  rm -f "$out/$name.jsonl"
  timeout "${MPDIST_GPU_RUN_TIMEOUT:-600}" "$mpdist" "${common[@]}" --set "amp.conv_algo=\"$algo\"" \
    --set "log.metrics=\"$out/$name.jsonl\"" "$@" >"$out/$name.out" 2>&1
}
plans() { sed -n '/^convolution plans (cuDNN): /,$p' "$out/$1.out" | grep '^  conv2d_' || true; }
# chosen NAME HOW: the run printed plans of all three directions, every one chosen by HOW
chosen() {
  local p dir
  p=$(plans "$1")
  [ -n "$p" ] || { echo "no convolution plans in $out/$1.out"; return 1; }
  for dir in forward backward_data backward_filter; do
    grep -q "^  conv2d_$dir " <<<"$p" || { echo "no conv2d_$dir plan"; return 1; }
  done
  case $2 in
  timed) ! grep -vqE ', timed [0-9.]+ ms$' <<<"$p" ;;
  heuristic) ! grep -vq ', heuristic$' <<<"$p" ;;
  esac
}
last_loss() { sed -nE 's/.*"type":"step".*"loss":([0-9.e+-]+).*/\1/p' "$out/$1.jsonl" | tail -1; }
close_losses() {
  local a b
  a=$(last_loss "$1") b=$(last_loss "$2")
  awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d;
    exit !(a != "" && b != "" && a == a + 0 && b == b + 0 && d <= 0.05 * log(10)) }'
}

for level in O2 O0; do
  args=(--set 'model.preset="resnet20"' --set model.depth=20 --set "amp.opt_level=\"$level\""
    --set data.batch_size=128 --set data.synthetic_train=2560 --set train.max_steps=20
    --set log.every=10 --set log.profile=true)
  check "$level: the timed run trains" run "timed-$level" timed "${args[@]}"
  check "$level: the heuristic run trains" run "heuristic-$level" heuristic "${args[@]}"
  check "$level: the timed run's plans are timed ($(plans "timed-$level" | wc -l) plans)" chosen "timed-$level" timed
  check "$level: the heuristic run's plans are cuDNN's heuristic ones" chosen "heuristic-$level" heuristic
  check "$level: final losses within 5% of the untrained loss ln 10 (timed $(last_loss "timed-$level"), heuristic $(last_loss "heuristic-$level"))" \
    close_losses "timed-$level" "heuristic-$level"
  plans "timed-$level" >"$out/plans-timed-$level.txt"
  nchw=$(grep -c ', NCHW, ' "$out/plans-timed-$level.txt" || true)
  if [ "$level" = O2 ]; then
    check "O2: every half plan runs NHWC ($nchw NCHW)" test "$nchw" = 0
  else
    say "O0: $nchw of $(wc -l <"$out/plans-timed-$level.txt") timed FP32 plans chose NCHW"
  fi
done

[ "$speed" = 0 ] && levels=() || levels=(O0 O2)
for level in ${levels[@]+"${levels[@]}"}; do
  alternate "$out/speed-$level.txt" "$rounds" "speed-$level" heuristic timed \
    --set "amp.opt_level=\"$level\"" --set data.batch_size=512 --set data.synthetic_train=30720 \
    --set train.max_steps=60 --set log.every=20
  h=$(medians "$out/speed-$level.txt" heuristic) t=$(medians "$out/speed-$level.txt" timed)
  say "$(awk -v l="$level" -v r="$rounds" -v h="$h" -v t="$t" 'BEGIN {
    printf "WRN-16-4 %s batch 512, %d rounds of 60 steps: heuristic %.0f images/s, timed %.0f images/s (medians), timed / heuristic %.2f", l, r, h, t, (h > 0 ? t / h : 0) }')"
done
exit $((failures > 0))
