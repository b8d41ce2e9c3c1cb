#!/usr/bin/env bash
# Checkpoint files from the outside (issue 5): h5dump reads them; mpdist inspect prints the
# parameter table; export writes weights in fp16/bf16/fp32 (fp16 at most 0.52x the fp32 file),
# or fp16 with BatchNorm in FP32 (--keep-batchnorm-fp32), and mpdist eval on an export matches
# the full checkpoint's accuracy within 0.2 points (an MLP, and cnn_bn whose BatchNorm
# statistics travel in /buffers; the FP32-BatchNorm export at O3); eval needs the test files
# alone; an export ended by a signal removes its temporary; damaged, truncated, foreign and
# exported files are refused with exit 4 and the file or dataset named; a save after auto-resume
# past damaged newer files keeps the run's own older checkpoints.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set data.train_limit=4000 --set data.test_limit=1000 --set train.epochs=2
        --set amp.opt_level=O2 --set log.progress=none)

check() { # check WHAT CMD...: CMD must succeed
  local what=$1
  shift
  "$@" >"$TMP/out" 2>&1 || { echo "FAIL: $what: $* exited $?"; head -20 "$TMP/out"; exit 1; }
}
acc() { sed -nE 's/^test accuracy: ([0-9.]+)$/\1/p' "$TMP/out"; }

check "train mlp" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/mlp\""
check "train cnn_bn" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set model.preset=cnn_bn \
  --set data.train_limit=1024 --set train.epochs=1 --set "checkpoint.dir=\"$TMP/cnn\""
trained_cnn=$(acc)
MLP=$(ls "$TMP"/mlp/ckpt-*.h5) CNN=$(ls "$TMP"/cnn/ckpt-*.h5)

# h5dump (hdf5-tools) reads the layout of docs/ARCHITECTURE.md §6.
check "h5dump" h5dump -A "$MLP"
for want in 'GROUP "meta"' 'ATTRIBUTE "format_version"' 'ATTRIBUTE "config"' 'GROUP "params"' \
            'DATASET "fc1.weight"' 'GROUP "optim"' 'DATASET "momentum_buffer"' 'GROUP "scaler"' \
            'ATTRIBUTE "growth_tracker"' 'DATASET "state"' 'ATTRIBUTE "position"'; do
  grep -q "$want" "$TMP/out" || { echo "FAIL: h5dump -A lacks $want"; exit 1; }
done
check "h5dump data" h5dump -d /params/fc3.bias "$MLP"
grep -q 'H5T_IEEE_F32LE' "$TMP/out" || { echo "FAIL: fc3.bias is not stored as FP32"; exit 1; }
check "h5dump filters" h5dump -p -H -d /params/fc1.weight "$MLP"
grep -q 'CHECKSUM FLETCHER32' "$TMP/out" || { echo "FAIL: no Fletcher32 on fc1.weight"; cat "$TMP/out"; exit 1; }
echo "ok: h5dump reads $(basename "$MLP"): meta, params (FP32, Fletcher32), optim, scaler, rng, data"

# h5py (Debian's python3-h5py, installed by tests/run.sh) reads it as docs/checkpoints.md shows: the
# norms it computes are those mpdist inspect prints, the generator table has a row per rank.
/usr/bin/python3 - "$CNN" >"$TMP/h5py.out" <<'PY' || { echo "FAIL: h5py"; cat "$TMP/h5py.out"; exit 1; }
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    meta = {k: v.decode() if isinstance(v, bytes) else v  # fixed-length strings: bytes
            for k, v in f["meta"].attrs.items()}
    arrays = {k: np.asarray(v) for g in ("params", "buffers") if g in f for k, v in f[g].items()}
    assert meta["kind"] == "full" and meta["step"] == 8 and "cnn_bn" in meta["config"], meta
    assert f["rng/state"].shape == (2, 4) and f["scaler"].attrs["scale"] > 0
