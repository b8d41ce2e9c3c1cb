# The body of the batch templates (sourced by them, with the mpdist arguments as "$@"): runs
# mpdist over the job's tasks through launch/mpdist-run with checkpoints and metrics in the run
# directory, resuming from its newest checkpoint. Before the time limit Slurm sends SIGUSR1 to
# this script (--signal=B:USR1@SECONDS); it passes it on to srun (or mpirun), which passes it to
# the ranks, and they stop after the same step, save a checkpoint and exit 0. Then this script
# requeues the job (same id, same options; Slurm holds a requeued job for AuthInfo's
# cred_expire, 120 s by default) and the next start resumes from that checkpoint. A run is
# finished when its metrics hold the summary record. A signal that comes before mpdist started
# requeues at once.
# A failure a restart can fix (launch/exit_codes.bash: a lost rank or host, exit 6; a crashed
# rank; an internal error) is requeued too, up to MPDIST_MAX_FAILURES times (default 3) in the
# run directory's life, and the next start resumes from the newest intact checkpoint; exits 2-5
# (config, data, checkpoint, divergence) are not. Every start, requeue and its cause is a dated
# line of the run directory's restarts.log.
set -uo pipefail
MPDIST_HOME=${MPDIST_HOME:-$SLURM_SUBMIT_DIR}
export MPDIST_HOME
[ -f "$MPDIST_HOME/cluster/slurm/site.env" ] && source "$MPDIST_HOME/cluster/slurm/site.env"
for m in ${MPDIST_MODULES:-}; do module load "$m" || exit 1; done
[ $# -ge 1 ] || { echo "usage: sbatch TEMPLATE CONFIG.cfg [mpdist arguments]" >&2; exit 2; }
for v in MPDIST_MAX_FAILURES MPDIST_MAX_RESTARTS; do
  [[ ${!v:-0} =~ ^[0-9]{1,6}$ ]] || { echo "mpdist job: $v must be a whole number (got '${!v}')" >&2; exit 2; }
done
run=${MPDIST_RUN_DIR:-${MPDIST_RUNS:-$MPDIST_HOME/runs}/${SLURM_JOB_NAME}-${SLURM_JOB_ID}}
mkdir -p "$run"
restarts=${SLURM_RESTART_COUNT:-0}
source "$MPDIST_HOME/launch/exit_codes.bash"
log() { # LINE: to the job's output and, dated, to the run directory's restarts.log
  echo "mpdist job $SLURM_JOB_ID: $1"
  echo "$(date -u +%FT%TZ) job $SLURM_JOB_ID start $((restarts + 1)): $1" >>"$run/restarts.log"
}
echo "mpdist job $SLURM_JOB_ID (start $((restarts + 1))): $SLURM_JOB_NUM_NODES node(s), $SLURM_NTASKS tasks, run directory $run"
log "started on $SLURM_JOB_NUM_NODES node(s), $SLURM_NTASKS tasks (${SLURM_JOB_NODELIST:-})" >/dev/null
pid= signalled=
stop() { # SIG: pass it on to the launcher, whose ranks save a checkpoint and stop
  echo "mpdist job $SLURM_JOB_ID: SIG$1 (time limit near); the ranks save a checkpoint"
  signalled=1
  [ -z "$pid" ] || kill -"$1" "$pid" 2>/dev/null
}
trap 'stop USR1' USR1
trap 'stop TERM' TERM
rc=0
if [ -z "$signalled" ]; then # a signal before the start leaves nothing to run: requeue
  "$MPDIST_HOME/launch/mpdist-run" "$@" --set "checkpoint.dir=\"$run/ckpt\"" \
    --set 'checkpoint.resume="auto"' --set "log.metrics=\"$run/metrics.jsonl\"" &
  pid=$!
  wait "$pid"
  rc=$?
  while kill -0 "$pid" 2>/dev/null; do # a trapped signal ends `wait` early
    wait "$pid"
    rc=$?
  done
fi
if grep -q '"type": *"summary"' "$run/metrics.jsonl" 2>/dev/null; then
  echo "mpdist job $SLURM_JOB_ID: run finished (metrics: $run/metrics.jsonl)"
  exit 0
fi
if [ "$rc" -ne 0 ]; then
  cause=$(mp_exit_cause "$rc")
  if ! mp_exit_restartable "$rc"; then
    log "mpdist failed with exit code $rc ($cause); $(mp_exit_not_restarted "$rc"): not requeued" >&2
    exit "$rc"
  fi
  failed=$(($(cat "$run/failures" 2>/dev/null || echo 0) + 1))
  echo "$failed" >"$run/failures"
  if [ "$failed" -gt "${MPDIST_MAX_FAILURES:-3}" ]; then
    log "mpdist failed with exit code $rc ($cause), failure $failed: more than MPDIST_MAX_FAILURES (${MPDIST_MAX_FAILURES:-3}); not requeued" >&2
    exit "$rc"
  fi
  log "mpdist failed with exit code $rc ($cause), failure $failed of at most ${MPDIST_MAX_FAILURES:-3}; requeued to resume from the newest checkpoint"
  scontrol requeue "$SLURM_JOB_ID" && exit 0
  exit "$rc"
fi
if [ "$restarts" -ge "${MPDIST_MAX_RESTARTS:-20}" ]; then
  log "stopped early again after $restarts restarts; giving up (MPDIST_MAX_RESTARTS)" >&2
  exit 1
fi
log "stopped before the end with a checkpoint; requeued to resume"
scontrol requeue "$SLURM_JOB_ID"
