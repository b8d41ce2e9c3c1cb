# Report lines for the GPU stages (sourced by tests/gpu/nccl_ranks.sh and tests/gpu/graphs.sh,
# not run): set `report` to the stage's file first. say prints a line and appends it to the
# report; check WHAT CMD... runs CMD and writes "PASS WHAT" or "FAIL WHAT", counting failures.
: >"$report"
failures=0
say() { echo "$*" | tee -a "$report"; }
check() {
  local what=$1
  shift
  if "$@"; then say "PASS $what"; else say "FAIL $what"; failures=$((failures + 1)); fi
}