for k, v in sorted(arrays.items()):
    print("%s %.6g" % (k, np.sqrt((v.astype(np.float64) ** 2).sum())))
PY
"$MPDIST" inspect "$CNN" >"$TMP/inspect.out"
while read -r name norm; do
  grep -Eq "^  $name +\[[0-9, ]+\] +fp32 +$norm\$" "$TMP/inspect.out" || { echo "FAIL: h5py norm of $name $norm not in inspect"; cat "$TMP/inspect.out"; exit 1; }
done <"$TMP/h5py.out"
echo "ok: h5py reads $(wc -l <"$TMP/h5py.out") arrays with the norms mpdist inspect prints"

# inspect: a table row per parameter and buffer, scaler and optimizer lines.
check "inspect" "$MPDIST" inspect "$CNN"
for want in '^  conv1.weight +\[' '^  bn1.running_var +\[' '^scaler: dynamic scale' '^optimizer: sgd, [0-9]+ steps'; do
  grep -Eq "$want" "$TMP/out" || { echo "FAIL: inspect lacks /$want/"; cat "$TMP/out"; exit 1; }
done
echo "ok: inspect: $(grep -c '^  ' "$TMP/out") table rows"

# export ended by a signal (SIGTERM, SIGUSR1, SIGINT, SIGHUP) while it writes: it dies of the signal and
# removes its temporary (`.OUT.<pid>-0.tmp`), leaving no OUT; SIGKILL cannot be caught and leaves
# the temporary (shown, so that the check can fail). A signal the process was started with
# ignored (nohup's SIGHUP) stays ignored: the export completes. The signals' dispositions are set
# before the exec, since a shell's background job starts with SIGINT ignored.
# signalled DISPOSITION SIG OUT: export $MLP to OUT with the test hook raising SIG after the first
# dataset, SIGINT and SIGHUP set to DISPOSITION ("SIG_DFL" or "SIG_IGN"); the exit code in $rc.
signalled() {
  rc=0
  MPDIST_TEST_CKPT_KILL_AFTER=1 MPDIST_TEST_CKPT_KILL_SIGNAL=$2 python3 -c "
import os, signal, sys
for s in (signal.SIGINT, signal.SIGHUP):
    signal.signal(s, signal.$1)
os.execv(sys.argv[1], sys.argv[1:])" "$MPDIST" export "$MLP" "$3" >"$TMP/out" 2>&1 || rc=$?
}
mkdir -p "$TMP/sig"
for sig in 15 10 2 1 9; do
  signalled SIG_DFL $sig "$TMP/sig/w$sig.h5"
  left=$(cd "$TMP/sig" && LC_ALL=C ls -A | { grep "w$sig" || true; } | paste -sd' ')
  if [ "$sig" = 9 ]; then want="\.w9\.h5\.[0-9]+-0\.tmp"; else want=""; fi
  if [ "$rc" = $((128 + sig)) ] && [[ $left =~ ^$want$ ]]; then
    echo "ok: export ended by signal $sig: exit $rc, left: ${left:-nothing}"
  else
    echo "FAIL: export ended by signal $sig: exit $rc (want $((128 + sig))), left: '$left'"
    cat "$TMP/out"
    exit 1
  fi
done
signalled SIG_IGN 1 "$TMP/sig/nohup.h5"
if [ "$rc" = 0 ] && [ -s "$TMP/sig/nohup.h5" ]; then
  echo "ok: export started with SIGHUP ignored (nohup) ignores it and completes"
else
  echo "FAIL: export started with SIGHUP ignored: exit $rc, $(ls -A "$TMP/sig" | paste -sd' ')"
  cat "$TMP/out"
  exit 1
fi

