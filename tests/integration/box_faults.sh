#!/usr/bin/env bash
# labels: integration cluster
# serial
# Network faults across the box's hosts (issue 22, cluster/box): 2 hosts x 2 ranks train through
# launch/mpdist-run, and in the middle of training (1) host h2's link is cut (its interface
# down: an all-reduce is always under way or a few ms off): the job ends with exit code 6 within
# comm.timeout_s + 10 s, one rank's message names the ranks that did not arrive, 2 (h2) and
# 3 (h2), and no rank is left on either host; (2) host h2 dies (its link gone and every process
# on it killed, so no FIN leaves it): the same; (3) only h2's ranks are killed (its daemon lives
# and reports them): the job ends within the limit with 6 or the launcher's code and a message,
# nothing left; (4) h2's link is slow (400 ms of delay through mpdist-delayline and 4 Mbit/s):
# every all-reduce takes seconds, within comm.timeout_s, and the run finishes with exit 0.
# Skipped (77) where network namespaces cannot be made; the box is torn down however it ends.
source "$(dirname "$0")/common.bash"
box=$SRC/cluster/box
job=
end_job() { # kills the job's mpdist-run and what it started (mpirun, tee) if they still run
  [ -n "$job" ] || return 0
  pkill -KILL -P "$job" 2>/dev/null || true
  kill -KILL "$job" 2>/dev/null || true
  return 0
}
trap 'end_job; bash "$box/down.sh"; rm -rf "$TMP"' EXIT
TIMEOUT=5
rc=0
bash "$box/up.sh" 2 >/dev/null || rc=$?
[ "$rc" = 77 ] && { echo "skipped: network namespaces cannot be made here"; exit 77; }
[ "$rc" = 0 ] || { echo "FAIL: cluster/box/up.sh 2 exited $rc"; exit 1; }
export MPDIST_BIN=$MPDIST MPDIST_MPIRUN_ARGS="--host h1:2,h2:2 $("$box/mpirun-args")"

ranks_on() { # HOST...: the mpdist processes on these box hosts
  local h
  for h in "$@"; do
    ip netns pids "mpbox-$h" 2>/dev/null | while read -r p; do
      [ "$(cat "/proc/$p/comm" 2>/dev/null)" = mpdist ] && echo "$p"
    done
  done
  return 0
}

# start TIMEOUT_S MPDIST-ARGS...: starts the 4-rank job in the background and waits for its
# first step record; sets job
start() {
  local timeout_s=$1
  shift
  rm -f "$TMP/m.jsonl"
  "$SRC/launch/mpdist-run" -n 4 "$SRC/configs/fashion-mnist-mlp.cfg" --set data.train_limit=6000 \
    --set data.test_limit=1000 --set "comm.timeout_s=$timeout_s" --set log.progress='"none"' \
    --set log.every=5 --set "log.metrics=\"$TMP/m.jsonl\"" "$@" >"$TMP/out" 2>&1 &
  job=$!
  for _ in $(seq 600); do
    grep -q '"type":"step"' "$TMP/m.jsonl" 2>/dev/null && return 0
    sleep 0.1
  done
  echo "FAIL: training did not start"; sed 's/^/    /' "$TMP/out"; exit 1
}

# fault NAME COMMAND...: starts a long run, runs COMMAND (the fault) and waits for the job's end;
# checks the limit and that no rank is left; sets rc
fault() {
  local name=$1
  shift
  start "$TIMEOUT.0" --set train.epochs=1000
  local t0=$SECONDS
  "$@"
  timeout $((TIMEOUT + 60)) tail --pid="$job" -f /dev/null || true
  kill -0 "$job" 2>/dev/null && end_job
  rc=0
  wait "$job" || rc=$?
  local took=$((SECONDS - t0))
  expect_ok "$name: the job ended in $took s (limit $((TIMEOUT + 10)) s)" test "$took" -le $((TIMEOUT + 10))
  sleep 1
  expect_ok "$name: no rank left on either host" test -z "$(ranks_on h1 h2)"
}

