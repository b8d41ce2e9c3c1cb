#!/usr/bin/env bash
# Checkpoints no run wrote are refused with exit 4 by every command that reads them (issue 45,
# classes 1 and 3, and the values "accepted although no run could have written them"):
# - zeros with valid Fletcher-32 checksums: every parameter set to zero by h5py (which rewrites
#   the chunks and their checksums), one parameter, one chunk and its checksum zeroed in the
#   file's bytes; a dataset without its digest, or with another dataset's; refused by inspect,
#   eval, export and --resume, naming the dataset;
# - every attribute the reader knows stored with a wrong shape (two values) or a wrong type;
# - every counter and name out of what a run writes (/meta, /data, /scaler, /optim);
# - values that only the config can rule out: another model, other optimizer slots, another
#   static loss scale.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set 'model.hidden=[16]' --set data.train_limit=256 --set data.test_limit=64
        --set log.progress=none --set train.max_steps=4)
run_ok() { timeout 120 "$@" >"$TMP/out" 2>&1 || { echo "FAIL: $* exited $?"; cat "$TMP/out"; exit 1; }; }
run_ok mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set train.max_steps=2 --set amp.opt_level=O2 \
  --set "checkpoint.dir=\"$TMP/o2\"" --set "log.metrics=\"$TMP/o2.jsonl\""
run_ok mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set train.max_steps=2 \
  --set "checkpoint.dir=\"$TMP/o0\"" --set "log.metrics=\"$TMP/o0.jsonl\""
O2=$(ls "$TMP"/o2/ckpt-*.h5) O0=$(ls "$TMP"/o0/ckpt-*.h5)