# export: fp16 and bf16 about half of fp32; eval of each within 0.2 points of the checkpoint.
for src in mlp cnn; do
  file=$(ls "$TMP/$src"/ckpt-*.h5)
  extra=()
  [ $src = cnn ] && extra=(--set model.preset=cnn_bn --set data.train_limit=1024)
  for dt in fp32 fp16 bf16; do check "export $dt" "$MPDIST" export "$file" "$TMP/$src-$dt.h5" --dtype $dt; done
  s32=$(stat -c %s "$TMP/$src-fp32.h5") s16=$(stat -c %s "$TMP/$src-fp16.h5")
  awk -v a=$s16 -v b=$s32 'BEGIN { exit !(a <= 0.52 * b) }' || { echo "FAIL: $src fp16 export $s16 bytes vs fp32 $s32"; exit 1; }
  check "eval full" mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" "${extra[@]}" --checkpoint "$file"
  full=$(acc)
  # The whole model state is in the file: eval gives exactly what training ended with.
  [ $src = mlp ] || [ "$full" = "$trained_cnn" ] || { echo "FAIL: cnn_bn trained to $trained_cnn, its checkpoint evaluates to $full"; exit 1; }
  for dt in fp32 fp16 bf16; do
    check "eval $dt" mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" "${extra[@]}" --checkpoint "$TMP/$src-$dt.h5"
    awk -v a="$(acc)" -v b="$full" 'BEGIN { d = a - b; exit !(d <= 0.002 && d >= -0.002) }' ||
      { echo "FAIL: $src $dt export accuracy $(acc), checkpoint $full"; exit 1; }
    echo "ok: $src $dt export: $(stat -c %s "$TMP/$src-$dt.h5") bytes, accuracy $(acc) (checkpoint $full)"
  done
  echo "ok: $src fp16 export is $(awk -v a=$s16 -v b=$s32 'BEGIN { printf "%.3f", a / b }')x the fp32 export"
done

# --keep-batchnorm-fp32: BatchNorm's parameters and running statistics stay FP32, the rest is
# fp16 (an MLP has none: all fp16); eval of it at O3 with FP32 BatchNorm is within 0.2 points of
# the checkpoint and prints its speed and bytes.
check "export fp16 bn32" "$MPDIST" export "$CNN" "$TMP/cnn-fp16bn.h5" --dtype fp16 --keep-batchnorm-fp32
grep -q "in fp16, BatchNorm in fp32" "$TMP/out" || { echo "FAIL: export's line"; cat "$TMP/out"; exit 1; }
h5dump -a /meta/batchnorm_dtype "$TMP/cnn-fp16bn.h5" | grep -q '"fp32"' || { echo "FAIL: /meta/batchnorm_dtype is not fp32"; exit 1; }
check "inspect fp16 bn32" "$MPDIST" inspect "$TMP/cnn-fp16bn.h5"
for want in '^  bn1.weight +\[32\] +fp32 ' '^  bn2.bias +\[64\] +fp32 ' '^  bn1.running_var +\[32\] +fp32 ' \
            '^  bn2.running_mean +\[64\] +fp32 ' '^  conv1.weight +\[[0-9, ]+\] +fp16 ' '^  fc1.bias +\[128\] +fp16 '; do
  grep -Eq "$want" "$TMP/out" || { echo "FAIL: the fp16 export with FP32 BatchNorm lacks /$want/"; cat "$TMP/out"; exit 1; }
done
[ "$(grep -Ec '^  [a-z0-9_.]+ +\[[0-9, ]+\] +fp32 ' "$TMP/out")" = 8 ] || { echo "FAIL: not 8 FP32 rows"; cat "$TMP/out"; exit 1; }
check "export mlp fp16 bn32" "$MPDIST" export "$MLP" "$TMP/mlp-fp16bn.h5" --dtype fp16 --keep-batchnorm-fp32
grep -q "in fp16 (the model has no BatchNorm: --keep-batchnorm-fp32 changed nothing)$" "$TMP/out" ||
  { echo "FAIL: export's line for a model without BatchNorm"; cat "$TMP/out"; exit 1; }
