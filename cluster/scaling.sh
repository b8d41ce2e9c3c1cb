#!/usr/bin/env bash
# A scaling study: trains CONFIG at each rank count and opt level, collects the summary records
# into one CSV, prints a Markdown table, draws PNG plots with gnuplot (throughput vs ranks with
# the ideal line, efficiency vs ranks, and the per-step time split into compute, exposed
# communication and input wait), and runs the alpha-beta scaling model (cluster/scaling_model.py)
# on the measured single-rank step times.
# Usage: cluster/scaling.sh CONFIG [options] [-- mpdist arguments]
#        cluster/scaling.sh --predict --profile P.json --cluster C.cluster [options]: the scaling
#                     model on measured step profiles and cluster files, 1 to 1,024 GPUs, no run
#                     (cluster/predict.py --help; docs/scaling.md)
#   --ranks "1 2 4"   rank counts (default "1 2 4")
#   --opt "O0 O2"     opt levels (default "O0 O2")
#   --mode weak|strong  weak: --batch is per rank; strong: --batch is the global batch, split
#                     over the ranks (default weak)
#   --batch N         (default 64)
#   --steps N         training steps per run (default 200)
#   --out DIR         results (default runs/scaling, under the current directory; the
#                     committed study is in bench/results/scaling): scaling.csv, scaling.md,
#                     *.png, model.md, runs/ (metrics and logs)
#   --submit          run each combination as a Slurm job (cluster/slurm/mpdist-1node.sbatch,
#                     --ntasks=N; add sbatch options with SBATCH_* variables or site.env) and
#                     wait for them; default: launch/mpdist-run here
#   --link-gbs B --link-us L   the model's link bandwidth (GB/s) and latency (us) for its
#                     predictions at 8, 64 and 512 ranks (default 25 and 5: 200 Gb/s InfiniBand)
#   --box "2 4"       instead: the study on the cluster box (cluster/box, needs root), one rank
#                     per host, batches built in the step (data.loader_threads=0: a box host
#                     has one core), for each host count and each --link; Open MPI's ring all-reduce
#                     (the algorithm the model describes); per link and host count `mpdist
#                     bench-comm`, before and after the training, calibrates the model
#                     (cluster/scaling_box.py); writes box.csv,
#                     box.md, box_allreduce.png, box_efficiency.png and runs/
#   --link R[/D]      a link of the box: rate R (tc, e.g. 1gbit) and one-way delay D (e.g.
#                     0.2ms, through mpdist-delayline next to MPDIST_BIN: cluster/box/shape.sh);
#                     repeatable (default: 200mbit and 1gbit)
#   --rounds R        --box: train each point R times (1-10, default 1), a calibration sweep
#                     after each, and compare the rounds' pooled medians, so that both sides
#                     sample the same stretch of a VM whose speed drifts
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
home=$(cd "$(dirname "$0")/.." && pwd)
[ "${1:-}" != --predict ] || { shift; exec python3 "$home/cluster/predict.py" "$@"; }
usage() { sed -n '/^# Usage:/,/^[^#]/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
[ $# -ge 1 ] || usage
config=$1
shift
ranks="1 2 4" opts="O0 O2" mode=weak batch=64 steps=200 out=runs/scaling submit=0
link_gbs=25 link_us=5 box='' box_links=() rounds=1
extra=()
while [ $# -gt 0 ]; do
  case $1 in # an option that takes a value and has none: one line, exit 2
    --ranks | --opt | --mode | --batch | --steps | --out | --link-gbs | --link-us | --box | --link | --rounds)
      [ $# -ge 2 ] || { echo "scaling: $1 needs a value" >&2; exit 2; } ;;
  esac
  case $1 in
    --ranks) ranks=$2; shift 2 ;;
    --opt) opts=$2; shift 2 ;;
    --mode) mode=$2; shift 2 ;;
    --batch) batch=$2; shift 2 ;;
    --steps) steps=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --submit) submit=1; shift ;;
    --link-gbs) link_gbs=$2; shift 2 ;;
    --link-us) link_us=$2; shift 2 ;;
    --box) box=$2; shift 2 ;;
    --link) box_links+=("$2"); shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "scaling: unknown option '${1:0:100}' (cluster/scaling.sh --help)" >&2; exit 2 ;;
  esac
