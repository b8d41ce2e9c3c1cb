#!/usr/bin/env bash
# How runs end and start, at their edges (issue 18): (1) SIGTERM to launch/mpdist-run (the
# documented command; mpirun itself exits 1 after a SIGTERM whatever the ranks return): every
# rank saves and stops, exit 0, and without checkpoint.dir exits 138 (128 + SIGUSR1); (2) an error every rank reaches at the same step (divergence) is
# one line, from rank 0, exit 5, and no MPI_Abort; (3) a checkpoint.dir that cannot be written is
# exit 4 with one line before any training: under a regular file (ENOTDIR), /sys (where even root
# cannot create files), a chmod 555 directory when not root; (4) at start-up the temporaries of
# killed saves (".ckpt-<step>.h5.tmp", unchanged for 120 s) are removed on one line, a younger one
# and look-alike names are left; (5) resuming a finished run takes no step, leaves the metrics as
# they were (no second eval record, no summary of 0 images/s) and exits 0 with one line; (6) a
# resume from an older checkpoint than checkpoint.dir's newest is refused (exit 2); (7) SIGINT
# during a save removes its temporary.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
SMALL=(--set data.train_limit=2000 --set data.test_limit=200 --set train.epochs=2 --set log.progress=none)
banner='^mpdist [0-9.]+: 2 ranks'

# (1) SIGTERM to mpdist-run once training runs: with checkpoint.dir every rank saves and exits 0;
# without it nothing is kept, and the run exits 128 + SIGUSR1's 10 (what mpdist-run sends on).
# term_run NAME [ARGS]: trains in the background, sends the SIGTERM; the exit code in $rc.
term_run() {
  local name=$1 job
  shift
  MPDIST_BIN=$MPDIST "$SRC/launch/mpdist-run" -n 2 "$CFG" "${SMALL[@]}" --set train.epochs=1000 \
    --set log.every=10 --set "log.metrics=\"$TMP/$name.jsonl\"" "$@" >"$TMP/$name.out" 2>&1 &
  job=$!
  for _ in $(seq 600); do grep -qs '"type":"step"' "$TMP/$name.jsonl" && break; sleep 0.1; done
  kill -TERM "$job"
  timeout 120 tail --pid="$job" -f /dev/null || kill -9 "$job"
  rc=0
  wait "$job" || rc=$?
}
term_run term --set "checkpoint.dir=\"$TMP/term\""
if [ "$rc" = 0 ] && grep -q '^stopped at step [0-9]* by SIGUSR1; checkpoint .*/term/ckpt-' "$TMP/term.out" &&
   ls "$TMP"/term/ckpt-*.h5 >/dev/null 2>&1 && ! grep -q '^mpdist: error:' "$TMP/term.out"; then
  echo "ok: SIGTERM to mpdist-run: exit 0, $(grep '^stopped' "$TMP/term.out" | cut -d';' -f1)"
else
  echo "FAIL: SIGTERM to mpdist-run: exit $rc (want 0 with a checkpoint):"; sed 's/^/    /' "$TMP/term.out" | tail -20
  failures=$((failures + 1))
fi
term_run lost
if [ "$rc" = 138 ] && [ "$(grep -c '^stopped at step' "$TMP/lost.out")" = 1 ] &&
   grep -q '^stopped at step [0-9]* by SIGUSR1 without a checkpoint .*: exit 138 ' "$TMP/lost.out" &&
   ! grep -q '^mpdist: error:' "$TMP/lost.out"; then
  echo "ok: SIGTERM to mpdist-run without checkpoint.dir: exit 138, one line from rank 0"
else
  echo "FAIL: SIGTERM to mpdist-run without checkpoint.dir: exit $rc (want 138):"
  sed 's/^/    /' "$TMP/lost.out" | tail -20
  failures=$((failures + 1))
fi

# (2) Divergence on 2 ranks: one line, exit 5, the job ended without MPI_Abort.
expect_exit 5 '^mpdist: error: diverged: 3 steps in a row had inf/NaN gradients' \
  mpirun -np 2 "$MPDIST" "$CFG" "${SMALL[@]}" --set optim.lr=1000 --set amp.opt_level=O2 \
  --set amp.max_consecutive_skips=3
expect_ok "divergence: no MPI_Abort" sh -c "! grep -q MPI_ABORT '$TMP/out'"

# (3) checkpoint.dir that cannot be written: exit 4, one line, nothing trained.
unwritable() { # unwritable DIR REGEX
  expect_exit 4 "$2" mpirun -np 2 "$MPDIST" "$CFG" "${SMALL[@]}" --set "checkpoint.dir=\"$1\""
  expect_ok "checkpoint.dir $1: refused before training" sh -c "! grep -Eq '$banner' '$TMP/out'"
}
touch "$TMP/file"
unwritable "$TMP/file/ckpt" "checkpoint.dir .*/file/ckpt: cannot create .*/file \(Not a directory\)"
if ! touch /sys/mpdist-probe 2>/dev/null; then
  unwritable /sys "checkpoint.dir /sys: cannot create files in it"
else
  rm -f /sys/mpdist-probe
  echo "skip: /sys is writable here"
fi
if [ "$(id -u)" != 0 ]; then
  mkdir -p "$TMP/ro" && chmod 555 "$TMP/ro"
  unwritable "$TMP/ro" "checkpoint.dir .*/ro: cannot create files in it \(Permission denied\)"
  chmod 755 "$TMP/ro"