check "inspect mlp fp16 bn32" "$MPDIST" inspect "$TMP/mlp-fp16bn.h5"
! grep -Eq ' fp32 ' "$TMP/out" || { echo "FAIL: an MLP has no BatchNorm, yet FP32 rows"; cat "$TMP/out"; exit 1; }
! h5dump -a /meta/batchnorm_dtype "$TMP/mlp-fp16bn.h5" >/dev/null 2>&1 || { echo "FAIL: an MLP's export names a BatchNorm dtype"; exit 1; }
check "eval fp16 bn32" mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" --set model.preset=cnn_bn \
  --set data.train_limit=1024 --set amp.opt_level=O3 --set amp.keep_batchnorm_fp32=true --checkpoint "$TMP/cnn-fp16bn.h5"
awk -v a="$(acc)" -v b="$trained_cnn" 'BEGIN { d = a - b; exit !(d <= 0.002 && d >= -0.002) }' ||
  { echo "FAIL: cnn fp16 export with FP32 BatchNorm: accuracy $(acc) at O3, checkpoint $trained_cnn"; exit 1; }
grep -Eq '^eval: [1-9][0-9]* samples in [0-9.]+ s, [0-9.]+ samples/s; bytes: weights [1-9][0-9]*, activations [1-9][0-9]*, workspace [0-9]+$' "$TMP/out" ||
  { echo "FAIL: eval's speed line"; cat "$TMP/out"; exit 1; }
echo "ok: cnn fp16 export with FP32 BatchNorm: 8 FP32 arrays, accuracy $(acc) at O3 (checkpoint $trained_cnn)"

# eval reads the test split alone (idx: the t10k files): a directory holding only them and the
# checkpoint evaluates to the accuracy training ended with; training from it says what is missing.
mkdir "$TMP/t10k" && ln -s "$FMNIST"/t10k-* "$TMP/t10k/"
check "eval t10k alone" mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" --set model.preset=cnn_bn \
  --set data.train_limit=1024 --set "data.path=\"$TMP/t10k\"" --checkpoint "$CNN"
[ "$(acc)" = "$trained_cnn" ] ||
  { echo "FAIL: eval on the test files alone: accuracy $(acc), training ended at $trained_cnn"; cat "$TMP/out"; exit 1; }
echo "ok: eval with the t10k files alone: accuracy $(acc), as training ended"
expect_exit 3 "t10k/train-images-idx3-ubyte(\.gz)?: no such file" mpirun -np 2 "$MPDIST" "$CFG" \
  "${COMMON[@]}" --set "data.path=\"$TMP/t10k\""

# Damaged and foreign files: exit 4, one error line naming the file or the dataset.
cp "$MLP" "$TMP/flip.h5"
h5dump -d /params/fc2.weight -b LE -o "$TMP/raw.bin" "$MLP" >/dev/null
pattern=$(od -An -tx1 -j 20000 -N 16 "$TMP/raw.bin" | tr -d ' \n' | sed 's/../\\x&/g')
offset=$(LC_ALL=C grep -obUaP "$pattern" "$TMP/flip.h5" | head -1 | cut -d: -f1)
printf '\x01' | dd of="$TMP/flip.h5" bs=1 seek=$((offset + 6)) conv=notrunc status=none
cmp -s "$MLP" "$TMP/flip.h5" && { echo "FAIL: the byte was not flipped"; exit 1; }
head -c 300000 "$MLP" >"$TMP/trunc.h5"
printf 'not hdf5' >"$TMP/text.h5"
expect_exit 4 "flip.h5: dataset /params/fc2.weight is corrupt \(data error detected by Fletcher32" "$MPDIST" inspect "$TMP/flip.h5"
expect_exit 4 "flip.h5: dataset /params/fc2.weight is corrupt" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$TMP/flip.h5"
expect_exit 4 "trunc.h5: not a readable HDF5 file, truncated .*truncated file" "$MPDIST" inspect "$TMP/trunc.h5"
expect_exit 4 "trunc.h5: not a readable HDF5 file" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$TMP/trunc.h5"
expect_exit 4 "text.h5: not a readable HDF5 file" "$MPDIST" export "$TMP/text.h5" "$TMP/x.h5"
expect_exit 4 "missing.h5: cannot open the checkpoint \(No such file" "$MPDIST" inspect "$TMP/missing.h5"
# A path too long for the message keeps its reason (the head, " [...] ", the end); an output
# name too long for the file system is a usage error before anything is written.
long=$TMP/$(printf 'a%.0s' $(seq 3000))/x.h5
expect_exit 4 "^mpdist: error: $TMP/aaaa.{300,400} \[\.\.\.\] a+/x.h5: cannot open the checkpoint \(File name too long\)$" \
  "$MPDIST" inspect "$long"
