#!/usr/bin/env bash
# Two runs on one checkpoint directory (issue 45, class 1): a run holds the directory's lock for
# its lifetime, so a second run started on it while the first trains (afresh, or with --resume
# auto) is refused at start-up with exit 4, naming the first (pid and host), before it writes
# anything (no metrics file, no file in the directory). The first run is held with SIGSTOP
# between its saves while the others try, so that it is surely still running, then continued. The first run's checkpoints are then
# bitwise what a lone run of the same config writes (h5diff of every saved step), and they all
# load. The lock ends with the run: a later run on the directory resumes from it. A run naming the
# first run's log.metrics (its own directory) is refused with exit 2, the file left as it is.
# A directory removed during a run is locked again by the run's next save.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set 'model.hidden=[256]' --set data.train_limit=2048 --set data.test_limit=64
        --set train.max_steps=30 --set checkpoint.every_steps=1 --set checkpoint.keep=100
        --set log.progress=none)
start() { # start NAME DIR [ARGS]: a 1-rank run in the background; its pid in $pid
  local name=$1 dir=$2
  shift 2
  timeout 300 mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$dir\"" \
    --set "log.metrics=\"$TMP/$name.jsonl\"" "$@" >"$TMP/$name.out" 2>&1 &
  pid=$!
}

start first "$TMP/shared"
first=$pid
for _ in $(seq 600); do [ -e "$TMP/shared/ckpt-00000001.h5" ] && break; sleep 0.05; done
[ -e "$TMP/shared/ckpt-00000001.h5" ] || { echo "FAIL: the first run saved nothing"; cat "$TMP/first.out"; exit 1; }
holder=$(head -1 "$TMP/shared/.mpdist.lock")
rank=${holder#pid } rank=${rank%% *}
kill -STOP "$rank" || { echo "FAIL: no process $rank (the lock file says '$holder')"; exit 1; }
ls -A "$TMP/shared" | grep -Ev '^\.?ckpt-' | LC_ALL=C sort >"$TMP/others.before"
expect_exit 4 "checkpoint.dir .*/shared is in use by another run \(pid [0-9]+ on host $(hostname), since [0-9T:-]+Z; lock file .*/\.mpdist\.lock\): give each run its own checkpoint\.dir" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/shared\"" \
  --set "log.metrics=\"$TMP/second.jsonl\"" --set train.seed=2
grep -qF "($holder;" "$TMP/out" || { echo "FAIL: the refusal does not name the holder '$holder'"; failures=$((failures + 1)); }
expect_exit 4 "is in use by another run" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" \
  --set "checkpoint.dir=\"$TMP/shared\"" --set "log.metrics=\"$TMP/third.jsonl\"" --resume auto
expect_ok "the refused runs wrote nothing (no metrics, no file in the directory)" \
  sh -c "[ ! -e '$TMP/second.jsonl' ] && [ ! -e '$TMP/third.jsonl' ] &&
         ls -A '$TMP/shared' | grep -Ev '^\.?ckpt-' | LC_ALL=C sort | cmp -s - '$TMP/others.before'"
# The metrics file is the first run's too: a run with a directory of its own but the first run's
# log.metrics is refused (exit 2) and leaves the file as it is (before 2026-12-03 it truncated
# it, and the two runs' records interleaved).
cp "$TMP/first.jsonl" "$TMP/first.jsonl.before"
expect_exit 2 "log.metrics: .*/first.jsonl is being written by another run, left as it is: give each run its own log.metrics" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/own\"" \
  --set "log.metrics=\"$TMP/first.jsonl\""
expect_ok "the first run's metrics are left as they were" cmp -s "$TMP/first.jsonl" "$TMP/first.jsonl.before"
kill -CONT "$rank"
wait "$first" || { echo "FAIL: the first run exited $?"; cat "$TMP/first.out"; exit 1; }
kill -0 "$first" 2>/dev/null && { echo "FAIL: the first run still runs"; exit 1; }

start lone "$TMP/lone"
wait "$pid" || { echo "FAIL: the lone run exited $?"; cat "$TMP/lone.out"; exit 1; }
n=0
for f in "$TMP"/lone/ckpt-*.h5; do
  g=$TMP/shared/$(basename "$f")
  [ -e "$g" ] || { echo "FAIL: the first run has no $(basename "$f")"; failures=$((failures + 1)); continue; }
  for obj in /params /optim /scaler /rng /data; do
    h5diff "$f" "$g" "$obj" "$obj" >"$TMP/diff" 2>&1 ||
      { echo "FAIL: $(basename "$f") differs from the lone run's in $obj"; head -5 "$TMP/diff"; failures=$((failures + 1)); }
  done
  "$MPDIST" inspect "$g" >/dev/null 2>&1 || { echo "FAIL: $g does not load"; failures=$((failures + 1)); }
  n=$((n + 1))
done
[ "$n" = 30 ] && [ "$(ls "$TMP"/shared/ckpt-*.h5 | wc -l)" = 30 ] ||
  { echo "FAIL: $n checkpoints compared, want 30"; failures=$((failures + 1)); }
echo "ok: the first run's $n checkpoints are bitwise the lone run's and load"
expect_ok "after the first run, the directory is free: a resume of it takes the lock and finishes" \
  timeout 120 mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/shared\"" \
  --set "log.metrics=\"$TMP/first.jsonl\"" --set train.max_steps=31 --resume auto

# The directory removed while the run trains: its next save makes it again, with the lock taken
# anew, so a second run on it is still refused (before 2026-12-03 the new directory had no lock
# and a --resume auto took it and trained beside the first run).
start gone "$TMP/gone" --set train.max_steps=3000 --set train.epochs=1000 --set checkpoint.keep=2 \
  --set checkpoint.every_steps=10
gone=$pid
wait_ckpt() { for _ in $(seq 600); do ls "$TMP"/gone/ckpt-*.h5 >/dev/null 2>&1 && return 0; sleep 0.05; done; return 1; }
wait_ckpt || { echo "FAIL: the run saved nothing"; cat "$TMP/gone.out"; exit 1; }
holder=$(head -1 "$TMP/gone/.mpdist.lock")
rank=${holder#pid } rank=${rank%% *}
pause() { # stops the rank between saves (a save cut by the removal is exit 4, not this test)
  for _ in $(seq 200); do
    kill -STOP "$rank"
    ls "$TMP"/gone/.ckpt-*.tmp >/dev/null 2>&1 || return 0
    kill -CONT "$rank"
    sleep 0.01
  done
  echo "FAIL: the rank was always saving"; exit 1
}
pause
rm -rf "$TMP/gone"
kill -CONT "$rank"
wait_ckpt || { echo "FAIL: the run did not make its directory again"; cat "$TMP/gone.out"; exit 1; }
pause
expect_exit 4 "checkpoint.dir .*/gone is in use by another run \(pid $rank on host" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/gone\"" \
  --set "log.metrics=\"$TMP/gone2.jsonl\"" --set train.max_steps=3000 --resume auto
kill -CONT "$rank"
kill -TERM "$rank"
rc=0
wait "$gone" || rc=$?
expect_ok "the first run stopped with a checkpoint (exit $rc)" \
  bash -c "[ $rc = 0 ] && grep -q '^stopped at step [0-9]* by SIGTERM; checkpoint' '$TMP/gone.out'"
finish
