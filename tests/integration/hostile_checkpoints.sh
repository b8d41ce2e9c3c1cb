#!/usr/bin/env bash
# Hostile checkpoints and runs that go bad (issue 18, items 1, 4, 5, 9):
# - a checkpoint whose checksums hold but whose values no run writes (NaN or inf parameters,
#   NaN momentum, a negative Adam second moment, a loss scale of NaN, inf, 0 or 1e-300,
#   consecutive_skips of INT64_MAX) is refused with exit 4 naming the dataset or attribute;
# - a weight beyond fp16's range evaluated or taken by checkpoint.init in fp16: exit 4 saying so
#   (in bf16 and at O0 it loads); exported as fp16: exit 2, nothing written (as bf16 it exports);
#   eval of weights whose logits overflow: exit 5 (a test loss not finite), not 0;
# - an O2 checkpoint resumed under O0 (or bf16, or a static scale) is refused, exit 4;
# - a damaged object header (the /params group's) is refused with HDF5's reason, exit 4;
# - a file of the older format with a flipped global heap size (it crashed HDF5, then hung the
#   job) is refused by inspect and by a 2-rank resume, and --resume auto falls back to the
#   intact older file and trains on
#   (tests/integration/bad_runs.sh: a fatal signal, and weights that go bad).
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
# The configuration the corpus's older-format checkpoint (legacy-vlen-mlp3.h5) was written with.
LEGACY=(--set 'model.hidden=[3]' --set data.train_limit=256 --set data.test_limit=64
        --set log.progress=none)
COMMON=("${LEGACY[@]}" --set train.max_steps=4)
CORPUS=$SRC/tests/fuzz/corpus/checkpoint

run_ok() { timeout 120 "$@" >"$TMP/out" 2>&1 || { echo "FAIL: $* exited $?"; cat "$TMP/out"; exit 1; }; }

# O2 (dynamic scale, SGD with momentum) and Adam checkpoints to edit.
run_ok mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set train.max_steps=2 --set amp.opt_level=O2 \
  --set "checkpoint.dir=\"$TMP/o2\"" --set "log.metrics=\"$TMP/o2.jsonl\""
run_ok mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set train.max_steps=2 --set optim.name=adam \
  --set "checkpoint.dir=\"$TMP/adam\"" --set "log.metrics=\"$TMP/adam.jsonl\""
O2=$(ls "$TMP"/o2/ckpt-*.h5) ADAM=$(ls "$TMP"/adam/ckpt-*.h5)

# edit SRC OUT PYTHON: a copy of SRC changed by h5py (f is the open file), checksums recomputed,
# and every dataset's digest too (tests/util/mpdist_h5.py), so that the checks behind the digest
# are what refuses the values (ckpt_digest.sh: an edit that leaves the digest is refused by it).
edit() {
  cp "$1" "$2"
  PYTHONPATH=$SRC/tests/util /usr/bin/python3 -c "import h5py, numpy as np, mpdist_h5
with h5py.File('$2', 'r+') as f:
    $3
    f.visititems(lambda n, o: mpdist_h5.redigest(f, n) if isinstance(o, h5py.Dataset) else None)" ||
    { echo "FAIL: h5py edit $3"; exit 1; }
}
RESUME=(mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --resume)