expect_exit 2 "export: $TMP/b{300}.h5: File name too long" "$MPDIST" export "$MLP" "$TMP/$(printf 'b%.0s' $(seq 300)).h5"
expect_exit 2 "inspect: the checkpoint path is empty" "$MPDIST" inspect ""
expect_exit 2 "export: the checkpoint path is empty" "$MPDIST" export "" "$TMP/x.h5"
expect_exit 4 "dataset /params/fc1.weight has shape \[256, 784\], expected \[64, 784\] \(a checkpoint of another model" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set 'model.hidden=[64, 128]' --resume "$MLP"
expect_exit 4 "written for model mlp, the config has model.preset cnn_bn \(a checkpoint of another model" \
  mpirun -np 2 "$MPDIST" eval "$CFG" "${COMMON[@]}" --set model.preset=cnn_bn --checkpoint "$MLP"
expect_exit 4 "mlp-fp16.h5: an exported weights file .*use it with mpdist eval" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$TMP/mlp-fp16.h5"
expect_exit 4 "written with optimizer sgd, but optim.name is adam" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set optim.name=adam --resume "$MLP"
expect_exit 4 "written with train.seed 42, the config has 5" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set train.seed=5 --resume "$MLP"
# another training set of the same size (4000 synthetic 28x28x1 samples): its labels differ
expect_exit 4 "written for another training set of 4000 samples \(its labels, file names or text differ" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set 'data.format="synthetic"' --set 'data.synthetic_shape=[28, 28, 1]' \
  --set data.synthetic_train=4000 --resume "$MLP"
mkdir "$TMP/bad" && cp "$TMP/flip.h5" "$TMP/bad/ckpt-00000010.h5"
expect_exit 4 "bad: none of its 1 checkpoint file loads: .*ckpt-00000010.h5: dataset /params/fc2.weight" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/bad\"" --resume auto
# A config that is not the run's refuses every file of its directory for one reason: said once,
# without a warning per file (before 2026-12-03: one "trying an older checkpoint" each, then the
# same reason again); a damaged newest file beside it gives both reasons.
mkdir "$TMP/seeds" && cp "$MLP" "$TMP/seeds/ckpt-00000064.h5" && cp "$MLP" "$TMP/seeds/ckpt-00000032.h5"
expect_exit 4 "seeds: none of its 2 checkpoint files loads, each for the newest's reason: .*ckpt-00000064.h5: written with train.seed 42, the config has 5" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/seeds\"" --set train.seed=5 --resume auto
expect_ok "no warning per file" test "$(grep -c 'warning' "$TMP/out")" = 0
mkdir "$TMP/mixed" && cp "$TMP/flip.h5" "$TMP/mixed/ckpt-00000010.h5" && cp "$MLP" "$TMP/mixed/ckpt-00000002.h5"
expect_exit 4 "mixed: none of its 2 checkpoint files loads \(newest: .*ckpt-00000010.h5: dataset /params/fc2.weight" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/mixed\"" --set train.seed=5 --resume auto
expect_ok "each file's reason said" bash -c "grep -q 'warning: .*ckpt-00000010.h5: dataset /params/fc2.weight.*; trying an older checkpoint' '$TMP/out' &&
  grep -q 'warning: .*ckpt-00000002.h5: written with train.seed 42, the config has 5.*; trying an older checkpoint' '$TMP/out'"
