#!/usr/bin/env bash
# Trains the shipped Fashion-MNIST MLP config on 1, 2 and 4 ranks side by side and prints a
# table (and runs/bench-ranks/ranks.csv): ranks, global batch, steps, wall time, images/s,
# test accuracy, peak bytes (peak_mem_bytes). On a 2-core machine 4 ranks oversubscribe the
# cores, so the table shows the cost of that, not scaling. Usage: bench/ranks.sh [RANKS...] [-- mpdist args]
set -euo pipefail
source "$(dirname "$0")/common.bash"
source launch/env.sh
bench_build
ranks=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do ranks+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2 4)
for np in "${ranks[@]}"; do
  [[ $np =~ ^[1-9][0-9]*$ ]] || { echo "bench/ranks.sh: a rank count must be a whole number >= 1 (got '$np')" >&2; exit 2; }
done
out=runs/bench-ranks
mkdir -p "$out"
echo "ranks,global_batch,steps,wall_s,images_per_s,test_accuracy,peak_mem_bytes" >"$out/ranks.csv"
for np in "${ranks[@]}"; do
  m=$out/np$np.jsonl
  rm -f "$m" # an earlier run's records are never read as this one's
  mpirun -np "$np" "$build/mpdist" configs/fashion-mnist-mlp.cfg --set log.progress=none \
    --set "log.metrics=\"$m\"" "$@" >"$out/np$np.log" 2>&1 ||
    { echo "bench: $np ranks failed:" >&2; tail -5 "$out/np$np.log" >&2; exit 1; }
  grep -q '"type":"summary"' "$m" 2>/dev/null ||
    { echo "bench: $np ranks: no summary record in $m (log.metrics set in the arguments?)" >&2; exit 1; }
  tail -1 "$m" | sed -E 's/.*"world_size":([0-9]+).*"wall_s":([0-9.e+-]+),"images_per_s":([0-9.e+-]+),"accuracy":([0-9.e+-]+).*"steps":([0-9]+).*"peak_mem_bytes":([0-9]+).*/\1 \2 \3 \4 \5 \6/' |
    { read -r w wall ips acc steps peak
      batch=$(( $(sed -n 's/.*global batch \([0-9]*\).*/\1/p' "$out/np$np.log") ))
      echo "$w,$batch,$steps,$wall,$ips,$acc,$peak" >>"$out/ranks.csv"; }
done
awk -F, 'NR == 1 { printf "%-6s %-13s %-7s %-9s %-10s %-14s %s\n", "ranks", "global_batch", "steps", "wall_s", "images/s", "test_accuracy", "peak_MiB"; next }
  { printf "%-6s %-13s %-7s %-9.1f %-10.0f %-14.4f %.1f\n", $1, $2, $3, $4, $5, $6, $7 / 1048576 }' "$out/ranks.csv"