# edit SRC OUT PYTHON [redigest]: queues a copy of SRC changed by h5py (f is the open file); with
# a fourth argument every dataset's digest is recomputed (tests/util/mpdist_h5.py). One python
# process makes every queued copy (apply_edits) before the checks: its start-up is the slow part.
printf 'import shutil, h5py, numpy as np, mpdist_h5\n' >"$TMP/edits.py"
edit() {
  cat >>"$TMP/edits.py" <<PY
shutil.copy('$1', '$2')
with h5py.File('$2', 'r+') as f:
    $3
    if ${4:-0}:
        f.visititems(lambda n, o: mpdist_h5.redigest(f, n) if isinstance(o, h5py.Dataset) else None)
PY
}
apply_edits() {
  PYTHONPATH=$SRC/tests/util /usr/bin/python3 "$TMP/edits.py" || { echo "FAIL: the h5py edits"; exit 1; }
  printf 'import shutil, h5py, numpy as np, mpdist_h5\n' >"$TMP/edits.py"
}
# later CHECK...: a check run after apply_edits (expect_exit's arguments, or "every REGEX FILE")
checks=()
later() { local q; printf -v q '%q ' "$@"; checks+=("$q"); }
run_checks() { local c; for c in "${checks[@]}"; do eval "$c"; done; checks=(); }
INSPECT=("$MPDIST" inspect)
EVAL=(mpirun -np 1 "$MPDIST" eval "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --checkpoint)
RESUME=(mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level=O2 --resume)
every() { # every REGEX FILE: refused by inspect, eval, export and --resume
  expect_exit 4 "$1" "${INSPECT[@]}" "$2"
  expect_exit 4 "$1" "${EVAL[@]}" "$2"
  expect_exit 4 "$1" "$MPDIST" export "$2" "$TMP/export.h5" --dtype fp16
  expect_exit 4 "$1" "${RESUME[@]}" "$2"
}

# Zeros that Fletcher-32 passes.
edit "$O2" "$TMP/zeros.h5" "for n in f['params']: f['params'][n][...] = 0"
later every "zeros\.h5: dataset /params/fc[0-9]\.(weight|bias) does not match its digest" "$TMP/zeros.h5"
edit "$O2" "$TMP/zero1.h5" "f['params/fc2.bias'][...] = 0"
later expect_exit 4 "dataset /params/fc2\.bias does not match its digest" "${INSPECT[@]}" "$TMP/zero1.h5"
/usr/bin/python3 - "$O2" "$TMP/chunk.h5" <<'PY' || { echo "FAIL: zeroing a chunk"; exit 1; }
import shutil, sys, h5py
shutil.copy(sys.argv[1], sys.argv[2])
with h5py.File(sys.argv[2], "r") as f:  # the first chunk of fc1.weight: its bytes and checksum
    c = f["params/fc1.weight"].id.get_chunk_info(0)
with open(sys.argv[2], "r+b") as g:
    g.seek(c.byte_offset)
    g.write(bytes(c.size))
PY
later every "chunk\.h5: dataset /params/fc1\.weight does not match its digest" "$TMP/chunk.h5"
edit "$O2" "$TMP/nodigest.h5" "del f['params/fc1.bias'].attrs['mpdist_crc32']"
later expect_exit 4 "dataset /params/fc1\.bias has no digest" "${INSPECT[@]}" "$TMP/nodigest.h5"
edit "$O2" "$TMP/moved.h5" "f['params/fc1.bias'][...] = f['optim/fc1.bias/momentum_buffer'][...]
    f['params/fc1.bias'].attrs['mpdist_crc32'] = f['optim/fc1.bias/momentum_buffer'].attrs['mpdist_crc32']"
later expect_exit 4 "dataset /params/fc1\.bias does not match its digest" "${INSPECT[@]}" "$TMP/moved.h5"
edit "$O2" "$TMP/redigested.h5" "pass" 1
later expect_ok "a file whose digests are recomputed from its own values reads (the test's digest is mpdist's)" "${INSPECT[@]}" "$TMP/redigested.h5"

# Every attribute the reader knows, with two values and with the other type.
ints="/meta:format_version /meta:step /meta:epoch /meta:world_size /meta:global_batch
      /data:epoch /data:position /data:batch_size /data:accum_steps /data:world_size /data:dataset_size
      /scaler:growth_tracker /scaler:hysteresis_left /scaler:skipped_steps /scaler:consecutive_skips
      /scaler:dynamic /optim:steps"
strs="/meta:kind /meta:opt_level /meta:half /meta:model /meta:mpdist_version /optim:name /optim:slots"
i=0
for a in $ints /scaler:scale $strs; do
  obj=${a%%:*} name=${a#*:} i=$((i + 1))
  edit "$O2" "$TMP/two$i.h5" "g = f['$obj']; v = g.attrs['$name']; g.attrs.create('$name', np.array([v, v]))"
  later expect_exit 4 "attribute $name of $obj holds 2 values, expected one" "${INSPECT[@]}" "$TMP/two$i.h5"
done
for a in $ints /scaler:scale; do
  obj=${a%%:*} name=${a#*:} i=$((i + 1))
  edit "$O2" "$TMP/type$i.h5" "f['$obj'].attrs['$name'] = 'seven'"
  later expect_exit 4 "attribute $name of $obj cannot be read as a number" "${INSPECT[@]}" "$TMP/type$i.h5"
done
for a in $strs; do
  obj=${a%%:*} name=${a#*:} i=$((i + 1))
  edit "$O2" "$TMP/type$i.h5" "f['$obj'].attrs['$name'] = np.int64(7)"
  later expect_exit 4 "attribute $name of $obj is not a string" "${INSPECT[@]}" "$TMP/type$i.h5"
done
edit "$O2" "$TMP/rng2.h5" "f['rng'].attrs.create('seed', np.array([42, 42]))"
later expect_exit 4 "attribute seed of /rng holds 2 values" "${RESUME[@]}" "$TMP/rng2.h5"

# Counters and names no run writes (the file is otherwise whole: its digests hold).
MAX=9223372036854775807
for case in "/meta step -1|f['meta'].attrs['step'] = np.int64(-1)" \
            "/meta step $MAX|f['meta'].attrs['step'] = np.int64($MAX)" \
            "/meta epoch -1|f['meta'].attrs['epoch'] = np.int64(-1)" \
            "/meta epoch $MAX|f['meta'].attrs['epoch'] = np.int64($MAX)" \
            "/meta world_size 0|f['meta'].attrs['world_size'] = np.int64(0)" \
            "/meta global_batch 0|f['meta'].attrs['global_batch'] = np.int64(0)" \
            "/meta global_batch 65|f['meta'].attrs['global_batch'] = np.int64(65)" \
            "/data epoch 7|f['data'].attrs['epoch'] = np.int64(7)" \
            "/data position -1|f['data'].attrs['position'] = np.int64(-1)" \
            "/data batch_size 0|f['data'].attrs['batch_size'] = np.int64(0)" \
            "/data accum_steps 0|f['data'].attrs['accum_steps'] = np.int64(0)" \
            "/data world_size 0|f['data'].attrs['world_size'] = np.int64(0)" \
            "/data dataset_size 0|f['data'].attrs['dataset_size'] = np.int64(0)" \
            "/scaler growth_tracker $MAX|f['scaler'].attrs['growth_tracker'] = np.int64($MAX)" \
            "/scaler hysteresis_left 1001|f['scaler'].attrs['hysteresis_left'] = np.int64(1001)" \
            "/scaler dynamic 2|f['scaler'].attrs['dynamic'] = np.int64(2)" \
            "/scaler consecutive_skips 3|f['scaler'].attrs['consecutive_skips'] = np.int64(3)" \
            "/optim steps -1|f['optim'].attrs['steps'] = np.int64(-1)" \
            "/meta half \"fp8\"|f['meta'].attrs['half'] = 'fp8'" \
            "/meta opt_level \"O4\"|f['meta'].attrs['opt_level'] = 'O4'" \
            "/meta kind \"weights\"|f['meta'].attrs['kind'] = 'weights'" \
            "/meta model \"no model\" is not a model name|f['meta'].attrs['model'] = 'no model'" \
            "/optim name \"lamb\"|f['optim'].attrs['name'] = 'lamb'" \
            "/optim slots \"exp_avg\"|f['optim'].attrs['slots'] = 'exp_avg'" \
            "/optim/fc1\.bias/exp_avg is not a slot of this optimizer|f['optim/fc1.bias/exp_avg'] = f['optim/fc1.bias/momentum_buffer'][...]"; do
  want=${case%%|*} code=${case#*|} i=$((i + 1))
  edit "$O2" "$TMP/range$i.h5" "$code" 1
  later expect_exit 4 "range$i\.h5: $want" "${INSPECT[@]}" "$TMP/range$i.h5"
done
# What only the config rules out: the model, the optimizer's slots, a static scale.
edit "$O2" "$TMP/model.h5" "f['meta'].attrs['model'] = 'cnn'" 1
later expect_exit 4 "written for model cnn, the config has model.preset mlp" "${RESUME[@]}" "$TMP/model.h5"
later expect_exit 4 "written for model cnn, the config has model.preset mlp" "${EVAL[@]}" "$TMP/model.h5"
later expect_exit 4 "written with optimizer slots \"momentum_buffer\", this run keeps \"\"" \
  "${RESUME[@]}" "$O2" --set optim.momentum=0.0 --set optim.nesterov=false
edit "$O0" "$TMP/o0scale.h5" "f['scaler'].attrs['scale'] = 65536.0" 1
later expect_exit 4 "written with a static loss scale of 65536, the config's is 1" \
  mpirun -np 1 "$MPDIST" "$CFG" "${COMMON[@]}" --resume "$TMP/o0scale.h5"
apply_edits
run_checks
run_ok "${RESUME[@]}" "$O2"
echo "ok: the unedited checkpoint resumes"
finish