expect_exit 2 "checkpoint.dir .*/mlp already holds checkpoints of a run \(newest: step 64\): continue it with --resume auto" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/mlp\""
expect_exit 2 "resume \"auto\" needs checkpoint.dir" mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --resume auto
expect_exit 2 "--dtype: must be fp16, bf16 or fp32 \(got 'fp8'\)" "$MPDIST" export "$MLP" "$TMP/y.h5" --dtype fp8
expect_exit 2 "--keep-batchnorm-fp32: the export is FP32 already" "$MPDIST" export "$MLP" "$TMP/y.h5" --dtype fp32 --keep-batchnorm-fp32
expect_exit 2 "--keep-batchnorm-fp32 is an option of mpdist export" "$MPDIST" eval "$CFG" --checkpoint "$MLP" --keep-batchnorm-fp32
# export never replaces what it must not: the checkpoint itself, another training checkpoint, a
# file with bytes that is no checkpoint (a config named by a slip), a FIFO or a directory (exit
# 2, left as they were), nor writes into a directory that does not exist (exit 2); it replaces
# an earlier export or an empty file (before 2026-12-03 it replaced any file but a checkpoint).
sum_mlp=$(sha256sum <"$MLP") sum_cnn=$(sha256sum <"$CNN")
mkfifo "$TMP/fifo.h5" && mkdir "$TMP/outdir"
expect_exit 2 "export: .*ckpt-[0-9]+.h5 is the checkpoint being exported" "$MPDIST" export "$MLP" "$MLP"
expect_exit 2 "export: .*ckpt-[0-9]+.h5 is a training checkpoint; export will not replace it" "$MPDIST" export "$MLP" "$CNN"
cp "$CFG" "$TMP/cfg-copy.cfg" && sum_cfg=$(sha256sum <"$CFG")
expect_exit 2 "export: $TMP/cfg-copy.cfg is no checkpoint that export may replace \(.*cfg-copy.cfg: not a readable HDF5 file.*\); remove it first" \
  "$MPDIST" export "$MLP" "$TMP/cfg-copy.cfg"
[ "$(sha256sum <"$TMP/cfg-copy.cfg")" = "$sum_cfg" ] || { echo "FAIL: a refused export changed the config"; exit 1; }
expect_exit 2 "export: .*fifo.h5 is not a regular file \(a device, FIFO or socket\)" "$MPDIST" export "$MLP" "$TMP/fifo.h5"
expect_exit 2 "export: .*outdir is not a regular file \(a directory\)" "$MPDIST" export "$MLP" "$TMP/outdir"
expect_exit 2 "export: the output path is empty" "$MPDIST" export "$MLP" ""
expect_exit 2 "export: .*/nodir/x.h5: its directory .*/nodir: No such file or directory" "$MPDIST" export "$MLP" "$TMP/nodir/x.h5"
expect_exit 2 "export: .*/text.h5/x.h5: .*/text.h5 is not a directory" "$MPDIST" export "$MLP" "$TMP/text.h5/x.h5"
# Nor do a run's metrics (log.metrics) replace a checkpoint, a config or another program's file,
# or take a name that the run's saves write; a FIFO nobody reads is refused, not waited on.
ckdir=$(dirname "$MLP")
for target in "$MLP" "$CFG"; do
  expect_exit 2 "log.metrics: $target holds something other than mpdist's metrics" \
    "$MPDIST" "$CFG" "${COMMON[@]}" --set "log.metrics=\"$target\"" --set train.max_steps=1
