#!/usr/bin/env bash
# labels: integration cluster nosan
# serial: it kills a box host and waits on Slurm
# Self-healing Slurm jobs (issue 51) on the cluster box's Slurm (2 hosts, a slurmd each):
# (1) cluster/slurm/mpdist-multinode.sbatch, 2 nodes x 2 tasks, checkpoints every 20 steps; at
# step 50 or later host h2 dies (its link cut, every process on it killed: its slurmd, the
# step's slurmstepd and its ranks); the job fails with exit 6 (the survivors' watchdog), job.sh
# requeues it with the cause in the run's restarts.log, h2 comes back (link up, slurmd started
# again), the job resumes from the newest checkpoint on 2 nodes and ends with parameters and
# optimizer state bitwise those of an uninterrupted 4-rank run (which on one host trains as on
# two: box_equivalence.sh). (2) a bad config (exit 2) is not requeued; (3) a job that fails
# every time (a binary that reports a communication failure) is started 1 + MPDIST_MAX_FAILURES
# times and then left failed. Skipped (77) where network namespaces cannot be made; Slurm and
# the box are stopped however the test ends. Needs root, slurm-wlm and munge.
source "$(dirname "$0")/common.bash"
cd "$SRC"
source "$SRC/tests/integration/slurm_jobs.bash"
box_slurm_up
export MPDIST_RESTART_DELAY_S=0
source launch/env.sh
keep_cores
steps=120
args=(configs/fashion-mnist-mlp.cfg --set train.max_steps=$steps --set train.epochs=100
      --set data.train_limit=4096 --set data.test_limit=1000 --set log.every=5
      --set log.progress=plain --set checkpoint.every_steps=20 --set comm.timeout_s=5.0
      --set optim.momentum=0.9)
sb=(sbatch --parsable --nodes=2 --ntasks-per-node=2 --time=10)

echo "== the uninterrupted run: 4 ranks on this host"
timeout 300 mpirun -np 4 "$MPDIST" "${args[@]}" --set "checkpoint.dir=\"$TMP/ref\"" \
  --set "log.metrics=\"$TMP/ref.jsonl\"" --set log.progress=none >"$TMP/ref.out" 2>&1 ||
  { echo "FAIL: the uninterrupted run"; tail -20 "$TMP/ref.out"; exit 1; }

echo "== (1) host h2 dies at step 50 or later"
host_dies() {
  bash "$box/shape.sh" 2 --down
  ip netns pids mpbox-h2 | xargs -r kill -KILL
}
# A rebooted host: its link up, its /tmp empty (here PMIxCliTmpDirBase, which holds the killed
# step's spmix_appdir_0_JOB.STEP), slurmd started again. The step's PMIx directory and socket in
# SlurmdSpoolDir (pmix.JOB.STEP, stepd.slurm.pmix.JOB.STEP) would outlive a reboot of a real
# node, and Slurm 22.05's PMIx plugin then fails the requeued job's step there (the same job id
# and step: "Cannot create directory ... File exists"); a boot script clears them, as here.
host_returns() {
  bash "$box/shape.sh" 2 --up
  rm -rf "$slurm/slurmd-h2"/pmix.* "$slurm/slurmd-h2"/stepd.slurm.pmix.* "$slurm/h2/pmix"/*
  bash "$box/exec.sh" h2 slurmd -f "$slurm/h2/slurm.conf" -N h2
}
job=$("${sb[@]}" -o "$TMP/fault.out" cluster/slurm/mpdist-multinode.sbatch "${args[@]}")
run=$TMP/runs/mpdist-$job
for _ in $(seq 1200); do
  grep -Eq '"step":([5-9][0-9]|1[01][0-9])[,}]' "$run/metrics.jsonl" 2>/dev/null && break
  sleep 0.1
done
at=$(grep -o '"step":[0-9]*' "$run/metrics.jsonl" 2>/dev/null | tail -1)
host_dies
echo "h2 died at $at"
for _ in $(seq 600); do # until job.sh has decided
  grep -q "requeued\|not requeued" "$run/restarts.log" 2>/dev/null && break
  sleep 0.1
done
host_returns
wait_job "$job" 420 || true
log=$run/restarts.log
expect_ok "failed with exit 6, requeued" \
  grep -q "start 1: mpdist failed with exit code 6 (a communication failure: a lost rank or host), failure 1 of at most 3; requeued" "$log"
expect_ok "started again on 2 nodes" grep -q "start 2: started on 2 node(s), 4 tasks" "$log"
expect_ok "resumed from a checkpoint of the first start" \
  grep -q "^resumed from $run/ckpt/ckpt-0*[1-9][0-9]*\.h5" "$TMP/fault.out"
expect_ok "the run finished" grep -q "run finished" "$TMP/fault.out"
expect_ok "the final parameters and optimizer state equal the uninterrupted run's" \
  bash -c "h5diff '$TMP/ref/ckpt-00000120.h5' '$run/ckpt/ckpt-00000120.h5' /params /params && h5diff '$TMP/ref/ckpt-00000120.h5' '$run/ckpt/ckpt-00000120.h5' /optim /optim"
sed 's/^/    /' "$log"
if [ "$failures" != 0 ]; then
  grep -av "^step\|^eval" "$TMP/fault.out" | sed 's/^/    /'
  echo "  h2's slurmd log, its errors:"
  grep -a "error\|started\|launch" "$slurm/slurmd-h2.log" | tail -16 | sed 's/^/    /'
fi

echo "== (2) a bad config is not requeued"
job=$("${sb[@]}" -o "$TMP/bad.out" cluster/slurm/mpdist-multinode.sbatch "${args[@]}" --set optim.lr=-1)
wait_job "$job" 120 || true
expect_ok "exit 2, not requeued, one start" bash -c "grep -q 'start 1: mpdist failed with exit code 2 (a usage or config error); a restart would fail the same way: not requeued' '$TMP/runs/mpdist-$job/restarts.log' &&
  [ \$(grep -c ': started on' '$TMP/runs/mpdist-$job/restarts.log') = 1 ]"

echo "== (3) a job that fails every time"
cat >"$TMP/fails.sh" <<'F'
#!/bin/sh
echo "mpdist: error: comm: timed out after 5 s in all-reduce (a stand-in that always fails)" >&2
exit 6
F
chmod +x "$TMP/fails.sh"
job=$(MPDIST_BIN=$TMP/fails.sh MPDIST_MAX_FAILURES=2 "${sb[@]}" -o "$TMP/fails.out" \
  cluster/slurm/mpdist-multinode.sbatch "${args[@]}")
wait_job "$job" 240 || true
log=$TMP/runs/mpdist-$job/restarts.log
expect_ok "started 3 times, then left failed" bash -c "[ \$(grep -c ': started on' '$log') = 3 ] &&
  grep -q 'start 3: mpdist failed with exit code 6 .*failure 3: more than MPDIST_MAX_FAILURES (2); not requeued' '$log'"
[ "$failures" = 0 ] || sed 's/^/    /' "$log"
report_cores
finish
