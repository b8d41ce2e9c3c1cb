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

# box_slurm_up: the cluster box with 2 hosts and a Slurm over them (slurmctld, a slurmd per host)
# for a test in $SRC; sets box and slurm, stops both however the test ends, exits 77 where
# network namespaces cannot be made; exports what the batch templates need.
box_slurm_up() {
  [ "$(id -u)" = 0 ] || { echo "FAIL: needs root to start slurmd"; exit 1; }
  box=$SRC/cluster/box
  slurm=$TMP/slurm
  trap 'report_cores; bash "$SRC/cluster/local-slurm/stop.sh" "$slurm"; bash "$box/down.sh"; rm -rf "$TMP"' EXIT
  local rc=0
  bash "$box/up.sh" 2 >/dev/null || rc=$?
  [ "$rc" = 77 ] && { echo "skipped: network namespaces cannot be made here"; exit 77; }
  [ "$rc" = 0 ] || { echo "FAIL: cluster/box/up.sh 2 exited $rc"; exit 1; }
  bash "$SRC/cluster/local-slurm/start.sh" "$slurm" 8 --box 2 >/dev/null
  source "$slurm/env.sh"
  export MPDIST_BIN=$MPDIST MPDIST_HOME=$SRC MPDIST_RUNS=$TMP/runs
}