done
expect_exit 2 "log.metrics: $ckdir/ckpt-00000099.h5 is a name that checkpoint.dir .*'s saves write or remove: name another file" \
  "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$ckdir\"" --resume auto --set train.epochs=3 \
  --set "log.metrics=\"$ckdir/ckpt-00000099.h5\""
expect_exit 2 "log.metrics: $TMP/fifo.h5: a FIFO that no process reads" \
  "$MPDIST" "$CFG" "${COMMON[@]}" --set "log.metrics=\"$TMP/fifo.h5\"" --set train.max_steps=1
[ "$(sha256sum <"$MLP")" = "$sum_mlp" ] && [ "$(sha256sum <"$CNN")" = "$sum_cnn" ] && [ -p "$TMP/fifo.h5" ] ||
  { echo "FAIL: a refused export or run changed its target"; exit 1; }
check "export over an export" "$MPDIST" export "$MLP" "$TMP/mlp-fp16.h5" --dtype bf16
: >"$TMP/empty.h5"
check "export over an empty file" "$MPDIST" export "$MLP" "$TMP/empty.h5"
echo "ok: export refuses its input, a training checkpoint, a FIFO, a directory, a missing directory and an empty path"
expect_exit 2 "usage: mpdist eval CONFIG.cfg --checkpoint FILE.h5" "$MPDIST" eval "$CFG"
expect_exit 2 "--checkpoint is an option of mpdist eval" "$MPDIST" "$CFG" --checkpoint "$MLP"
# Auto-resume past damaged files of higher steps: the save's pruning keeps this run's own older
# checkpoints (the damaged ones counted toward checkpoint.keep and pushed them out before).
P=(--set data.train_limit=512 --set data.test_limit=128 --set checkpoint.every_steps=2
   --set checkpoint.keep=3 --set "checkpoint.dir=\"$TMP/prune\"" --set log.progress=none
   --set "log.metrics=\"$TMP/prune.jsonl\"")
check "prune: steps 2, 4, 6" "$MPDIST" "$CFG" "${P[@]}" --set train.max_steps=6
head -c 100000 "$TMP/prune/ckpt-00000006.h5" >"$TMP/prune/ckpt-00000010.h5"
cp "$TMP/prune/ckpt-00000010.h5" "$TMP/prune/ckpt-00000012.h5"
truncate -s 100000 "$TMP/prune/ckpt-00000006.h5"
check "prune: resumed past damaged files" "$MPDIST" "$CFG" "${P[@]}" --set train.max_steps=16 \
  --set train.step_budget=2 --resume auto
grep -q "resumed from .*ckpt-00000004.h5" "$TMP/out" ||
  { echo "FAIL: prune: not resumed from step 4"; cat "$TMP/out"; exit 1; }
left=$(cd "$TMP/prune" && ls ckpt-*.h5 | tr '\n' ' ')
[ "$left" = "ckpt-00000002.h5 ckpt-00000004.h5 ckpt-00000006.h5 ckpt-00000010.h5 ckpt-00000012.h5 " ] ||
  { echo "FAIL: prune: left $left"; exit 1; }
check "prune: the new step 6 loads" "$MPDIST" inspect "$TMP/prune/ckpt-00000006.h5"
echo "ok: a save after auto-resume past damaged newer files keeps steps 2 and 4 (keep = 3)"
# A save past a file size limit (ulimit -f 20000: 20 MB, the file of a 784-2048-2048-10 MLP
# about 70 MB; a smaller limit stops MPI's own start-up) is a checkpoint error naming the reason,
# not a rank killed by SIGXFSZ; no temporary is left.
expect_exit 4 "file write failed: File too large" bash -c 'ulimit -f 20000; exec "$0" "$@"' \
  "$MPDIST" "$CFG" "${P[@]/prune/fsize}" --set 'model.hidden=[2048, 2048]' --set train.max_steps=2
ls -A "$TMP/fsize" | grep -q '\.tmp$' && { echo "FAIL: a temporary left in $TMP/fsize"; exit 1; }
finish
