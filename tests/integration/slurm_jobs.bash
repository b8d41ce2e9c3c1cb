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
