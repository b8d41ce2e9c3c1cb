#!/usr/bin/env bash
# A launcher's environment that no launch gives (a rank beyond its size: variables left over from
# another job, or set by hand) is one error line, exit 2, from train and bench-comm (it was a
# silent exit 2: the process took itself for a rank other than 0, which prints, and no rank 0
# was there); inspect, export and sample do their work there instead of exiting 0 having done
# nothing. A launch MPI did not wire up still says so once, from the launcher's rank 0.
# The CPU threads per rank follow OMP_NUM_THREADS, then OPENBLAS_NUM_THREADS, never more than the
# cores the process may run on (docs/reproducibility.md).
source "$(dirname "$0")/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cfg=$SRC/configs/fashion-mnist-mlp.cfg
small=(--set data.train_limit=256 --set data.test_limit=64 --set log.progress=\"none\")
slurm=(SLURM_STEP_ID=0 SLURM_STEP_NUM_TASKS=1 SLURM_PROCID=3)
expect_exit 2 'srun says this is rank 3 \(SLURM_PROCID\) but MPI says rank 0 of 1' \
  env "${slurm[@]}" "$MPDIST" "$cfg" "${small[@]}"
expect_exit 2 'a PMI launcher says this is rank 5 \(PMI_RANK\)' \
  env PMI_SIZE=1 PMI_RANK=5 "$MPDIST" "$cfg" "${small[@]}"
expect_exit 2 'mpirun started 2 processes \(OMPI_COMM_WORLD_SIZE=2\) but MPI sees 1 rank' \
  env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=0 "$MPDIST" "$cfg" "${small[@]}"
# Another MPI's launcher starts 4 one-rank jobs: the error is said once, by launcher rank 0.
for r in 0 1 2 3; do
  env PMI_SIZE=4 PMI_RANK=$r timeout 60 "$MPDIST" "$cfg" "${small[@]}" 2>&1 >/dev/null | grep -c '^mpdist: error:' || true
done >"$TMP/lines"
expect_ok "4 lone processes of a 4-process launch: one error line, from rank 0" \
  test "$(tr '\n' ' ' <"$TMP/lines")" = "1 0 0 0 "
expect_exit 2 'a PMI launcher says this is rank 3' env PMI_SIZE=1 PMI_RANK=3 "$MPDIST" bench-comm -b 8 -e 8
expect_exit 2 'unknown option|--bogus' env PMI_SIZE=1 PMI_RANK=3 "$MPDIST" "$cfg" --bogus

timeout 120 "$MPDIST" "$cfg" "${small[@]}" --set train.max_steps=2 --set "checkpoint.dir=\"$TMP/ck\"" \
  --set "log.metrics=\"\"" >"$TMP/train.out" 2>&1 || { echo "FAIL: training"; cat "$TMP/train.out"; exit 1; }
ck=$(ls "$TMP"/ck/ckpt-*.h5 | tail -1)
expect_exit 4 'nowhere.h5' env "${slurm[@]}" "$MPDIST" inspect "$TMP/nowhere.h5"
env "${slurm[@]}" timeout 60 "$MPDIST" export "$ck" "$TMP/out.h5" >"$TMP/export.out" 2>&1 || true
expect_ok "export under a rank no launch gives writes its file" test -s "$TMP/out.h5"
env OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_RANK=1 timeout 60 "$MPDIST" export "$ck" "$TMP/r1.h5" \
  >"$TMP/r1.out" 2>&1 || true
expect_ok "export as rank 1 of a launch leaves the work to rank 0" test ! -e "$TMP/r1.h5"

# threads OMP BLAS [CMD...]: the start-up line's CPU threads per rank with those variables (-:
# unset), the process started through CMD (e.g. taskset); the whole output in $TMP/threads.out
threads() {
  local e=(env -u OMP_NUM_THREADS -u OPENBLAS_NUM_THREADS)
  [ "$1" = - ] || e+=("OMP_NUM_THREADS=$1")
  [ "$2" = - ] || e+=("OPENBLAS_NUM_THREADS=$2")
  shift 2
  "${e[@]}" "$@" timeout 120 "$MPDIST" "$cfg" "${small[@]}" --set train.max_steps=1 \
    --set "log.metrics=\"\"" >"$TMP/threads.out" 2>&1 || true
  sed -n 's/^mpdist .*, \([0-9]*\) CPU threads\{0,1\} per rank$/\1/p' "$TMP/threads.out"
}
expect_ok "OMP_NUM_THREADS=1 over OPENBLAS_NUM_THREADS=2: 1 thread" test "$(threads 1 2)" = 1
expect_ok "OMP_NUM_THREADS=1,2 (a list, as OpenMP reads it): the outer level's 1" test "$(threads 1,2 2)" = 1
expect_ok "OMP_NUM_THREADS=abc: a warning, then OPENBLAS_NUM_THREADS=1" \
  test "$(threads abc 1)" = 1 -a "$(grep -c "^mpdist: warning: OMP_NUM_THREADS='abc' is not a thread count; ignored$" "$TMP/threads.out")" = 1
expect_ok "OMP_NUM_THREADS=1, (no count after the comma): a warning" \
  test "$(threads 1, 1)" = 1 -a "$(grep -c "^mpdist: warning: OMP_NUM_THREADS='1,' is not" "$TMP/threads.out")" = 1
first_cpu=$(taskset -pc $$ | sed 's/.*: //; s/[-,].*//')
expect_ok "OMP_NUM_THREADS=2 on one core (taskset -c $first_cpu): 1 thread, and a note" \
  test "$(threads 2 - taskset -c "$first_cpu")" = 1 -a "$(grep -c '^note: OMP_NUM_THREADS asks for 2 threads, but this rank may run on 1 core: 1 CPU thread per rank' "$TMP/threads.out")" = 1
if [ "$(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc)" -ge 2 ]; then
  expect_ok "OMP_NUM_THREADS=2 over OPENBLAS_NUM_THREADS=1: 2 threads" test "$(threads 2 1)" = 2
  expect_ok "OPENBLAS_NUM_THREADS=2 alone: 2 threads" test "$(threads - 2)" = 2
else
  echo "skip: 2 threads need 2 cores that this process may run on ($(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc))"
fi
finish