# a rank's watchdog message: the step, and the ranks that did not arrive, 2 and 3 on h2 (an h1
# rank that finished its part of the collective first is named as past it; an h1 rank still in
# the collective before, whose share needed h2's data, as not arrived with what it is in, as a
# fresh clone's CI run showed on 2026-11-27)
names_h2() {
  grep -aE '^mpdist: error: comm: timed out after [0-9]+ s \(comm\.timeout_s\) in .* at step [0-9]+; ranks that did not arrive: (1 \(h1, still in [^)]*\), )?2 \(h2\), 3 \(h2\)(; .* is past it, in .*)?$' "$TMP/out"
}
exit6() { # WHAT: exit code 6 and the message
  if [ "$rc" = 6 ] && names_h2 >/dev/null; then
    echo "ok: $1: exit 6: $(names_h2 | head -1)"
  else
    echo "FAIL: $1: exit $rc, output:"; grep -a "mpdist: error" "$TMP/out" | cat -A | sed 's/^/    /'; grep -av '^step\|^eval' "$TMP/out" | sed 's/^/    /' | head -30
    failures=$((failures + 1))
  fi
}
restore() { # the box as it was: h2's link up, or both hosts afresh after a host died
  bash "$box/down.sh"
  bash "$box/up.sh" 2 >/dev/null
}

echo "== (1) h2's link cut"
fault "link cut" bash "$box/shape.sh" 2 --down
exit6 "link cut"
restore

echo "== (2) h2 dies: its link gone, all its processes killed"
# The shell that cluster/box/exec.sh left in h2 is mpirun's child, the "ssh" of this launch: on
# a real cluster it lives on the launching host and waits on its dead connection, so it is
# stopped here (down.sh kills it), and only what runs below it, h2's daemon and ranks, is killed.
host_dies() {
  bash "$box/shape.sh" 2 --down
  local pids p
  pids=$(ip netns pids mpbox-h2)
  for p in $pids; do
    grep -qx "$(ps -o ppid= -p "$p" | tr -d ' ')" <<<"$pids" || kill -STOP "$p"
  done
  for p in $pids; do
    grep -qx "$(ps -o ppid= -p "$p" | tr -d ' ')" <<<"$pids" && kill -KILL "$p"
  done
  return 0
}
fault "host died" host_dies
exit6 "host died"
restore

echo "== (3) h2's ranks killed, its daemon alive"
kill_ranks() { ranks_on h2 | xargs -r kill -KILL; }
fault "ranks killed" kill_ranks
if { [ "$rc" = 6 ] && names_h2 >/dev/null; } || { [ "$rc" != 0 ] && grep -Eaiq 'signal 9|killed' "$TMP/out"; }; then
  echo "ok: ranks killed: exit $rc: $(grep -Eai 'signal 9|killed|^mpdist: error' "$TMP/out" | head -1)"
else
  echo "FAIL: ranks killed: exit $rc, output:"; grep -av '^step\|^eval' "$TMP/out" | sed 's/^/    /' | head -30
  failures=$((failures + 1))
fi
restore

echo "== (4) a slow link within comm.timeout_s"
# The MLP's all-reduce moves 0.94 MB of FP32 gradients a step; at 4 Mbit/s each all-reduce takes
# seconds (or 0.4 s more with the delay), well within a 20 s timeout.
# h2's link is slow from the start, so every step's all-reduce crosses it.
# Where the delay line cannot run (not built, no iptables: shape.sh exits 77), the rate alone.
slow=(--delay 400ms --rate 4mbit)
src=0
bash "$box/shape.sh" 2 "${slow[@]}" 2>"$TMP/shape.err" || src=$?
if [ "$src" = 77 ]; then
  echo "note: $(cat "$TMP/shape.err"); the slow link is 4 Mbit/s without the delay"
  slow=(--rate 4mbit)
  bash "$box/shape.sh" 2 "${slow[@]}"
elif [ "$src" != 0 ]; then
  echo "FAIL: cluster/box/shape.sh 2 ${slow[*]} exited $src: $(cat "$TMP/shape.err")"
  failures=$((failures + 1))
fi
start 20.0 --set train.max_steps=10
rc=0
timeout 300 tail --pid="$job" -f /dev/null || true
wait "$job" || rc=$?
expect_ok "slow link (${slow[*]}): the run finished with exit 0 (exit $rc)" test "$rc" = 0
slowest=$(python3 -c '
import json, sys
print(max(r["comm_ms"] for r in map(json.loads, open(sys.argv[1])) if r["type"] == "step"))' "$TMP/m.jsonl")
expect_ok "slow link: the slowest step spent $slowest ms in communication (at least 1000, under 20000)" \
  python3 -c "import sys; sys.exit(not 1000 <= $slowest < 20000)"
expect_ok "slow link: no watchdog message" sh -c "! grep -q '^mpdist: error' '$TMP/out'"
finish
