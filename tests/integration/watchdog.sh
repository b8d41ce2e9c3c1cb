#!/usr/bin/env bash
# No job hangs: in the middle of training on 3 ranks, (1) one rank is killed (SIGKILL): the
# job ends within comm.timeout_s + 10 s with exit code 6 or the launcher's abort code and a
# message; (2) one rank is stopped (SIGSTOP, a hung rank): the others' watchdog ends the job
# within comm.timeout_s + 10 s with exit code 6 and one message naming the collective, the step
# and the rank that did not arrive. Either way no process of the job is left behind.
source "$(dirname "$0")/common.bash"
TIMEOUT=5

cfg=$TMP/long.cfg
printf 'data: { batch_size = 16; };\nmodel: { hidden = [256, 128]; };\n'"train: { epochs = 1000; };\ncomm: { timeout_s = $TIMEOUT.0; };\nlog: { progress = \"none\"; every = 20; metrics = \"%s\"; };\n" "$TMP/m.jsonl" >"$cfg"

ranks() { pgrep -f "^$MPDIST $cfg" || true; }

# run_and_hit SIGNAL: starts the job, waits for training, signals its rank 1; sets rc, took
run_and_hit() {
  local sig=$1
  rm -f "$TMP/m.jsonl"
  mpirun -np 3 "$MPDIST" "$cfg" >"$TMP/out" 2>&1 &
  local job=$!
  for _ in $(seq 600); do
    grep -q '"type":"step"' "$TMP/m.jsonl" 2>/dev/null && break
    sleep 0.1
  done
  grep -q '"type":"step"' "$TMP/m.jsonl" || { echo "FAIL: training did not start"; cat "$TMP/out"; kill -9 $job; exit 1; }
  local victim
  victim=$(ranks | sed -n 2p)
  [ -n "$victim" ] || { echo "FAIL: no rank processes found"; exit 1; }
  local t0=$SECONDS
  kill -"$sig" "$victim"
  rc=0
  timeout $((TIMEOUT + 60)) tail --pid=$job -f /dev/null || true
  wait $job || rc=$?
  took=$((SECONDS - t0))
  sleep 1
  left=$(ranks | wc -l)
  if [ "$left" != 0 ]; then
    echo "FAIL: $left process(es) left behind after SIG$sig"
    ranks | xargs -r kill -9
    failures=$((failures + 1))
  fi
  if [ "$took" -gt $((TIMEOUT + 10)) ]; then
    echo "FAIL: SIG$sig: the job took $took s to end (limit $((TIMEOUT + 10)) s)"
    failures=$((failures + 1))
  fi
}

run_and_hit KILL
# Open MPI's launcher notices the dead rank first and ends the job with its own code and
# message; our watchdog (exit 6) would otherwise.
if { [ "$rc" = 6 ] && grep -q '^mpdist: error: comm: ' "$TMP/out"; } ||
   { [ "$rc" != 0 ] && grep -Eiq 'signal 9|killed' "$TMP/out"; }; then
  echo "ok: SIGKILL: exit $rc after $took s: $(grep -Ei 'signal 9|killed|mpdist: error' "$TMP/out" | head -1)"
else
  echo "FAIL: SIGKILL: exit $rc, output:"; sed 's/^/    /' "$TMP/out" | head -20
  failures=$((failures + 1))
fi

run_and_hit STOP
errors=$(grep -c '^mpdist: error:' "$TMP/out" || true)
if [ "$rc" = 6 ] && [ "$errors" = 1 ] &&
   grep '^mpdist: error:' "$TMP/out" | grep -Eq "timed out after [0-9]+ s \(comm.timeout_s\) in [a-z].* at step [0-9]+; ranks that did not arrive: 1 \("; then
  echo "ok: SIGSTOP: exit $rc after $took s: $(grep '^mpdist: error:' "$TMP/out")"
else
  echo "FAIL: SIGSTOP: exit $rc, $errors error line(s), output:"; sed 's/^/    /' "$TMP/out" | head -20
  failures=$((failures + 1))
fi
finish
