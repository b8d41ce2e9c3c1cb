#!/usr/bin/env bash
# What log.trace costs (issue 51): the same run with and without a timeline, alternating, on 2
# ranks x 1 thread: the MLP (many short steps, the worst case for per-event costs) and resnet20
# (many layers a step). Prints a table of the median steps/s per model (mpdist's own figure:
# steps over time_s.steps of the metrics' summary, set-up and evaluation left out), the ratio
# traced/plain, and the events a step wrote; writes it to bench/results/trace-overhead.md.
# Usage: bench/trace_overhead.sh [ROUNDS]   (default 5; MPDIST_BENCH_BUILD: a built build dir)
set -euo pipefail
source "$(dirname "$0")/common.bash"
bench_build
rounds=${1:-5}
[[ $rounds =~ ^[1-9][0-9]?$ ]] || { echo "trace_overhead: ROUNDS must be 1-99" >&2; exit 2; }
source launch/env.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=bench/results/trace-overhead.md
declare -A cfg=([mlp]="configs/fashion-mnist-mlp.cfg --set train.max_steps=2000"
                [resnet20]="configs/fashion-mnist-cnn-bn.cfg --set model.preset=\"resnet20\" --set train.max_steps=40")
rate() { # METRICS: steps per second of the run's summary
  /usr/bin/python3 -c 'import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]
print("%.2f" % (s["steps"] / s["time_s"]["steps"]))' "$1"
}
median() { tr ' ' '\n' | sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }
{
  echo "# log.trace overhead, $(date -u +%F) on $(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p'))"
  echo
  echo "\`bash bench/trace_overhead.sh $rounds\` at $(git rev-parse --short HEAD): 2 ranks x 1 thread, $rounds rounds"
  echo "alternating plain and traced (the ratio is taken within each round); steps/s from the"
  echo "metrics' summary, medians."
  echo
  echo "| model | steps/s plain | steps/s traced | traced/plain, median of the rounds' (range) | events per step and rank |"
  echo "|---|---:|---:|---:|---:|"
} >"$tmp/table"
for m in mlp resnet20; do
  plain="" traced="" ratios=""
  for r in $(seq "$rounds"); do
    for mode in plain traced; do
      extra=()
      [ "$mode" = traced ] && extra=(--set "log.trace=\"$tmp/tr-$m\"")
      # shellcheck disable=SC2086
      mpirun -np 2 --bind-to core "$build/mpdist" ${cfg[$m]} --set log.progress='"none"' \
        --set train.eval_every=0 --set "log.metrics=\"$tmp/m.jsonl\"" "${extra[@]}" >"$tmp/out" 2>&1 ||
        { echo "trace_overhead: $m $mode failed:" >&2; tail -5 "$tmp/out" >&2; exit 1; }
      v=$(rate "$tmp/m.jsonl")
      rm -f "$tmp/m.jsonl"
      if [ "$mode" = plain ]; then
        plain="$plain $v" last=$v
      else
        traced="$traced $v" ratios="$ratios $(awk -v a="$v" -v b="$last" 'BEGIN { printf "%.4f", a / b }')"
      fi
      echo "$m round $r $mode: $v steps/s" >&2
    done
  done
  p=$(echo $plain | median) t=$(echo $traced | median)
  steps=$(sed -n 's/^done: \([0-9]*\) steps.*/\1/p' "$tmp/out")
  events=$(grep -c '"ph":"X"' "$tmp/tr-$m/rank-0.json")
  echo "| $m | $p | $t | $(echo $ratios | median) ($(echo $ratios | tr ' ' '\n' | sort -g | sed -n '1p;$p' | paste -sd-)) | $((events / steps)) |" >>"$tmp/table"
done
cp "$tmp/table" "$out"
cat "$out"
