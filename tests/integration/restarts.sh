#!/usr/bin/env bash
# serial: two ranks that spin in MPI, 1200 steps; beside other tests on 2 cores it ran 25x slower
# launch/mpdist-run --max-restarts (issue 51, self-healing for plain mpirun users): (1) a rank
# killed mid-run (SIGKILL) is restarted from the newest checkpoint, once, with the cause in
# MPDIST_RESTART_LOG, and the run ends with parameters, optimizer state and BatchNorm-free
# buffers bitwise those of an uninterrupted run; (2) a bad config (exit 2) is not restarted,
# (2a) a run without checkpoint.dir, which a restart could not resume, is refused at once, nor
# (2b) a stop asked for by SIGUSR1 to the ranks of a run without checkpoint.dir (exit 138);
# (3) a run that fails every time (a binary that reports a communication failure, exit 6) is
# started 1 + N times and then given up, exit 6; (4) a bad --max-restarts exits 2.
source "$(dirname "$0")/common.bash"
cd "$TMP"
RUN=$SRC/launch/mpdist-run
CFG=$SRC/configs/fashion-mnist-mlp.cfg
ARGS=(--set data.train_limit=2048 --set data.test_limit=500 --set train.max_steps=1200
      --set train.epochs=1000 --set checkpoint.every_steps=100 --set log.every=10
      --set log.progress='"none"' --set optim.momentum=0.9)
export MPDIST_BIN=$MPDIST MPDIST_RESTART_DELAY_S=0

timeout 300 "$RUN" -n 2 "$CFG" "${ARGS[@]}" --set "checkpoint.dir=\"$TMP/ref\"" \
  --set "log.metrics=\"$TMP/ref.jsonl\"" >ref.out 2>&1 ||
  { echo "FAIL: the uninterrupted run"; tail -20 ref.out; exit 1; }

echo "== (1) a rank killed at step 400 or later"
MPDIST_RESTART_LOG=$TMP/restarts.log timeout 300 "$RUN" --max-restarts 2 -n 2 "$CFG" "${ARGS[@]}" \
  --set "checkpoint.dir=\"$TMP/f\"" --set "log.metrics=\"$TMP/f.jsonl\"" >f.out 2>&1 &
job=$!
for _ in $(seq 1200); do
  grep -Eq '"step":([4-9][0-9][0-9]|1[01][0-9][0-9])[,}]' f.jsonl 2>/dev/null && break
  sleep 0.05
done
victim=
for p in $(pgrep -x mpdist || true); do # a rank of this run (its checkpoint.dir is $TMP/f)
  [[ $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null || true) == *"$TMP/f\""* ]] && victim=$p
done
step=$(grep -o '"step":[0-9]*' f.jsonl | tail -1)
if [ -n "$victim" ]; then
  kill -KILL "$victim"
  echo "killed rank pid $victim at $step"
else
  echo "FAIL: no rank of the run to kill (it ended before $step?)"
  failures=$((failures + 1))
fi
rc=0
wait "$job" || rc=$?
expect_ok "the run ended with exit 0 (got $rc)" test "$rc" = 0
expect_ok "one restart, its cause logged" \
  grep -q "exit 137 (a rank or the launcher ended by signal 9): restart 1 of 2" restarts.log
expect_ok "one line in the restart log" test "$(wc -l <restarts.log)" = 1
expect_ok "resumed from a checkpoint" grep -q "^resumed from $TMP/f/ckpt-" f.out
expect_ok "the final parameters and optimizer state equal the uninterrupted run's" \
  bash -c "h5diff '$TMP/ref/ckpt-00001200.h5' '$TMP/f/ckpt-00001200.h5' /params /params && h5diff '$TMP/ref/ckpt-00001200.h5' '$TMP/f/ckpt-00001200.h5' /optim /optim"
[ "$failures" = 0 ] || grep -v '^step\|^eval' f.out | sed 's/^/    /'

echo "== (2) a bad config is not restarted"
expect_exit 2 "optim.lr" "$RUN" --max-restarts 3 "$CFG" --set optim.lr=-1
expect_ok "started once" test "$(grep -c '^mpdist-run: mpirun' out)" = 1
expect_ok "said why" grep -q "^mpdist-run: exit 2 (a usage or config error): a restart would fail the same way; not restarted" out

