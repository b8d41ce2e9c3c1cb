# Report lines for the GPU stages (sourced by tests/gpu/nccl_ranks.sh, graphs.sh and
# conv_algo.sh, not run): set `report` to the stage's file first. say prints a line and appends
# it to the report; check WHAT CMD... runs CMD and writes "PASS WHAT" or "FAIL WHAT", counting
# failures. For the speed rows (with `out` the stage's folder and `run NAME MODE ARGS...` its
# run function, metrics to $out/NAME.jsonl): ips NAME is a run's images/s from its summary;
# median of numbers on stdin; alternate FILE ROUNDS NAME A B ARGS... runs NAME-A with mode A
# then NAME-B with mode B, ROUNDS times, appending "MODE images/s" lines to FILE (a failed run
# is a FAIL line); medians FILE MODE is the median of MODE's lines.
: >"$report"
failures=0
say() { echo "$*" | tee -a "$report"; }
check() {
  local what=$1
  shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; failures=$((failures + 1)); fi
}
ips() { sed -nE 's/.*"type":"summary".*"images_per_s":([0-9.e+-]+).*/\1/p' "$out/$1.jsonl"; }
median() { sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
alternate() {
  local file=$1 rounds=$2 name=$3 a=$4 b=$5 r mode
  shift 5
  : >"$file"
  for r in $(seq "$rounds"); do
    for mode in "$a" "$b"; do
      if run "$name-$mode" "$mode" "$@"; then
        echo "$mode $(ips "$name-$mode")" >>"$file"
      else
        say "FAIL speed run $name-$mode round $r (exit: see $out/$name-$mode.out)"
        failures=$((failures + 1))
      fi
    done
  done
}
medians() { awk -v m="$2" '$1 == m { print $2 }' "$1" | median; }