i=0
for case in "/params/fc1\.weight holds nan at element 5|f['params/fc1.weight'][0, 5] = np.nan" \
            "/params/fc2\.bias holds inf at element 2|f['params/fc2.bias'][2] = np.inf" \
            "/optim/fc1\.weight/momentum_buffer holds nan|f['optim/fc1.weight/momentum_buffer'][1, 1] = np.nan" \
            "/scaler scale nan is not|f['scaler'].attrs['scale'] = np.nan" \
            "/scaler scale inf is not|f['scaler'].attrs['scale'] = np.inf" \
            "/scaler scale 0 is not|f['scaler'].attrs['scale'] = 0.0" \
            "/scaler scale 1e-300 is not|f['scaler'].attrs['scale'] = 1e-300" \
            "consecutive_skips 9223372036854775807|f['scaler'].attrs['consecutive_skips'] = np.int64(2**63 - 1)" \
            "skipped_steps -1|f['scaler'].attrs['skipped_steps'] = np.int64(-1)"; do
  want=${case%%|*} code=${case#*|}
  i=$((i + 1))
  edit "$O2" "$TMP/bad$i.h5" "$code"
  expect_exit 4 "bad$i\.h5: .*$want" "${RESUME[@]}" "$TMP/bad$i.h5"
done
edit "$ADAM" "$TMP/adam-bad.h5" "f['optim/fc1.bias/exp_avg_sq'][0] = -1.0"
expect_exit 4 "exp_avg_sq holds -1 at element 0" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set optim.name=adam --resume "$TMP/adam-bad.h5"

# A damaged object header (the /params group's first byte: HDF5 cannot read the group) is
# HDF5's reason, not "has no parameter ... (a checkpoint of another model?)".
cp "$O2" "$TMP/header.h5"
/usr/bin/python3 -c "import h5py
with h5py.File('$TMP/header.h5', 'r') as f:
    at = h5py.h5o.get_info(f['params'].id).addr
with open('$TMP/header.h5', 'r+b') as fh:
    fh.seek(at); fh.write(b'\x07')" || { echo "FAIL: cannot damage the /params header"; exit 1; }
expect_exit 4 "header\.h5: cannot look up /params/fc1\.weight \(bad object header version number\)" \
  "${RESUME[@]}" "$TMP/header.h5"

# A weight beyond fp16's range (finite in FP32 and bf16: an O0 or bf16 run may write it) loads
# into eval's fp16 copy as no value: said so, exit 4, not called damaged; bf16 and O0 load it.
edit "$O2" "$TMP/big.h5" "f['params/fc1.weight'][0, 3] = 1e5"
EVAL=(mpirun -np 1 "$MPDIST" eval "$CFG" "${LEGACY[@]}" --checkpoint "$TMP/big.h5")
expect_exit 4 "fc1\.weight holds 100000 at element 3, beyond fp16's range \(largest 65504\): load it with amp\.half = \"bf16\" or at O0" \
  "${EVAL[@]}" --set amp.opt_level=O2
run_ok "${EVAL[@]}" --set amp.opt_level=O2 --set amp.half=bf16
run_ok "${EVAL[@]}" --set amp.opt_level=O0
echo "ok: the weight of 1e5 evaluates in bf16 and at O0"
expect_exit 4 "fc1\.weight holds 100000 at element 3, beyond fp16's range" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --set "checkpoint.init=\"$TMP/big.h5\""
expect_exit 2 "export: /params/fc1\.weight holds 100000 at element 3, beyond fp16's range \(largest 65504\): export it with --dtype bf16 or fp32" \
  "$MPDIST" export "$TMP/big.h5" "$TMP/big-fp16.h5"
expect_ok "the refused fp16 export wrote nothing" test ! -e "$TMP/big-fp16.h5"
run_ok "$MPDIST" export "$TMP/big.h5" "$TMP/big-bf16.h5" --dtype bf16
# Finite weights whose logits overflow: eval's test loss is not finite, exit 5, never a loss of
# nan printed with exit 0.
edit "$O2" "$TMP/huge.h5" "f['params/fc2.weight'][...] = 3e38"
expect_exit 5 "diverged: .*huge\.h5's test loss is (nan|inf|-nan) at opt level O0" \
  mpirun -np 1 "$MPDIST" eval "$CFG" "${LEGACY[@]}" --checkpoint "$TMP/huge.h5"

# The precision a run was written with is the one it resumes with.
expect_exit 4 "written at opt level O2 \(fp16\), the config has O0" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$O2"
expect_exit 4 "written at opt level O2 \(fp16\), the config has O2 \(bf16\)" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --set amp.half=bf16 --resume "$O2"
expect_exit 4 "written with a dynamic loss scale, the config's is static" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --set amp.loss_scale=128.0 --resume "$O2"
run_ok "${RESUME[@]}" "$O2"
echo "ok: the unedited O2 checkpoint resumes"

# The older format: reads; its damaged copy is refused, never crashes or hangs.
run_ok "$MPDIST" inspect "$CORPUS/legacy-vlen-mlp3.h5"
expect_exit 4 "string storage \(global heap at byte 2048\) is damaged" \
  "$MPDIST" inspect "$CORPUS/legacy-gcol-size-flip.h5"
expect_exit 4 "global heap at byte 2048" \
  mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$CORPUS/legacy-gcol-size-flip.h5"
mkdir "$TMP/auto"
cp "$CORPUS/legacy-vlen-mlp3.h5" "$TMP/auto/ckpt-00000002.h5"
cp "$CORPUS/legacy-gcol-size-flip.h5" "$TMP/auto/ckpt-00000003.h5"
run_ok mpirun -np 2 "$MPDIST" "$CFG" "${COMMON[@]}" --set "checkpoint.dir=\"$TMP/auto\"" \
  --set "log.metrics=\"$TMP/auto.jsonl\"" --resume auto
grep -q 'ckpt-00000003.h5: the string storage .* damaged; trying an older checkpoint' "$TMP/out" &&
  grep -q 'resumed from .*ckpt-00000002.h5: step 2' "$TMP/out" && grep -q '^done: 4 steps' "$TMP/out" ||
  { echo "FAIL: --resume auto did not fall back to the intact older file"; cat "$TMP/out"; exit 1; }
echo "ok: --resume auto skips the damaged file and trains on from the older one"

finish
