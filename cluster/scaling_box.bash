# The box mode of cluster/scaling.sh (sourced by it, after its options are read: config, opts,
# batch, steps, out, extra, box, box_links, rounds, home, die, gp, gq, lq, sets). For each link
# and host count: the box with that many hosts and the link on each, `mpdist bench-comm
# --blocking` over its all-reduce (the calibration: each all-reduce waited for before the next, as
# training waits for its gradients, so that the fit's alpha holds the latency a step pays), then
# $rounds times (--rounds; round K's files end in -rK from the second on) training at each opt
# level, one rank per host, and the calibration again; then the single-rank baselines, the model
# (cluster/scaling_box.py) and the plots. The box is torn down at the end, also on failure.
[ ${#box_links[@]} -gt 0 ] || box_links=(200mbit 1gbit)
for h in $box; do
  [[ $h =~ ^[2-4]$ ]] || die "--box: host counts are 2, 3 or 4 (got '$h')"
done
boxdir=$home/cluster/box
source "$boxdir/rate.bash"
for l in "${box_links[@]}"; do
  [[ $l =~ ^[0-9]+[kmg]?bit(/[0-9.]+m?s)?$ ]] || die "--link: give RATE or RATE/DELAY, e.g. 1gbit/0.2ms (got '$l')"
  [ "$(rate_bps "${l%%/*}")" -gt 0 ] || die "--link: a rate above 0 bit/s (got '$l')"
done
source "$home/launch/env.sh" # the box is a local set-up: Open MPI as root, as mpdist-run does here
trap 'bash "$boxdir/down.sh"' EXIT
# Each box host on its own share of the cores (cluster/box/exec.sh), in the calibration and in
# training alike: left to the scheduler, which hosts' ranks share a core changes within and
# between runs, and with it the all-reduce's time.
export MPDIST_BOX_PIN=1
# Open MPI's ring all-reduce: its own choice changes with the size and the rank count (a 2-rank
# all-reduce is not a ring), and the model is that of a ring. Over ob1, whose TCP eager limit
# the fit reads (UCX would take over where it finds its devices).
ring="--mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 --mca pml ob1"
# Training builds each batch in the step (data.loader_threads=0; after it, -- arguments may set
# it again): a box host has one core, which a loader thread would share with the step's
# communication thread, slowing the all-reduce from outside the network by up to a fifth at O0
# (bench/results/box-scaling/loader-nice-2026-11-29/start-experiment.txt); a GPU node's loader
# has cores of its own.
train() { # NAME RANKS: one training run at opt level $o, metrics runs/NAME.jsonl, log runs/NAME.log
  rm -f "$out/runs/$1.jsonl"
  "$home/launch/mpdist-run" -n "$2" "$config" --set data.loader_threads=0 --set "amp.opt_level=$o" --set "data.batch_size=$batch" \
    --set "train.max_steps=$steps" --set log.progress=plain --set "log.every=10" \
    --set "log.metrics=$(lq "$out/runs/$1.jsonl")" "${extra[@]}" >"$out/runs/$1.log" 2>&1 ||
    { tail -5 "$out/runs/$1.log" >&2; die "run $1 failed (log: $out/runs/$1.log)"; }
}
# calibrate NAME: the bench-comm sweep on the box's $hosts into runs/bench-NAME.csv, before and
# again after the training at each link and host count (the fit takes each size's mean of the
# two, so that the calibration is not one moment of a VM whose speed drifts).
# Each dtype is swept by a bench-comm of its own, from a fresh connection as a training run has:
# in one process, the half sizes measured after the FP32 sizes' larger messages ran 30% faster
# than training's on the 10 Gbit/s box (TCP's windows grown by them; loader-nice-2026-11-29/).
calibrate() {
  echo "scaling: box, $h hosts, link $l: bench-comm"
  : >"$out/runs/bench-$1.log"
  local d csv
  for d in "${dtype_list[@]}"; do
    # shellcheck disable=SC2046 # the options are words
    csv=$(timeout "$deadline" mpirun --host "$hosts" $("$boxdir/mpirun-args") $ring "${MPDIST_BIN:-$home/build/mpdist}" \
      bench-comm --op allreduce -d "$d" --blocking -b $((g / 4)) -e $((g * 2)) -i $((g / 8)) -n 8 -w 1 -r 3 --csv \
      2>>"$out/runs/bench-$1.log") || die "bench-comm failed (log: $out/runs/bench-$1.log)"
    if [ "$d" = "${dtype_list[0]}" ]; then echo "$csv"; else tail -n +2 <<<"$csv"; fi
  done >"$out/runs/bench-$1.csv"
}
# The sweep brackets the gradients: G/4 to 2G in steps of G/8, with G the FP32 gradient bytes
# (a multiple of 64), so both FP32 (G) and half gradients (G/2) have sizes from half to twice
# theirs, several on each side of Open MPI's eager limit wherever it falls between them
# (cluster/scaling_box.py fits only one protocol's sizes); in the dtypes of the opt levels'
# gradients (mpdist --dry-run's "grads" of each).
dtype_list=()
for o in $opts; do
  dry=$("${MPDIST_BIN:-$home/build/mpdist}" "$config" --dry-run --set "amp.opt_level=$o" "${extra[@]}" 2>&1) ||
    die "mpdist --dry-run of $config at $o failed: $(tail -1 <<<"$dry")"
  nparam=$(sed -n 's/^total parameters: //p' <<<"$dry")
  grads=$(sed -n 's/^opt level .*, grads \(fp32\|fp16\|bf16\),.*/\1/p' <<<"$dry")
  [[ $nparam =~ ^[0-9]+$ && -n $grads ]] ||
    die "cannot read the parameter count or the gradients' dtype from mpdist --dry-run of $config at $o"
  case $grads in fp32) dtype_list+=(float) ;; fp16) dtype_list+=(half) ;; bf16) dtype_list+=(bfloat16) ;; esac
done
mapfile -t dtype_list < <(printf '%s\n' "${dtype_list[@]}" | sort -u)
g=$((nparam * 4 / 64 * 64))
# What the model's fit needs to know of the TCP transport: its eager limit.
ompi_info --parsable --param btl tcp --level 9 >"$out/runs/ompi-btl-tcp.txt" ||
  die "ompi_info --param btl tcp failed"
names=()
for l in "${box_links[@]}"; do
  name=${l//\//-}
  names+=("$name")
  rate=${l%%/*} delay=
  [ "$rate" = "$l" ] || delay=${l#*/}
  # A dtype's sweep's deadline: 15 minutes, plus twice what its bytes take at the rate (each rank
  # sends under 2s bytes per all-reduce of s bytes, 54 all-reduces a size, sizes adding up to
  # 135G/8).
  bits=$(rate_bps "$rate")
  deadline=$((900 + 2 * 8 * 2 * 54 * (g * 135 / 8) / bits))
  for h in $box; do
    bash "$boxdir/up.sh" "$h" --rate "$rate" ${delay:+--delay "$delay"} >/dev/null ||
      die "cannot start the box with $h hosts and link $l (cluster/box/up.sh)"
    hosts=$(seq -s, -f 'h%g:1' "$h")
    calibrate "$name-$h"
    for ((k = 1; k <= rounds; k++)); do
      sfx=; [ "$k" = 1 ] || sfx=-r$k
      for o in $opts; do
        echo "scaling: box, $h hosts, link $l: $o${sfx:+ (round $k)}"
        MPDIST_MPIRUN_ARGS="--host $hosts $("$boxdir/mpirun-args") $ring" train "$name-$o-$h$sfx" "$h"
      done
      calibrate "$name-$h-after$sfx"
    done
    bash "$boxdir/down.sh"
  done
done
for o in $opts; do
  echo "scaling: $o on 1 rank (the baseline)"
  train "$o-1" 1
done
python3 "$home/cluster/scaling_box.py" --runs "$out/runs" --opts "$opts" --hosts "$box" \
  --links "${names[*]}" --out "$out" --config "$config" --rounds "$rounds" \
  ${sets[@]+"${sets[@]}"}
# The plots take box.csv's columns by their header names (gnuplot fails on a name it lacks).
lab="stringcolumn('link').' '.stringcolumn('opt').' x'.stringcolumn('hosts')"
bars="set datafile columnheaders; set style data histograms; set style histogram clustered; set style fill solid 0.8 border -1; set boxwidth 0.9; set xtics rotate by -30"
gp "set output $(gq "$out/box_allreduce.png"); set title 'All-reduce per step on the box: measured and alpha-beta model'; set ylabel 'ms (log scale)'; set logscale y; set key right top; $bars; set yrange [0.1:*]; plot $(gq "$out/box.csv") using 'first_ms':xtic($lab) title 'rank 0 (wait included)', '' using 'meas_ms' title 'the last rank to start', '' using 'pred_ms' title 'model'"
gp "set output $(gq "$out/box_efficiency.png"); set title 'Weak-scaling efficiency on the box'; set ylabel 'efficiency'; $bars; set yrange [0:1.1]; plot $(gq "$out/box.csv") using 'eff':xtic($lab) title 'measured', '' using 'pred_eff' title 'model'"
cat "$out/box.md"
echo "scaling: $out/box.csv, box.md, box_allreduce.png, box_efficiency.png"
