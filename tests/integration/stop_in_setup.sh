#!/usr/bin/env bash
# A stop signal while a run still loads its data ends it within seconds, not after the load
# (engine/stop.h): Slurm's SIGUSR1 before a time limit, or scancel's SIGTERM, must not wait for a
# pass over a large corpus. (1) SIGTERM to launch/mpdist-run on 2 ranks while they check a 64 GB
# token shard (sparse: no disk; the check alone would take minutes here): with checkpoint.dir
# exit 0, one line from rank 0 naming the shard, no checkpoint written, no rank left; (2) SIGTERM
# to mpdist alone without checkpoint.dir: exit 143 (128 + SIGTERM); (2b) a SIGTERM sent twice
# within a second (GNU timeout's way): one request, exit 0; (3) SIGTERM while the child
# process that reads an HDF5 file's structure first (io/h5data.c) is running: exit 143 at once,
# the child ended too. The old behaviour (finish the load, then stop at the first step) fails
# each deadline.
source "$(dirname "$0")/common.bash"
# Each job runs in a session of its own (setsid): a failed check kills its whole group, and the
# exit kills whatever of this test's mpdist processes is left, so no load goes on reading.
trap 'pkill -9 -f "^$MPDIST .*$TMP" 2>/dev/null || true; rm -rf "$TMP"' EXIT
CFG=$SRC/configs/fortunes-gpt.cfg
PY=/usr/bin/python3
mkdir -p "$TMP/tok"
truncate -s 64G "$TMP/tok/huge_train.bin"
"$PY" -c "import sys; sys.stdout.buffer.write(bytes([7, 0]) * 5000)" >"$TMP/tok/small_val.bin"
tokens=(--set 'data.format="tokens"' --set "data.path=\"$TMP/tok\"" --set data.num_classes=256
  --set log.progress='"none"')

# wait_for_open FILE: waits (at most 60 s) until an mpdist process has FILE open.
wait_for_open() {
  local file=$1 p
  for _ in $(seq 600); do
    for p in $(pgrep -f "^$MPDIST .*$TMP" || true); do
      [ -n "$(find /proc/"$p"/fd -lname "$file" 2>/dev/null | head -1)" ] && return 0
    done
    sleep 0.1
  done
  return 1
}

# stopped NAME DEADLINE_S PATTERN: after a signal to $job sent at $t0, the job must end within
# DEADLINE_S seconds with its exit code in $rc, print PATTERN, and leave no mpdist process of
# this test's.
stopped() {
  local name=$1 deadline=$2 pattern=$3 took
  for _ in $(seq 2400); do kill -0 "$job" 2>/dev/null || break; sleep 0.05; done
  kill -9 -- -"$job" 2>/dev/null || true
  rc=0
  wait "$job" || rc=$?
  took=$(($(date +%s%N) / 1000000 - t0))
  if [ "$took" -gt $((deadline * 1000)) ] || ! grep -Eq -- "$pattern" "$TMP/$name.out" ||
     pgrep -f "^$MPDIST .*$TMP" >/dev/null; then
    echo "FAIL: $name: ended after $took ms (deadline $deadline s), exit $rc, want /$pattern/:"
    sed 's/^/    /' "$TMP/$name.out" | tail -12
    pgrep -af "^$MPDIST .*$TMP" | sed 's/^/    left: /'
    failures=$((failures + 1))
    return 1
  fi
  echo "ok: $name: ended $took ms after the signal, exit $rc"
}

# (1) Through mpdist-run on 2 ranks (its SIGTERM reaches the ranks as SIGUSR1).
MPDIST_BIN=$MPDIST setsid "$SRC/launch/mpdist-run" -n 2 "$CFG" "${tokens[@]}" \
  --set "checkpoint.dir=\"$TMP/ck\"" >"$TMP/run.out" 2>&1 &
