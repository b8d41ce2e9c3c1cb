# Shared by the Slurm tests (sourced after common.bash, not run): waiting for a job.

# wait_job ID SECONDS: until the job has left the queue (requeues included); fails on timeout.
wait_job() {
  local end=$((SECONDS + $2))
  while [ $SECONDS -lt $end ]; do
    [ -n "$(squeue -h -j "$1" -o %T 2>/dev/null)" ] || return 0
    sleep 1
  done
  echo "FAIL: job $1 still queued after $2 s"; squeue; scancel "$1"; failures=$((failures + 1))
  return 1
}

# A rank that crashes inside a library (as one did in MPI_Init on a requeued start, where Open MPI's
# own handler printed no frames) leaves a core file in its working directory, the submit
# directory $SRC. keep_cores: cores for the jobs this test submits. report_cores: a failed check
# and the stack of each core written since keep_cores, whose file is then removed; called before
# the test's finish and from its EXIT trap, so none is left in the checkout.
keep_cores() {
  ulimit -c unlimited # sbatch passes the limit on to the tasks (PropagateResourceLimits=ALL)
  core_stamp=$TMP/core-stamp
  touch "$core_stamp"
}
report_cores() {
  [ -n "${core_stamp:-}" ] && [ -f "$core_stamp" ] || return 0
  local c
  for c in $(find "$SRC" -maxdepth 1 -type f \( -name core -o -name 'core.[0-9]*' \) -newer "$core_stamp"); do
    echo "FAIL: a rank crashed and left $c; its stack:"
    failures=$((failures + 1))
    gdb -batch -ex "thread apply all bt 16" "$MPDIST" "$c" 2>&1 | grep "^#\|^Thread" | head -80 |
      sed 's/^/      /'
    rm -f "$c"
  done
}