else
  echo "skip: chmod 555 (root ignores it; /sys and ENOTDIR above are what root cannot write)"
fi

# (4) and (5): a finished run, killed saves' temporaries, then a resume.
FIN=(--set "checkpoint.dir=\"$TMP/fin\"" --set "log.metrics=\"$TMP/fin.jsonl\"")
timeout 120 mpirun -np 2 "$MPDIST" "$CFG" "${SMALL[@]}" "${FIN[@]}" >"$TMP/fin.out" 2>&1 ||
  { echo "FAIL: the first run exited $?"; cat "$TMP/fin.out"; exit 1; }
cp "$TMP/fin.jsonl" "$TMP/fin.before"
for f in .ckpt-00000016.h5.tmp .ckpt-00000020.h5.tmp .ckpt-x.h5.tmp .ckpt-00000016.h5.tmp.keep notes.tmp; do
  echo torn >"$TMP/fin/$f"
done
touch -d '-10 min' "$TMP/fin/.ckpt-00000016.h5.tmp" "$TMP/fin/.ckpt-x.h5.tmp" \
  "$TMP/fin/.ckpt-00000016.h5.tmp.keep" "$TMP/fin/notes.tmp"
rc=0
timeout 120 mpirun -np 2 "$MPDIST" "$CFG" "${SMALL[@]}" "${FIN[@]}" --resume auto >"$TMP/again.out" 2>&1 || rc=$?
left=$(cd "$TMP/fin" && LC_ALL=C ls -A | paste -sd' ')
expect_ok "stale temporary removed on one line, the young one left: $(grep '^checkpoint:' "$TMP/again.out" || true)" \
  sh -c "[ \$(grep -c '^checkpoint: removed' '$TMP/again.out') = 1 ] &&
         grep -q '^checkpoint: removed .*: \.ckpt-00000016\.h5\.tmp; left \.ckpt-00000020\.h5\.tmp' '$TMP/again.out' &&
         [ '$left' = '.ckpt-00000016.h5.tmp.keep .ckpt-00000020.h5.tmp .ckpt-x.h5.tmp .mpdist.lock ckpt-00000032.h5 notes.tmp' ]"
[ "$failures" = 0 ] || echo "    checkpoint dir now holds: $left"
expect_ok "resume of a finished run: exit 0, one line, no step: $(grep '^nothing to do' "$TMP/again.out" || true)" \
  sh -c "[ $rc = 0 ] && grep -q '^nothing to do: the run is at step 32, at or past the end this config sets' '$TMP/again.out' &&
         ! grep -Eq '^done:|$banner|^mpdist: error:' '$TMP/again.out'"
expect_ok "resume of a finished run: metrics unchanged (one eval record per epoch, the first summary)" \
  cmp -s "$TMP/fin.before" "$TMP/fin.jsonl"
[ "$failures" = 0 ] || sed 's/^/    /' "$TMP/again.out"

# (6) Resuming an older checkpoint than checkpoint.dir's newest would replace or prune the newer
# ones: refused with exit 2, all left as they were; the branch runs in a directory of its own.
BR=(--set "checkpoint.dir=\"$TMP/br\"" --set "log.metrics=\"\"" --set checkpoint.every_steps=8)
timeout 120 "$MPDIST" "$CFG" "${SMALL[@]}" "${BR[@]}" --set train.max_steps=16 >"$TMP/br.out" 2>&1 ||
  { echo "FAIL: the branch's first run exited $?"; cat "$TMP/br.out"; exit 1; }
sums=$(sha256sum "$TMP"/br/ckpt-*.h5)
expect_exit 2 "checkpoint.dir .*/br holds a checkpoint of step 16, newer than .*ckpt-00000008.h5 \(step 8\)" \
  "$MPDIST" "$CFG" "${SMALL[@]}" "${BR[@]}" --set train.max_steps=24 --resume "$TMP/br/ckpt-00000008.h5"
expect_ok "the newer checkpoint and the older one left as they were" \
  test "$(sha256sum "$TMP"/br/ckpt-*.h5)" = "$sums"
rc=0
timeout 120 "$MPDIST" "$CFG" "${SMALL[@]}" "${BR[@]}" --set train.max_steps=24 \
  --resume "$TMP/br/ckpt-00000008.h5" --set "checkpoint.dir=\"$TMP/br2\"" >"$TMP/br2.out" 2>&1 || rc=$?
expect_ok "the branch in another checkpoint.dir" test "$rc" = 0

# (7) SIGINT while a checkpoint is written (the test hook raises it after the file's first
# dataset; SIGINT's default set before the exec, as a shell's background job starts with it
# ignored): the rank dies of it, exit 130, and removes its temporary.
rc=0
MPDIST_TEST_CKPT_KILL_AFTER=1 MPDIST_TEST_CKPT_KILL_SIGNAL=2 python3 -c "
import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])" "$MPDIST" "$CFG" "${SMALL[@]}" --set train.max_steps=8 \
  --set "checkpoint.dir=\"$TMP/int\"" >"$TMP/int.out" 2>&1 || rc=$?
left=$(cd "$TMP/int" && LC_ALL=C ls -A | paste -sd' ')
expect_ok "SIGINT during a save: exit $rc (want 130), checkpoint.dir holds '$left' (no temporary)" \
  test "$rc" = 130 -a "$left" = .mpdist.lock
finish
