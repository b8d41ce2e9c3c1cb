#!/usr/bin/env bash
# The NCCL transport over the test stand-in (issue 46; tests/util/nccl_standin.h) as a job sees
# its faults, through test_nccl_standin --drive (all-reduces of the gradient bucket, comm.timeout_s
# 3 s, a failure ending every rank as mpdist does):
#   - the stand-in wraps every NCCL and CUDA call the transport's object makes (nm), so none
#     reaches the real libraries in these tests;
#   - NCCL calls that stay in progress for a while: retried, the job ends well (2 and 4 ranks);
#   - an asynchronous error on rank 1: exit 6 within comm.timeout_s + 10 s, one message naming
#     rank 1 and the collective, no process left;
#   - the same error on rank 0 after its collective finished: the same end, the message naming
#     the collective before the error;
#   - an event that never completes on rank 2 of 4: the watchdog ends the job the same way,
#     naming rank 2;
#   - rank 1's communicator never forms: exit 6, every rank fails alike, rank 1 named;
#   - a reduce-scatter whose result lands one element off (a wrong offset): the collective
#     test (test_nccl_standin) fails, naming the reduce-scatter.
# Skipped (77) in a build without CUDA, where the test program has no stand-in.
source "$(dirname "$0")/common.bash"
BUILD=$(dirname "$MPDIST")
BIN=$BUILD/tests/test_nccl_standin
LIMIT=3
syms=$(nm "$BIN" 2>/dev/null || true)
if ! grep -q ' T __wrap_ncclAllReduce$' <<<"$syms"; then
  echo "no CUDA in this build, so no stand-in: skipped"
  exit 77
fi

obj=$(find "$BUILD/comm" -name 'transport_nccl.c.o' | head -1)
calls=$(nm -u "$obj" | awk '{print $2}' | grep -E '^(nccl|cuda)' | sort)
wrapped=$(echo "$syms" | awk '$2 == "T" && $3 ~ /^__wrap_/ {sub(/^__wrap_/, "", $3); print $3}' | sort)
missing=$(comm -23 <(echo "$calls") <(echo "$wrapped") | tr '\n' ' ')
expect_ok "the stand-in wraps all $(echo "$calls" | wc -l) NCCL and CUDA calls of the transport${missing:+ (missing: $missing)}" \
  test -n "$calls" -a -z "$missing"

left() { pgrep -af "^$BIN --drive" || true; }
ms() { echo $(($(date +%s%N) / 1000000)); }

for np in 2 4; do
  rc=0
  timeout -k 5 120 env MPDIST_NCCL_STANDIN=inprogress:5 MPDIST_STANDIN_TIMEOUT=$LIMIT \
    mpirun -np "$np" "$BIN" --drive 20 >"$TMP/out" 2>&1 || rc=$?
  done_ranks=$(grep -c 'rank [0-9]: 20 steps through the NCCL transport' "$TMP/out" || true)
  expect_ok "$np ranks, NCCL in progress for 5 polls at every call: exit $rc, $done_ranks ranks did 20 steps" \
    test "$rc" = 0 -a "$done_ranks" = "$np"
done

# fault NP FAULT RANK WHAT: the job ends with exit 6 within LIMIT + 10 s, with one error line
# naming RANK and matching WHAT, and no process left.
fault() {
  local np=$1 spec=$2 rank=$3 what=$4 t0 took
  t0=$(ms)
  expect_exit 6 "\[rank $rank @ [^]]*\] .*$what" env MPDIST_NCCL_STANDIN="$spec" \
    MPDIST_STANDIN_TIMEOUT=$LIMIT mpirun -np "$np" "$BIN" --drive 20
  took=$(($(ms) - t0))
  expect_ok "$spec on $np ranks ended after $took ms (at most $(((LIMIT + 10) * 1000)))" \
    test "$took" -le $(((LIMIT + 10) * 1000))
  sleep 0.5
  expect_ok "$spec: no process left $(left)" test -z "$(left)"
}
fault 2 async:1:5 1 "NCCL failed in the gradient bucket at step 4: unhandled system error"
fault 2 late:0:3 0 "NCCL failed after the gradient bucket at step 2: unhandled system error"
fault 4 hang:2:7 2 "timed out after [0-9]+ s \(comm\.timeout_s\) in the gradient bucket at step 6"
fault 2 initstuck:1 1 "NCCL did not finish creating the communicator within $LIMIT s"

rc=0
timeout -k 5 120 env MPDIST_NCCL_STANDIN=rs_offset mpirun -np 2 "$BIN" >"$TMP/sabotage" 2>&1 ||
  rc=$?
expect_ok "a reduce-scatter one element off fails the collective test (exit $rc)" \
  grep -q 'reduce-scatter of .*wrong elements' "$TMP/sabotage"
expect_ok "and the test program exits nonzero" test "$rc" != 0
finish