echo "== (2a) restarts of a run without checkpoint.dir, which a restart could not resume"
# refused before the first step (before 2026-12-03 the first failure was restarted with
# --resume auto, which then failed with exit 2, a config error, as the job's end)
expect_exit 2 "fashion-mnist-mlp.cfg: --restartable \\(launch/mpdist-run --max-restarts\\): a restart resumes from checkpoint.dir, which is not set" \
  "$RUN" --max-restarts 1 -n 2 "$CFG" "${ARGS[@]}"
expect_ok "started once, nothing trained" \
  bash -c "[ \$(grep -c '^mpdist-run: mpirun' out) = 1 ] && ! grep -q '^done\\|^step' out"
expect_exit 2 "--restartable is an option of mpdist train" "$MPDIST" eval "$CFG" --restartable

echo "== (2b) a stop asked for with a signal to the ranks, without checkpoint.dir, is not restarted"
cat >stops.sh <<'F'
#!/bin/sh
echo "stopped at step 5 by SIGUSR1 without a checkpoint (stand-in); nothing of the run was kept: exit 138"
exit 138
F
chmod +x stops.sh
rc=0
MPDIST_BIN=$TMP/stops.sh timeout 120 "$RUN" --max-restarts 2 "$CFG" >stops.out 2>&1 || rc=$?
expect_ok "exit 138, started once (got $rc)" \
  bash -c "[ $rc = 138 ] && [ \$(grep -c '^mpdist-run: mpirun' stops.out) = 1 ]"
expect_ok "said why" grep -q "^mpdist-run: exit 138 (stopped by SIGUSR1: a stop request, or a rank ended by it): a stop was asked for; not restarted" stops.out

echo "== (3) a run that fails every time"
cat >fails.sh <<'F'
#!/bin/sh
echo "mpdist: error: comm: [rank 1 @ h2] timed out after 5 s in all-reduce (stand-in)" >&2
exit 6
F
chmod +x fails.sh
rc=0
MPDIST_BIN=$TMP/fails.sh MPDIST_HANG_GRACE_S=0 MPDIST_RESTART_LOG=$TMP/fails.log \
  timeout 120 "$RUN" --max-restarts 2 "$CFG" >fails.out 2>&1 || rc=$?
expect_ok "exit 6 after the budget (got $rc)" test "$rc" = 6
expect_ok "started 3 times" test "$(grep -c '^mpdist-run: mpirun' fails.out)" = 3
expect_ok "two restarts and the end logged" bash -c "grep -q 'restart 2 of 2' fails.log &&
  grep -q 'after 2 restarts: the budget (--max-restarts 2) is spent; giving up' fails.log &&
  [ \$(wc -l <fails.log) = 3 ]"

echo "== (4) usage"
for bad in "--max-restarts x $CFG" "--max-restarts 10000 $CFG" "--max-restarts -1 $CFG"; do
  rc=0
  "$RUN" $bad >out 2>&1 || rc=$?
  expect_ok "mpdist-run $bad: exit 2 and one line (got $rc)" \
    bash -c "[ $rc = 2 ] && [ \$(wc -l <out) = 1 ] && grep -q -- '--max-restarts needs a whole number' out"
done
rc=0
MPDIST_RESTART_DELAY_S=soon "$RUN" --max-restarts 1 "$CFG" >out 2>&1 || rc=$?
expect_ok "MPDIST_RESTART_DELAY_S=soon: exit 2 and one line (got $rc)" \
  bash -c "[ $rc = 2 ] && [ \$(wc -l <out) = 1 ] && grep -q 'MPDIST_RESTART_DELAY_S must be a whole number' out"
rc=0
SLURM_JOB_ID=1 SLURM_JOB_NAME=t SLURM_JOB_NUM_NODES=1 SLURM_NTASKS=1 MPDIST_HOME=$SRC \
  MPDIST_RUN_DIR=$TMP/slurm-run MPDIST_MAX_FAILURES=lots bash "$SRC/cluster/slurm/job.sh" "$CFG" >out 2>&1 || rc=$?
expect_ok "job.sh with MPDIST_MAX_FAILURES=lots: exit 2 and one line, nothing run (got $rc)" \
  bash -c "[ $rc = 2 ] && [ \$(wc -l <out) = 1 ] && grep -q 'MPDIST_MAX_FAILURES must be a whole number' out && [ ! -e '$TMP/slurm-run' ]"
finish
