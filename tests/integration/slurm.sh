#!/usr/bin/env bash
# labels: integration nosan
# serial: its time-limit check has a 20 s deadline
# The Slurm templates on a real one-node Slurm (cluster/local-slurm, 8 CPUs advertised):
# the single-node template runs 4 tasks through srun --mpi=pmix and writes the metrics of a
# 4-rank run; launch errors (srun without PMIx, a bare mpdist inside a 4-task job script) end
# with exit 2 and one clear message; and a job whose time limit comes first is signalled,
# saves, is requeued and resumes to the final step. Needs root, slurm-wlm and munge.
source "$(dirname "$0")/common.bash"
cd "$SRC"
[ "$(id -u)" = 0 ] || { echo "FAIL: needs root to start slurmd"; exit 1; }
slurm=$TMP/slurm
source "$SRC/tests/integration/slurm_jobs.bash"
trap 'report_cores; bash "$SRC/cluster/local-slurm/stop.sh" "$slurm"; rm -rf "$TMP"' EXIT
bash cluster/local-slurm/start.sh "$slurm" 8 >/dev/null
source "$slurm/env.sh"
export MPDIST_BIN=$MPDIST MPDIST_HOME=$SRC MPDIST_RUNS=$TMP/runs
# launch/mpdist-run leaves the development settings out inside Slurm; this one-machine cluster
# runs its jobs as root with 4 tasks on 2 cores, so the test exports them itself (sbatch passes
# the environment on to the jobs).
source launch/env.sh
keep_cores
small=(--set data.train_limit=4096 --set data.test_limit=1000 --set log.progress=plain)

echo "== single-node template, 4 tasks"
job=$(sbatch --parsable -o "$TMP/one.out" cluster/slurm/mpdist-1node.sbatch \
  configs/fashion-mnist-mlp.cfg --set train.max_steps=60 "${small[@]}")
wait_job "$job" 120 || true
m=$TMP/runs/mpdist-$job/metrics.jsonl
expect_ok "srun --mpi=pmix started 4 ranks" grep -q "^mpdist-run: srun --mpi=pmix" "$TMP/one.out"
expect_ok "the run has 4 ranks" grep -q "mpdist .*: 4 ranks" "$TMP/one.out"
expect_ok "metrics summary: world_size 4, 60 steps, accuracy > 0.6" python3 - "$m" <<'P'
import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if '"summary"' in l][-1]
sys.exit(not (s["world_size"] == 4 and s["steps"] == 60 and s["accuracy"] > 0.6))
P
[ -f "$m" ] || sed 's/^/    /' "$TMP/one.out"

echo "== launch errors"
expect_exit 2 "srun started 2 tasks without PMIx.*srun --mpi=pmix" \
  srun -n 2 --mpi=none "$MPDIST" configs/fashion-mnist-mlp.cfg "${small[@]}"
cat >"$TMP/bare.sh" <<B
#!/usr/bin/env bash
"$MPDIST" configs/fashion-mnist-mlp.cfg --set train.max_steps=5
echo "mpdist exit \$?"
B
job=$(sbatch --parsable -n 4 -o "$TMP/bare.out" "$TMP/bare.sh")
wait_job "$job" 60 || true
b=$TMP/bare.out
expect_ok "a bare mpdist in a 4-task job: exit 2, one message naming the job, nothing trained" \
  sh -c "grep -q '^mpdist exit 2' $b && ! grep -q '^done:' $b && [ \$(grep -c '^mpdist: error:' $b) = 1 ] &&
         grep -q '^mpdist: error: started without a launcher inside Slurm job $job, which has 4 tasks' $b"
grep '^mpdist' "$b"

echo "== time limit: signal, checkpoint, requeue, resume"
job=$(sbatch --parsable --time=1 --signal=B:USR1@40 -o "$TMP/limit.out" \
  cluster/slurm/mpdist-1node.sbatch configs/fashion-mnist-mlp.cfg --set train.max_steps=1000 \
  --set train.epochs=100 --set log.every=100 "${small[@]}")
wait_job "$job" 420 || true
m=$TMP/runs/mpdist-$job/metrics.jsonl
expect_ok "stopped by the signal with a checkpoint" grep -q "^stopped at step [0-9]* by SIGUSR1" "$TMP/limit.out"
expect_ok "requeued and resumed from it" grep -q "^resumed from .*ckpt-0*[1-9][0-9]*\.h5" "$TMP/limit.out"
expect_ok "the run finished" grep -q "run finished" "$TMP/limit.out"
expect_ok "metrics: summary of 1000 steps, step records up to 1000" python3 - "$m" <<'P'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in recs if r["type"] == "step"]
s = [r for r in recs if r["type"] == "summary"]
sys.exit(not (s and s[-1]["steps"] == 1000 and steps[-1] == 1000 and steps == sorted(steps)))
P
[ "$failures" = 0 ] || sed 's/^/    /' "$TMP/limit.out" | grep -v "^    step\|^    eval"
report_cores
finish