job=$!
expect_ok "a rank checks the 64 GB shard" wait_for_open "$TMP/tok/huge_train.bin"
t0=$(($(date +%s%N) / 1000000))
kill -TERM "$job"
if stopped run 15 "^stopped by SIGUSR1 while checking the tokens of $TMP/tok/huge_train.bin, before the first step: nothing trained, nothing saved$"; then
  expect_ok "exit 0 with checkpoint.dir" [ "$rc" = 0 ]
  expect_ok "one stop line, no error line" [ "$(grep -c '^stopped by' "$TMP/run.out")" = 1 ]
  expect_ok "no error line" bash -c "! grep -q '^mpdist: error' '$TMP/run.out'"
  expect_ok "no checkpoint written" bash -c "! ls '$TMP'/ck/*.h5 2>/dev/null | grep -q ."
fi

# (2) mpdist alone, without checkpoint.dir: the exit of a stop that kept nothing.
setsid "$MPDIST" "$CFG" "${tokens[@]}" --set 'checkpoint.dir=""' >"$TMP/alone.out" 2>&1 &
job=$!
expect_ok "mpdist checks the 64 GB shard" wait_for_open "$TMP/tok/huge_train.bin"
t0=$(($(date +%s%N) / 1000000))
kill -TERM "$job"
stopped alone 10 '^stopped by SIGTERM while checking the tokens of' &&
  expect_ok "exit 143 without checkpoint.dir" [ "$rc" = 143 ]

# (2b) A SIGTERM sent twice, 0.2 s apart, as GNU timeout sends it (to its child, then to the
# child's process group; the two merge only when the first is still pending): one stop request,
# not a first and a second, which ended the process at once, exit 143 without a line, before
# 2026-12-03.
setsid "$MPDIST" "$CFG" "${tokens[@]}" --set "checkpoint.dir=\"$TMP/ck2\"" >"$TMP/twice.out" 2>&1 &
job=$!
expect_ok "mpdist checks the 64 GB shard again" wait_for_open "$TMP/tok/huge_train.bin"
t0=$(($(date +%s%N) / 1000000))
kill -TERM "$job"
sleep 0.2
kill -TERM "$job"
stopped twice 10 '^stopped by SIGTERM while checking the tokens of' &&
  expect_ok "SIGTERM twice within a second: exit 0, one stop request" [ "$rc" = 0 ]

# (3) HDF5: 40 million labels, deflated, which the probing child reads and checks for a while.
"$PY" - "$TMP/big.h5" <<'EOF'
import sys, h5py, numpy as np
n = 40_000_000
with h5py.File(sys.argv[1], "w") as f:
    for split, count in (("train", n), ("test", 8)):
        f.create_dataset(f"{split}/images", data=np.zeros((count, 1, 1), np.uint8),
                         chunks=(min(count, 1 << 20), 1, 1), compression="gzip")
        f.create_dataset(f"{split}/labels", data=np.zeros(count, np.int64),
                         chunks=(min(count, 1 << 20),), compression="gzip")
EOF
setsid "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set 'data.format="hdf5"' \
  --set "data.path=\"$TMP/big.h5\"" >"$TMP/h5.out" 2>&1 &
job=$!
child=
for _ in $(seq 600); do # a child with the file open (not MPI's orted, which never opens it)
  for c in $(pgrep -P "$job" || true); do
    [ -n "$(find /proc/"$c"/fd -lname "$TMP/big.h5" 2>/dev/null | head -1)" ] && child=$c
  done
  [ -n "$child" ] && break
  sleep 0.05
done
expect_ok "the HDF5 probe runs in a child" [ -n "$child" ]
t0=$(($(date +%s%N) / 1000000))
kill -TERM "$job"
# (a fast machine may be past the child, checking the labels' chunks: any stage will do)
if stopped h5 10 '^stopped by SIGTERM while .*, before the first step: nothing trained'; then
  expect_ok "exit 143" [ "$rc" = 143 ]
  expect_ok "the child is gone" bash -c "! kill -0 $child 2>/dev/null"
fi
finish
