#!/usr/bin/env bash
# CIFAR-10 binary files (small synthetic ones written here: the real set is not a Debian
# package) train the cnn_bn preset on 32x32x3 inputs at O2 on 2 ranks with random crop and
# flip, and two runs with the same seed give identical metrics (augmentation is deterministic).
source "$(dirname "$0")/common.bash"
d=$TMP/cifar
mkdir -p "$d"
write_batch() { # FILE RECORDS
  for ((i = 0; i < $2; i++)); do
    printf "\\x$(printf %02x $((i % 10)))"
    head -c 3072 /dev/urandom
  done >"$1"
}
for k in 1 2 3 4 5; do write_batch "$d/data_batch_$k.bin" 40; done
write_batch "$d/test_batch.bin" 30

run() {
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-cnn-bn.cfg" --set data.format=cifar10 \
    --set "data.path=\"$d\"" --set data.augment=true --set amp.opt_level=O2 --set train.epochs=2 \
    --set data.batch_size=16 --set log.every=2 --set log.progress=none \
    --set "log.metrics=\"$TMP/$1.jsonl\"" >"$TMP/$1.out" 2>&1 || { echo "FAIL: run $1"; cat "$TMP/$1.out"; exit 1; }
  sed -E 's/"(time_s|loader)":\{[^}]*\},?//g; s/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms|wall_s)":[^,}]*,?//g' "$TMP/$1.jsonl" >"$TMP/$1.cmp"
}
run a
run b
grep -q 'model cnn_bn (' "$TMP/a.out" && grep -q '^test accuracy: ' "$TMP/a.out" || { echo "FAIL: output"; cat "$TMP/a.out"; exit 1; }
[ "$(grep -c '"type":"step"' "$TMP/a.cmp")" = 7 ] || { echo "FAIL: want 7 step records"; cat "$TMP/a.cmp"; exit 1; }
cmp "$TMP/a.cmp" "$TMP/b.cmp" || { echo "FAIL: augmented runs differ"; exit 1; }
truncate -s 5000 "$d/data_batch_3.bin"
expect_exit 3 "data_batch_3.bin: truncated" "$MPDIST" "$SRC/configs/fashion-mnist-cnn-bn.cfg" \
  --set data.format=cifar10 --set "data.path=\"$d\""
finish
