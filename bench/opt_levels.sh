#!/usr/bin/env bash
# The seed articles' table: trains the Fashion-MNIST MLP and cnn_bn at O0, O1, O2, O3 (fp16)
# and O2 (bf16) on 2 ranks, side by side, and prints level, wall time, images/s, peak bytes by
# category, test loss and accuracy, skipped steps and the final loss scale
# (runs/bench-opt/table.txt and table.csv), and draws each model's loss curves at every level in
# one PNG (gnuplot; for gpt also the validation loss at each epoch's end).
# Usage: bench/opt_levels.sh [MODEL...] [-- extra mpdist args]
#   MODEL: mlp, cnn_bn, vit (configs/fashion-mnist-vit.cfg), gpt (configs/fortunes-gpt.cfg;
#   its accuracy is per byte, its test loss per byte in nats)
# On the GPU: bench/opt_levels.sh cnn_bn -- --set amp.device=cuda. MPDIST_BENCH_BUILD=DIR uses
# DIR/mpdist as built (no package check, no build: tests/gpu/run.sh sets it up). Packages are
# checked, not installed: a missing one stops it with exit 2 and the command that installs it.
# MPDIST_BENCH_LEVELS="O2 fp16;O0 fp16" runs only those levels (default: all five).
# MPDIST_BENCH_KEEP=1 keeps a run whose metrics file already ends with its summary (a sweep
# stopped half way goes on where it stopped) instead of running it again.
# Exit 1, after the table, when a run failed (its row says why, with n/a for its figures) or a
# plot did (gnuplot's message on stderr).
set -euo pipefail
source "$(dirname "$0")/common.bash"
bench_build gnuplot-nox
source launch/env.sh
models=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do models+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
[ ${#models[@]} -gt 0 ] || models=(mlp cnn_bn)
np=${MPDIST_BENCH_RANKS:-2}
[[ $np =~ ^[1-9][0-9]*$ ]] ||
  { echo "bench/opt_levels.sh: MPDIST_BENCH_RANKS must be a whole number >= 1 (got '$np')" >&2; exit 2; }
runs=("O0 fp16" "O1 fp16" "O2 fp16" "O3 fp16" "O2 bf16")
[ -z "${MPDIST_BENCH_LEVELS:-}" ] || IFS=';' read -r -a runs <<<"$MPDIST_BENCH_LEVELS"
for r in "${runs[@]}"; do
  [[ $r =~ ^\ *O[0-3]\ +(fp16|bf16)\ *$ ]] ||
    { echo "bench/opt_levels.sh: MPDIST_BENCH_LEVELS: '$r' is not a level and half type (\"O2 fp16\")" >&2; exit 2; }
done
for model in "${models[@]}"; do
  case $model in mlp | cnn_bn | vit | gpt) ;;
    *) echo "bench/opt_levels.sh: unknown model '$model' (mlp, cnn_bn, vit, gpt)" >&2; exit 2 ;;
  esac
