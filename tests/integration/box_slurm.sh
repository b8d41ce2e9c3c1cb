#!/usr/bin/env bash
# labels: integration cluster nosan
# serial: its time-limit check runs on the wall clock
# Multi-node Slurm on the cluster box (issue 22): slurmctld on the box's bridge and one slurmd per
# host namespace (cluster/local-slurm/start.sh --box 2). (1) cluster/slurm/mpdist-multinode.sbatch
# as written (2 nodes x 4 tasks, 4 GPUs per node in GRES) with a 1-minute time limit and the
# signal 45 s before it: 8 ranks on h1 and h2 train over TCP between the hosts, are signalled,
# save, the job is requeued, resumes on 2 nodes and finishes (its log is printed); (2) the checkpoint of that stop resumes on 1 node
# (4 ranks) and trains to the end; (3) a launch mismatch across the hosts (srun without PMIx on
# 2 nodes) ends with exit 2 and one message. Skipped (77) where network namespaces cannot be
# made; Slurm and the box are stopped however the test ends. Needs root, slurm-wlm and munge.
source "$(dirname "$0")/common.bash"
cd "$SRC"
source "$SRC/tests/integration/slurm_jobs.bash"
box_slurm_up
# As in tests/integration/slurm.sh: jobs run as root, 8 ranks on 2 cores.
source launch/env.sh
keep_cores
# Slurm may send the signal up to 60 s early, so anywhere in the first 15 s here: 150 steps take
# longer than that at 8 ranks on 2 cores (47 steps by 15 s on 2026-11-27).
steps=150
args=(configs/fashion-mnist-mlp.cfg --set train.max_steps=$steps --set train.epochs=100
      --set data.train_limit=4096 --set data.test_limit=1000 --set log.every=20 --set log.progress=plain)

# summary METRICS WORLD: the run's last summary has WORLD ranks and $steps steps, and its step
# records rise to $steps
summary() {
  python3 - "$1" "$2" "$steps" <<'P'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
steps = [r["step"] for r in recs if r["type"] == "step"]
s = [r for r in recs if r["type"] == "summary"]
want_world, want_steps = int(sys.argv[2]), int(sys.argv[3])
sys.exit(not (s and s[-1]["world_size"] == want_world and s[-1]["steps"] == want_steps
              and steps[-1] == want_steps and steps == sorted(steps)))
P
}
bytes() { echo $(($(cat /sys/class/net/mpbv2/statistics/tx_bytes) + $(cat /sys/class/net/mpbv2/statistics/rx_bytes))); }

echo "== (1) the multi-node template as written, 2 nodes, time limit: signal, checkpoint, requeue, resume"
before=$(bytes) t0=$SECONDS
job=$(sbatch --parsable --time=1 --signal=B:USR1@45 -o "$TMP/two.out" \
  cluster/slurm/mpdist-multinode.sbatch "${args[@]}")
wait_job "$job" 420 || true
echo "(the job took $((SECONDS - t0)) s)"
crossed=$(($(bytes) - before))
run=$TMP/runs/mpdist-$job
out=$TMP/two.out
expect_ok "2 nodes, 8 tasks, 8 ranks" sh -c "grep -q '^mpdist job $job (start 1): 2 node(s), 8 tasks' $out && grep -q 'mpdist .*: 8 ranks' $out"
expect_ok "srun --mpi=pmix started them" grep -q "^mpdist-run: srun --mpi=pmix" "$out"
expect_ok "stopped by the signal with a checkpoint" grep -q "^stopped at step [0-9]* by SIGUSR1" "$out"
expect_ok "requeued and resumed on 2 nodes" sh -c "grep -q '^mpdist job $job (start 2): 2 node(s), 8 tasks' $out &&
  grep -q '^resumed from .*ckpt-0*[1-9][0-9]*\.h5' $out"
expect_ok "the run finished" grep -q "run finished" "$out"
expect_ok "metrics: 8 ranks, $steps steps" summary "$run/metrics.jsonl" 8
# Each step sums 235,146 FP32 gradients over the hosts: h2's half has to cross its link.
expect_ok "the hosts' traffic crossed h2's link ($crossed bytes, at least $((steps * 235146 * 4)))" \
  test "$crossed" -ge $((steps * 235146 * 4))
grep -v "^step\|^eval" "$out" | sed 's/^/    /'

echo "== (2) the stop's checkpoint resumes on 1 node (4 ranks)"
stop=$(sed -n 's/^stopped at step \([0-9]*\) by SIGUSR1.*/\1/p' "$out" | tail -1) # older ones may be gone
ckpt=$(printf '%s/ckpt/ckpt-%08d.h5' "$run" "${stop:-0}")
if [ -f "$ckpt" ]; then
  mkdir -p "$TMP/one/ckpt"
  cp "$ckpt" "$TMP/one/ckpt/"
  job=$(MPDIST_RUN_DIR=$TMP/one sbatch --parsable --nodes=1 -o "$TMP/one.out" \
    cluster/slurm/mpdist-multinode.sbatch "${args[@]}")
  wait_job "$job" 300 || true
  expect_ok "1 node, 4 tasks" grep -q "^mpdist job $job (start 1): 1 node(s), 4 tasks" "$TMP/one.out"
  expect_ok "resumed from step $stop" grep -q "^resumed from .*ckpt-0*$stop\.h5: step $stop" "$TMP/one.out"
  expect_ok "metrics: 4 ranks, $steps steps" summary "$TMP/one/metrics.jsonl" 4
  [ "$failures" = 0 ] || grep -v "^step\|^eval" "$TMP/one.out" | sed 's/^/    /'
else
  echo "FAIL: no checkpoint of the stop at step ${stop:-?} in $run/ckpt"; ls "$run/ckpt"
  failures=$((failures + 1))
fi

echo "== (3) a launch mismatch across the hosts"
expect_exit 2 "srun started 4 tasks without PMIx.*srun --mpi=pmix" \
  srun -N 2 -n 4 --mpi=none "$MPDIST" "${args[@]}"
report_cores
finish
