#!/usr/bin/env bash
# What a checkpoint costs the training steps, synchronous against checkpoint.async (issue 51):
# resnet20 (Fashion-MNIST) and gpt (configs/fortunes-gpt.cfg) on 2 ranks x 1 thread, a save every
# EVERY steps (none at the end), ROUNDS rounds alternating sync and async. From the metrics'
# checkpoint records: the step boundary's stall per save (rank 0's time from the end of the step
# to training on: synchronous, the whole save; async, waiting for the save before plus the
# snapshot), the file's write time, and the steps that ran while it was written; from the summary,
# steps per second over the whole loop (saves included). Medians over the saves and rounds; prints
# a markdown table and writes it to bench/results/ckpt-stall.md.
# Usage: bench/ckpt_stall.sh [ROUNDS] [EVERY]   (defaults 3 and 5; MPDIST_BENCH_BUILD: a built
# build dir)
set -euo pipefail
source "$(dirname "$0")/common.bash"
rounds=${1:-3} every=${2:-5}
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "ckpt_stall: ROUNDS must be 1-99" >&2; exit 2; }
[[ $every =~ ^[1-9][0-9]?$ ]] || { echo "ckpt_stall: EVERY must be 1-99" >&2; exit 2; }
bench_build
source launch/env.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=bench/results/ckpt-stall.md
declare -A cfg=([resnet20]="configs/fashion-mnist-cnn-bn.cfg --set model.preset=\"resnet20\" --set train.max_steps=$((8 * every))"
                [gpt]="configs/fortunes-gpt.cfg --set train.max_steps=$((6 * every))")
fields() { # METRICS: "stall write during" per checkpoint record, then "rate STEPS/S"
  /usr/bin/python3 -c 'import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
for r in recs:
    if r["type"] == "checkpoint":
        print("save %.6f %.6f %d %d" % (r["stall_s"], r["write_s"], r["steps_during_write"], r["bytes"]))
s = [r for r in recs if r["type"] == "summary"][-1]
print("rate %.4f" % (s["steps"] / s["wall_s"]))' "$1"
}
median() { tr ' ' '\n' | grep . | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
ms() { awk -v v="$1" 'BEGIN { printf "%.1f", 1000 * v }'; }
{
  echo "# Checkpoint stall per save, synchronous and checkpoint.async, $(date -u +%F) on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'))"
  echo
  echo "\`bash bench/ckpt_stall.sh $rounds $every\` at $(git rev-parse --short HEAD): 2 ranks x 1 thread, a save every"
  echo "$every steps into a directory under ${TMPDIR:-/tmp} (checkpoint.keep 2, no save at the end), $rounds rounds"
  echo "alternating. Stall: rank 0's time at the step boundary for the save (synchronous: gather,"
  echo "write, fsync, rename; async: waiting for the save before, gather and the copy into the host"
  echo "snapshot); write: the file's writing until durable under its name (async: on the writer"
  echo "thread, while training goes on). Medians over every save of every round."
  echo
  echo "| model | file MB | mode | stall per save ms | write ms | steps during a write | steps/s (saves included) |"
  echo "|---|---:|---|---:|---:|---:|---:|"
} >"$tmp/table"
for m in resnet20 gpt; do
  declare -A stall=() write=() during=() rate=()
  mb=0
  for r in $(seq "$rounds"); do
    for mode in sync async; do
      rm -rf "$tmp/ck" "$tmp/m.jsonl"
      # shellcheck disable=SC2086
      mpirun -np 2 --bind-to core "$build/mpdist" ${cfg[$m]} --set log.progress='"none"' \
        --set train.eval_every=0 --set "log.metrics=\"$tmp/m.jsonl\"" \
        --set "checkpoint.dir=\"$tmp/ck\"" --set checkpoint.every_steps=$every \
        --set checkpoint.keep=2 --set checkpoint.at_end=false \
        --set checkpoint.async=$([ $mode = async ] && echo true || echo false) >"$tmp/out" 2>&1 ||
        { echo "ckpt_stall: $m $mode failed:" >&2; tail -5 "$tmp/out" >&2; exit 1; }
      fields "$tmp/m.jsonl" >"$tmp/f"
      stall[$mode]="${stall[$mode]:-} $(awk '$1 == "save" { printf " %s", $2 }' "$tmp/f")"
      write[$mode]="${write[$mode]:-} $(awk '$1 == "save" { printf " %s", $3 }' "$tmp/f")"
      during[$mode]="${during[$mode]:-} $(awk '$1 == "save" { printf " %s", $4 }' "$tmp/f")"
      rate[$mode]="${rate[$mode]:-} $(awk '$1 == "rate" { print $2 }' "$tmp/f")"
      mb=$(awk '$1 == "save" { b = $5 } END { printf "%.1f", b / 1e6 }' "$tmp/f")
      echo "$m round $r $mode: stall$(awk '$1 == "save" { printf " %.4f", $2 }' "$tmp/f") s; $(awk '$1 == "rate" { print $2 }' "$tmp/f") steps/s" >&2
    done
  done
  for mode in sync async; do
    echo "| $m | $mb | $mode | $(ms "$(echo ${stall[$mode]} | median)") | $(ms "$(echo ${write[$mode]} | median)") | $(echo ${during[$mode]} | median) | $(echo ${rate[$mode]} | median) |" >>"$tmp/table"
  done
  unset stall write during rate
done
cp "$tmp/table" "$out"
cat "$out"
