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
#   - a collective that never finishes on rank 2 of 4 while the others wait for it in the
#     next: the watchdogs' census names rank 2, and rank 0 alone says so;
#   - a rank stopped with SIGSTOP (rank 1 of 2, rank 2 of 4, rank 0 of 2): exit 6 within
#     comm.timeout_s + 10 s, one line naming the stopped rank, no process left;
#   - rank 1's communicator never forms: exit 6, every rank fails alike, rank 1 named;
#   - each step a launch of a graph that holds the all-reduce (captured once): 20 good steps;
#     then a captured collective that hangs on rank 1 at each launch: exit 6, the watchdog
#     naming the graph's launch and the census rank 1;
#   - a reduce-scatter whose result lands one element off (a wrong offset): the collective
#     test (test_nccl_standin) fails, naming the reduce-scatter.
# Skipped (77) in a build without CUDA, where the test program has no stand-in.
source "$(dirname "$0")/common.bash"
BUILD=$(dirname "$MPDIST")
BIN=$BUILD/tests/test_nccl_standin
LIMIT_S=2.5 # comm.timeout_s, a fraction: the messages say it unrounded
LIMIT=3     # a whole number of seconds at least LIMIT_S, for the deadlines
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
  timeout -k 5 120 env MPDIST_NCCL_STANDIN=inprogress:5 MPDIST_STANDIN_TIMEOUT=$LIMIT_S \
    mpirun -np "$np" "$BIN" --drive 20 >"$TMP/out" 2>&1 || rc=$?
  done_ranks=$(grep -c 'rank [0-9]: 20 steps through the NCCL transport' "$TMP/out" || true)
  expect_ok "$np ranks, NCCL in progress for 5 polls at every call: exit $rc, $done_ranks ranks did 20 steps" \
    test "$rc" = 0 -a "$done_ranks" = "$np"
done

# ended NP T0 WHAT: the job that started at T0 (ms) ended within LIMIT + 10 s and left no
# process (after expect_exit checked its code and line).
ended() {
  local took=$(($(ms) - $2))
  expect_ok "$3 on $1 ranks ended after $took ms (at most $(((LIMIT + 10) * 1000)))" \
    test "$took" -le $(((LIMIT + 10) * 1000))
  sleep 0.5
  expect_ok "$3: no process left $(left)" test -z "$(left)"
}

# fault NP FAULT REGEX: the job ends with exit 6 and one error line matching REGEX.
fault() {
  local t0
  t0=$(ms)
  expect_exit 6 "$3" env MPDIST_NCCL_STANDIN="$2" MPDIST_STANDIN_TIMEOUT=$LIMIT_S \
    mpirun -np "$1" "$BIN" --drive 20
  ended "$1" "$t0" "$2"
}
fault 2 async:1:5 "\[rank 1 @ [^]]*\] NCCL failed in the gradient bucket at step 4: unhandled system error"
fault 2 late:0:3 "\[rank 0 @ [^]]*\] NCCL failed after the gradient bucket at step 2: unhandled system error"
# Rank 2's launch 7 never finishes: it stays in step 6 while the others wait for it in step 7;
# of the ranks past their limit, rank 0 reports, naming rank 2 from the census.
fault 4 hang:2:7 "\[rank 0 @ [^]]*\] timed out after ${LIMIT_S//./\\.} s \(comm\.timeout_s\) in the gradient bucket at step 7 \(NCCL\); ranks that did not arrive: 2 \([^,]*, not there yet"
fault 2 initstuck:1 "\[rank 1 @ [^]]*\] NCCL did not finish creating the communicator within ${LIMIT_S//./\\.} s"

# The step as a graph that holds its all-reduce (the transport's capture mode, as CUDA graphs
# capture NCCL): 20 launches on 2 ranks, each checked; then the captured collective hangs on
# rank 1 at every launch: the watchdog times each launch as one collective, names the graph,
# and its census names rank 1.
rc=0
timeout -k 5 120 env MPDIST_STANDIN_GRAPH=1 mpirun -np 2 "$BIN" --drive 20 >"$TMP/out" 2>&1 || rc=$?
done_ranks=$(grep -c "rank [0-9]: 20 steps through the NCCL transport, each a graph's launch" "$TMP/out" || true)
expect_ok "2 ranks, each step a graph's launch: exit $rc, $done_ranks ranks did 20 steps" \
  test "$rc" = 0 -a "$done_ranks" = 2
export MPDIST_STANDIN_GRAPH=1
fault 2 hang:1:1 "\[rank 0 @ [^]]*\] timed out after ${LIMIT_S//./\\.} s \(comm\.timeout_s\) in the step's graph at step 1 \(NCCL\); ranks that did not arrive: 1 \("
unset MPDIST_STANDIN_GRAPH

# stopped NP RANK: rank RANK of a long drive is stopped (SIGSTOP) while the others wait for it
# inside a collective: exit 6, one line from rank 0 (or 1) naming RANK first from the census.
rank_pid() { # rank_pid R: the process of rank R of the drive
  local p
  for p in $(pgrep -f "^$BIN --drive" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
  return 0
}
# The stopped rank, silent, comes first; ranks it left inside the collective it did not finish
# (a ring ends on some ranks before others) may follow, each answering that it is behind.
behind="(, [0-9]+ \\([^,)]*, not there yet: computing, or in an earlier collective\\))*"
stopped() {
  local np=$1 victim_rank=$2 reporter=$(($2 == 0 ? 1 : 0)) job t0 victim="" rc=0 errors
  env MPDIST_STANDIN_TIMEOUT=$LIMIT_S MPDIST_STANDIN_STEP_S=0.01 timeout -k 5 120 \
    mpirun -np "$np" "$BIN" --drive 1000000 >"$TMP/out" 2>&1 &
  job=$!
  for _ in $(seq 100); do victim=$(rank_pid "$victim_rank"); [ -z "$victim" ] || break; sleep 0.1; done
  sleep 1
  t0=$(ms)
  kill -STOP "$victim"
  wait "$job" || rc=$?
  errors=$(grep -c '^mpdist: error:' "$TMP/out" || true)
  if [ "$rc" = 6 ] && [ "$errors" = 1 ] && grep '^mpdist: error:' "$TMP/out" | grep -Eq \
     "\[rank $reporter @ [^]]*\] timed out after ${LIMIT_S//./\\.} s \(comm\.timeout_s\) in the gradient bucket at step [0-9]+ \(NCCL\); ranks that did not arrive: $victim_rank \([^,)]*\)$behind\$"; then
    echo "ok: rank $victim_rank of $np stopped: exit 6: $(grep '^mpdist: error:' "$TMP/out")"
  else
    echo "FAIL: rank $victim_rank of $np stopped: exit $rc, $errors error line(s):"
    sed 's/^/    /' "$TMP/out" | head -20
    failures=$((failures + 1))
  fi
  ended "$np" "$t0" "SIGSTOP of rank $victim_rank"
}
stopped 2 1
stopped 4 2
stopped 2 0

rc=0
timeout -k 5 120 env MPDIST_NCCL_STANDIN=rs_offset mpirun -np 2 "$BIN" >"$TMP/sabotage" 2>&1 ||
  rc=$?
expect_ok "a reduce-scatter one element off fails the collective test (exit $rc)" \
  grep -q 'reduce-scatter of .*wrong elements' "$TMP/sabotage"
expect_ok "and the test program exits nonzero" test "$rc" != 0
finish