done
die() { echo "scaling: $*" >&2; exit 2; }
set -f # --ranks "*" and --opt "O*" are words, never file names of the current directory
[ -f "$config" ] || die "$config: no such config"
[[ $mode = weak || $mode = strong ]] || die "--mode must be weak or strong"
[[ $rounds =~ ^([1-9]|10)$ ]] || die "--rounds: 1 to 10 (got '$rounds')"
[ "$rounds" = 1 ] || [ -n "$box" ] || die "--rounds is for the study on the box (--box)"
[ -n "${ranks// /}" ] || die "--ranks: give at least one rank count"
[ -n "${opts// /}" ] || die "--opt: give at least one opt level"
[[ $batch =~ ^[1-9][0-9]*$ ]] || die "--batch: a whole number >= 1 (got '$batch')"
[[ $steps =~ ^[1-9][0-9]*$ ]] || die "--steps: a whole number >= 1 (got '$steps')"
[[ $link_gbs =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v v="$link_gbs" 'BEGIN { exit !(v > 0) }' ||
  die "--link-gbs: a bandwidth > 0 in GB/s (got '$link_gbs')"
[[ $link_us =~ ^[0-9]*\.?[0-9]+$ ]] || die "--link-us: a latency >= 0 in microseconds (got '$link_us')"
for o in $opts; do
  [[ $o =~ ^O[0-3]$ ]] || die "--opt: '$o' is not an opt level (O0 to O3)"
done
seen=" "
for n in $ranks; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || die "--ranks: '$n' is not a rank count"
  [[ $seen != *" $n "* ]] || die "--ranks: $n given twice"
  seen+="$n "
  [ "$mode" = weak ] || [ $((batch % n)) = 0 ] || die "strong scaling: --batch $batch is not divisible by $n ranks"
done
command -v gnuplot >/dev/null || die "gnuplot not found (launch/deps.sh gnuplot-nox)"
command -v python3 >/dev/null || die "python3 not found (the tables and the model need it)"
mkdir -p "$out/runs"
out=$(cd "$out" && pwd)
# One plot; a column missing from the CSV (gnuplot only warns where other curves have points)
# fails the study like any gnuplot error, exit 1. gnuplot may echo the failing command and a
# caret line before its message ("line 0: ..."): the message is said, or the missing column,
# which only warns but is the cause of what fails after it.
gp() {
  local err
  err=$(gnuplot -e "set terminal pngcairo size 800,500 font ',10'; set datafile separator ','; set key left top; set grid; $1" 2>&1) &&
    ! grep -q 'no column with header' <<<"$err" ||
    { echo "scaling: gnuplot: $(awk '/no column with header/ { col = $0 }
        /^(".*" )?line [0-9]+: / && !/warning:/ && msg == "" { msg = $0 }
        /^system error: / && msg != "" && !sys { msg = msg "; " $0; sys = 1 }
        NF { last = $0 }
        END { print col != "" ? col : msg != "" ? msg : last }' <<<"$err")" >&2; exit 1; }
  [ -z "$err" ] || echo "$err" >&2
}
# A string as a gnuplot string literal: single quotes, in which a quote is written twice (--out
# and the config's name may hold either quote).
gq() { printf "'%s'" "${1//\'/\'\'}"; }
# A string as a libconfig string literal for --set: backslashes and double quotes escaped.
lq() { local s=${1//\\/\\\\}; printf '"%s"' "${s//\"/\\\"}"; }
# The runs' --set options, for the models (the bucket sizes the runs trained with).
sets=()
for ((i = 0; i < ${#extra[@]}; i++)); do
  case ${extra[$i]} in
    --set) [ $((i + 1)) -ge ${#extra[@]} ] || sets+=("--set=${extra[$((i + 1))]}") ;;
    --set=*) sets+=("${extra[$i]}") ;;
  esac
done
[ -z "$box" ] || { source "$home/cluster/scaling_box.bash"; exit 0; }

# One run per opt level and rank count: metrics in runs/OPT-N.jsonl, output in runs/OPT-N.log.
jobs=()
for o in $opts; do
  for n in $ranks; do
    rm -f "$out/runs/$o-$n.jsonl"
    b=$batch
    [ "$mode" = strong ] && b=$((batch / n))
    args=("$config" --set "amp.opt_level=$o" --set "data.batch_size=$b" --set "train.max_steps=$steps"
          --set log.progress=plain --set "log.metrics=$(lq "$out/runs/$o-$n.jsonl")")
    if [ "$submit" = 1 ]; then
      rm -rf "$out/runs/$o-$n.slurm" # a new study: no resume from an earlier one's checkpoints
      jobs+=("$(MPDIST_RUN_DIR=$out/runs/$o-$n.slurm sbatch --parsable --ntasks="$n" --nodes=1 \
        --ntasks-per-node="$n" -o "$out/runs/$o-$n.log" "$home/cluster/slurm/mpdist-1node.sbatch" \
        "${args[@]}" "${extra[@]}")")
      echo "scaling: submitted $o on $n rank(s): job ${jobs[-1]}"
    else
      echo "scaling: $o on $n rank(s)"
      "$home/launch/mpdist-run" -n "$n" "${args[@]}" "${extra[@]}" >"$out/runs/$o-$n.log" 2>&1 ||
        { tail -5 "$out/runs/$o-$n.log" >&2; die "run $o on $n rank(s) failed (log: $out/runs/$o-$n.log)"; }
    fi
  done
done
for j in "${jobs[@]}"; do
  while [ -n "$(squeue -h -j "$j" -o %T 2>/dev/null)" ]; do sleep 2; done
done

python3 "$home/cluster/scaling_model.py" --runs "$out/runs" --opts "$opts" --ranks "$ranks" \
  --mode "$mode" --link-gbs "$link_gbs" --link-us "$link_us" --out "$out" --config "$config" \
  ${sets[@]+"${sets[@]}"}

# The plots take scaling.csv's columns by their header names (gnuplot fails on a name it lacks).
plots_t="" plots_e="" csv=$(gq "$out/scaling.csv")
for o in $opts; do
  is="strcol('opt_level') eq '$o'"
  sel="($is ? column('ranks') : 1/0)"
  plots_t+="$csv using $sel:($is ? column('images_per_s') : 1/0) with linespoints lw 2 title '$o', "
  plots_t+="$csv using $sel:($is ? column('ideal_images_per_s') : 1/0) with lines dt 2 title '$o ideal', "
  plots_e+="$csv using $sel:($is ? column('efficiency') : 1/0) with linespoints lw 2 title '$o', "
done
heads="set datafile columnheaders"
gp "set output $(gq "$out/throughput.png"); set title $(gq "Throughput, $mode scaling ($(basename "$config"))"); set xlabel 'ranks'; set ylabel 'images/s'; set logscale x 2; $heads; plot ${plots_t%, }"
gp "set output $(gq "$out/efficiency.png"); set title 'Scaling efficiency, $mode scaling'; set xlabel 'ranks'; set ylabel 'efficiency'; set logscale x 2; set yrange [0:1.1]; $heads; plot ${plots_e%, }, 1 with lines dt 2 lc 'gray' title 'ideal'"
gp "set output $(gq "$out/time_split.png"); set title 'Time per step'; set ylabel 'ms per step'; set style data histograms; set style histogram rowstacked; set style fill solid 0.8 border -1; set boxwidth 0.7; set xtics rotate by -30; $heads; plot $csv using 'compute_ms':xtic(strcol('opt_level').' x'.strcol('ranks')) title 'compute', '' using 'comm_exposed_ms' title 'exposed comm', '' using 'input_wait_ms' title 'input wait'"
cat "$out/scaling.md"
echo
cat "$out/model.md"
echo "scaling: $out/scaling.csv, scaling.md, model.md, throughput.png, efficiency.png, time_split.png"
