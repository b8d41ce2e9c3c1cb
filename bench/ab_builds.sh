#!/usr/bin/env bash
# Two builds of mpdist side by side: each CONFIG trains ROUNDS times with build A and with build
# B, alternating (A B A B ...) so both see the same machine state, one process each (mpirun -np
# 1 --bind-to none, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS = THREADS). A run's rate is the
# median of its step records' images_per_s after the first window (log.metrics, written by the
# script to its own file); the table gives, per config, each build's median over the rounds
# and the median of the rounds' B/A ratios with their range. Odd rounds run A first, even rounds
# B first (ABBA), so neither always takes the colder start. For a change's effect where the
# machine's speed drifts more than the change (bench/cpu_speed.sh writes configs to use:
# runs/bench-cpu/MODEL-mpdist-LEVEL.cfg). Where the config has log.profile on, the table also
# gives each build's largest op other than GEMM/convolution (bench/profile_table.py --largest)
# in its worst round with that round's share of the step, and in brackets the range over the
# rounds of the largest share (whichever op had it).
#
# Usage: bench/ab_builds.sh BUILD_A BUILD_B CONFIG... [-- extra mpdist args]
#   BUILD_A, BUILD_B   build directories holding mpdist
#   MPDIST_AB_ROUNDS   rounds per config (default 3); MPDIST_AB_THREADS (default 2)
#   MPDIST_AB_TIMEOUT  seconds per run (default 900)
# Exits 1 when a run failed (its reason and the end of its log are printed, the other runs are
# still made and shown), 2 on a usage error.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
[ $# -ge 3 ] || { echo "usage: bench/ab_builds.sh BUILD_A BUILD_B CONFIG... [-- mpdist args] (see --help)" >&2; exit 2; }
a=$(realpath -m "$1") b=$(realpath -m "$2"); shift 2
configs=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do configs+=("$(realpath -m "$1")"); shift; done
[ "${1:-}" = -- ] && shift
extra=("$@")
[ ${#configs[@]} -gt 0 ] || { echo "usage: bench/ab_builds.sh BUILD_A BUILD_B CONFIG... [-- mpdist args] (see --help)" >&2; exit 2; }
for d in "$a" "$b"; do [ -x "$d/mpdist" ] || { echo "ab_builds: no mpdist in $d" >&2; exit 2; }; done
for c in "${configs[@]}"; do [ -f "$c" ] || { echo "ab_builds: no config $c" >&2; exit 2; }; done
rounds=${MPDIST_AB_ROUNDS:-3} tmo=${MPDIST_AB_TIMEOUT:-900} threads=${MPDIST_AB_THREADS:-2}
for v in "MPDIST_AB_ROUNDS=$rounds" "MPDIST_AB_TIMEOUT=$tmo" "MPDIST_AB_THREADS=$threads"; do
  [[ ${v#*=} =~ ^[1-9][0-9]*$ ]] || { echo "ab_builds: ${v%%=*} must be a positive integer, not '${v#*=}'" >&2; exit 2; }
done
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads
cd "$(dirname "$0")/.."
source launch/env.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0
# rate BUILD CONFIG: one run's images/s; when there is none, why (on stderr, with the run's error
# lines, else the end of its log) and nothing on stdout
rate() {
  local rc=0 steps
  rm -f "$tmp/m.jsonl"
  timeout "$tmo" mpirun -np 1 --bind-to none -x OMP_NUM_THREADS -x OPENBLAS_NUM_THREADS "$1/mpdist" \
    "$2" --set log.metrics="\"$tmp/m.jsonl\"" ${extra[@]+"${extra[@]}"} >"$tmp/log" 2>&1 || rc=$?
  steps=$(grep -c '"type":"step"' "$tmp/m.jsonl" 2>/dev/null || true)
  if [ "$rc" != 0 ] || [ "${steps:-0}" -lt 2 ]; then
    { [ "$rc" = 124 ] && echo "ab_builds: $1/mpdist $2: no end after $tmo s (MPDIST_AB_TIMEOUT)" ||
        echo "ab_builds: $1/mpdist $2: exit $rc, ${steps:-0} step record(s) (2 or more needed: the first window is dropped)"
      { grep -m 3 'error' "$tmp/log" || tail -5 "$tmp/log"; } | sed 's/^/    /'; } >&2
    return 0
  fi
  grep '"type":"step"' "$tmp/m.jsonl" | tail -n +2 | python3 -c '
import json, statistics, sys
print(round(statistics.median(json.loads(l)["images_per_s"] for l in sys.stdin), 1), end=" ")'
  python3 bench/profile_table.py --largest "$(grep '"type":"summary"' "$tmp/m.jsonl" | tail -1)" |
    tr ' ' ':'
}
echo "# A: $a  B: $b"
echo "# $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, $OMP_NUM_THREADS threads; $rounds rounds; $(date -u +%Y-%m-%dT%H:%MZ)"
printf '%-40s %10s %10s %10s %15s %24s %24s\n' config A_images/s B_images/s B/A_median B/A_range \
  A_largest_op_worst B_largest_op_worst
for c in "${configs[@]}"; do
  ra=() rb=() ratios=() oa=() ob=()
  for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) = 1 ]; then x=$(rate "$a" "$c") y=$(rate "$b" "$c"); else y=$(rate "$b" "$c") x=$(rate "$a" "$c"); fi
    if [ -z "$x" ] || [ -z "$y" ]; then
      echo "ab_builds: $c round $r: a run failed (A: ${x:-failed}, B: ${y:-failed})" >&2; rc=1; continue
    fi
    ra+=("${x% *}") rb+=("${y% *}") oa+=("${x#* }") ob+=("${y#* }")
    ratios+=("$(python3 -c "print(${y% *} / ${x% *})")")
  done
  [ ${#ra[@]} -gt 0 ] || continue
  python3 - "$(basename "$c" .cfg)" "${ra[*]}" "${rb[*]}" "${ratios[*]}" "${oa[*]}" "${ob[*]}" <<'P'
import statistics, sys
name, a, b, q = sys.argv[1], *[list(map(float, s.split())) for s in sys.argv[2:5]]
def worst(runs):  # "op:share" per round ("-:-" without a profile): the worst round, the range
    got = [(float(s), op) for op, s in (r.rsplit(":", 1) for r in runs.split()) if s != "-"]
    if not got:
        return "-"
    top = max(got)
    return f"{top[1]} {top[0]:.1f}% ({min(got)[0]:.1f}-{top[0]:.1f})"
print(f"{name:<40} {statistics.median(a):10.1f} {statistics.median(b):10.1f} "
      f"{statistics.median(q):10.3f} {min(q):7.3f}-{max(q):.3f} {worst(sys.argv[5]):>24} "
      f"{worst(sys.argv[6]):>24}")
P
done
exit $rc
