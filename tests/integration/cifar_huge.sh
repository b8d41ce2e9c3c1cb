#!/usr/bin/env bash
# Issue 18: a sparse 3 TB CIFAR-10 file holding a whole number of records (10^9 x 3073 bytes)
# is a data error (exit 3, one line naming the directory, the bytes needed and the bytes this
# process may use) on 1 and 2 ranks, before anything is allocated or read; it used to abort in
# mp_alloc (SIGABRT). The file is sparse (truncate), costs no disk space and is removed at the
# end; where the file system cannot hold it the test is skipped (exit 77).
source "$(dirname "$0")/common.bash"
d=$TMP/cifar
mkdir -p "$d"
for k in 2 3 4 5; do { printf '\x03'; head -c 3072 /dev/zero; } >"$d/data_batch_$k.bin"; done
{ printf '\x03'; head -c 3072 /dev/zero; } >"$d/test_batch.bin"
if ! truncate -s $((3073 * 1000000000)) "$d/data_batch_1.bin" 2>/dev/null ||
   [ "$(stat -c %b "$d/data_batch_1.bin")" -gt 4096 ]; then
  rm -f "$d/data_batch_1.bin"
  echo "skip: $TMP cannot hold a sparse 3 TB file"
  exit 77
fi
for np in 1 2; do
  expect_exit 3 "$d: train split: 1000000004 records of 32x32x3 images with labels needs 1000000004 x 3076 = 3076000012304 bytes \(2864\.7 GiB\), more than the [0-9]+ bytes" \
    mpirun -np $np "$MPDIST" "$SRC/configs/fashion-mnist-cnn-bn.cfg" --set data.format=cifar10 \
    --set "data.path=\"$d\"" --set log.progress=none
done
rm -f "$d/data_batch_1.bin"
finish