done
# (after the arguments are checked: a refused call leaves the last table as it was)
out=runs/bench-opt
mkdir -p "$out"
csv=$out/table.csv
echo "model,level,half,status,wall_s,images_per_s,weights,master,grads,optim,activations,test_accuracy,skipped_steps,loss_scale,test_loss" >"$csv"
num() { sed -n "s/.*\"$1\":\\([^,}]*\\).*/\\1/p" "$2" | tail -1; }
# gnuplot's message from its stderr: the first error line ("line 0: ..."), not the command it
# may echo first nor a warning; else its last line.
gnuplot_error() { awk '/^(".*" )?line [0-9]+: / && !/warning:/ { print; found = 1; exit }
  NF { last = $0 } END { if (!found) print last }' <<<"$1"; }
failed=0
for model in "${models[@]}"; do
  case $model in
    cnn_bn) cfg=configs/fashion-mnist-cnn-bn.cfg ;;
    vit) cfg=configs/fashion-mnist-vit.cfg ;;
    gpt) cfg=configs/fortunes-gpt.cfg ;;
    mlp) cfg=configs/fashion-mnist-mlp.cfg ;;
  esac
  for r in "${runs[@]}"; do
    set -- $r
    tag=$model-$1-$2
    m=$out/$tag.jsonl
    rc=0
    if [ "${MPDIST_BENCH_KEEP:-0}" = 1 ] && tail -1 "$m" 2>/dev/null | grep -q '"type":"summary"'; then
      echo "bench: $tag: kept $m" >&2
    else
      rm -f "$m"
      ck=(); [ "$model" != gpt ] || ck=(--set checkpoint.dir="\"$out/ckpt-$tag\"") # for sampling
      mpirun -np "$np" "$build/mpdist" "$cfg" --set amp.opt_level=$1 --set amp.half=$2 \
        --set log.progress=none --set log.every=20 --set "log.metrics=\"$m\"" "${ck[@]}" \
        "${extra[@]}" >"$out/$tag.log" 2>&1 || rc=$?
    fi
    s=
    [ $rc != 0 ] || s=$(grep '"type":"summary"' "$m" 2>/dev/null || true)
    if [ -n "$s" ]; then
      top=${s%%\"amp\":*} # the record's own fields, before the opt-level table
      mem() { sed -n "s/.*\"$1\":\\([0-9]*\\).*/\\1/p" <<<"${s#*mem_bytes}"; }
      tl=$({ grep '"type":"eval"' "$m" || true; } | tail -1 | sed -n 's/.*"loss":\([^,}]*\).*/\1/p')
      echo "$model,$1,$2,ok,$(num wall_s <(echo "$top")),$(num images_per_s <(echo "$top")),$(mem weights),$(mem master),$(mem grads),$(mem optim),$(mem activations),$(num accuracy <(echo "$top")),$(num skipped_steps <(echo "$top")),$(num loss_scale <(echo "$top")),$tl" >>"$csv"
    else
      why=$({ grep -m1 '^mpdist: error:' "$out/$tag.log" || true; } | sed 's/^mpdist: error: //; s/,/;/g')
      [ $rc != 0 ] || why="no summary record in $m (log.metrics set in the arguments?)"
      echo "$model,$1,$2,exit $rc: ${why:-see $out/$tag.log},,,,,,,,,,," >>"$csv"
      failed=1
    fi
    grep '"type":"step"' "$m" 2>/dev/null | sed -E 's/.*"step":([0-9]+).*"loss":([^,]*).*/\1 \2/' >"$out/$tag.dat" || true
    spe=$({ sed -nE 's/.*\(([0-9]+) per epoch\).*/\1/p' "$out/$tag.log" 2>/dev/null || true; } | head -1)
    grep '"type":"eval"' "$m" 2>/dev/null | sed -E 's/.*"epoch":([0-9]+).*"loss":([^,}]*).*/\1 \2/' |
      awk -v spe="${spe:-1}" '{ print ($1 + 1) * spe, $2 }' >"$out/$tag.eval" || true
  done
  plot="set terminal pngcairo size 900,540 noenhanced; set output '$out/loss-$model.png'; set title 'Fashion-MNIST $model: training loss by opt level ($np ranks)'; set xlabel 'step'; set ylabel 'loss (mean over ranks)'; set logscale y; set key top right; plot"
  sep=""
  for r in "${runs[@]}"; do set -- $r; plot="$plot$sep '$out/$model-$1-$2.dat' using 1:2 with lines title '$1 $2'"; sep=","; done
  if [ "$model" = gpt ]; then # the validation loss at each epoch's end, on the same axes
    for r in "${runs[@]}"; do set -- $r; plot="$plot, '$out/$model-$1-$2.eval' using 1:2 with linespoints lw 2 title '$1 $2 validation'"; done
    plot=${plot/training loss by opt level/training and validation loss (nats per byte) by opt level}
    plot=${plot/Fashion-MNIST gpt/fortunes gpt}
  fi
  if ! command -v gnuplot >/dev/null; then
    echo "bench: gnuplot missing, no plot" >&2
  elif err=$(gnuplot -e "$plot" 2>&1); then
    [ -z "$err" ] || echo "$err" >&2 # its warnings (a failed run's curve without points)
  else
    echo "bench: gnuplot failed, no $out/loss-$model.png: $(gnuplot_error "$err")" >&2
    failed=1
  fi
done
# A failed run has no figures: n/a, not the zeros its empty fields would print as.
awk -F, 'function f(fmt, v) { return $4 == "ok" ? sprintf(fmt, v) : "n/a" }
  NR == 1 { printf "%-7s %-3s %-5s %8s %9s %9s %9s %9s %9s %11s %9s %9s %8s %9s  %s\n", "model", "lvl", "half", "wall_s", "images/s", "weights", "master", "grads", "optim", "activations", "test_loss", "accuracy", "skipped", "scale", "status"; next }
  { printf "%-7s %-3s %-5s %8s %9s %9s %9s %9s %9s %11s %9s %9s %8s %9s  %s\n", $1, $2, $3, f("%.1f", $5), f("%.0f", $6), f("%.2f", $7/1048576), f("%.2f", $8/1048576), f("%.2f", $9/1048576), f("%.2f", $10/1048576), f("%.2f", $11/1048576), f("%.4f", $15), f("%.4f", $12), f("%d", $13), f("%g", $14), $4 }' "$csv" | tee "$out/table.txt"
echo "(bytes in MiB: peak per rank, from the engine's allocator counters; plots: $out/loss-*.png)"
[ "$failed" = 0 ] || { echo "bench/opt_levels.sh: a run or a plot failed (the status column, the messages above)" >&2; exit 1; }
