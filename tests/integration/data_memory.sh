#!/usr/bin/env bash
# Issue 18, data sizes and gzip trailers, through the whole binary on 1 and 2 ranks: data that
# cannot fit memory is a data error (exit 3, one line with the bytes needed and the bytes this
# process may use) before anything is allocated, where it used to abort (SIGABRT in mp_alloc):
# data.synthetic_shape = [4096, 4096, 3] with the default 50000 samples, and an IDX header
# promising 2^31 images of 4096x4096. A gzip file without its CRC-32/length trailer is
# truncated (exit 3), with or without data.train_limit, where it used to load unverified data.
# Under ulimit -v, data beyond the address space left is exit 3 too.
# (The sparse 3 TB CIFAR file is cifar_huge.sh.)
source "$(dirname "$0")/common.bash"

cfg=$TMP/run.cfg
printf 'train: { epochs = 1; };\nlog: { progress = "none"; };\n' >"$cfg"

# A small valid gzip IDX set: the first 100 training and 50 test samples of the real data.
make_set() {
  local d=$1
  mkdir -p "$d"
  set +o pipefail # head closes the pipe early on purpose
  for split in train t10k; do
    local n=100; [ $split = t10k ] && n=50
    { printf '\x00\x00\x08\x03'; printf "\\x00\\x00\\x00\\x$(printf %02x $n)"; printf '\x00\x00\x00\x1c\x00\x00\x00\x1c';
      gzip -dc "$FMNIST/$split-images-idx3-ubyte.gz" | tail -c +17 | head -c $((n * 784)); } | gzip -n >"$d/$split-images-idx3-ubyte.gz"
    { printf '\x00\x00\x08\x01'; printf "\\x00\\x00\\x00\\x$(printf %02x $n)";
      gzip -dc "$FMNIST/$split-labels-idx1-ubyte.gz" | tail -c +9 | head -c $n; } | gzip -n >"$d/$split-labels-idx1-ubyte.gz"
  done
  set -o pipefail
}
make_set "$TMP/good"
timeout 120 "$MPDIST" "$cfg" --set "data.path=\"$TMP/good\"" >"$TMP/good.out" 2>&1 ||
  { echo "FAIL: the valid small set does not train"; cat "$TMP/good.out"; exit 1; }

# The trailer-less copy: every byte of the data is there, the CRC-32 and ISIZE are not.
cp -r "$TMP/good" "$TMP/notrailer"
f=$TMP/notrailer/train-images-idx3-ubyte.gz
truncate -s $(($(stat -c %s "$f") - 8)) "$f"
gzip -t "$f" 2>/dev/null && { echo "FAIL: gzip -t accepts the trailer-less file"; exit 1; }

# An IDX header promising 2^31 - 1 images of 4096x4096 (64 PiB), with labels to match.
mkdir -p "$TMP/huge"
cp "$TMP/good"/t10k-* "$TMP/huge/"
{ printf '\x00\x00\x08\x03\x7f\xff\xff\xff\x00\x00\x10\x00\x00\x00\x10\x00'; head -c 1000 /dev/zero; } >"$TMP/huge/train-images-idx3-ubyte"
{ printf '\x00\x00\x08\x01\x7f\xff\xff\xff'; head -c 1000 /dev/zero; } >"$TMP/huge/train-labels-idx1-ubyte"

syn=(--set data.format=synthetic --set "data.synthetic_shape=[4096, 4096, 3]")
for np in 1 2; do
  run=(mpirun -np $np "$MPDIST" "$cfg")
  expect_exit 3 "synthetic data: the train and test splits: 60000 images of 4096x4096x3 needs 60000 x 4096 x 4096 x 3 = 3019898880000 bytes \(2812\.5 GiB\), more than the [0-9]+ bytes .* this process may use" \
    "${run[@]}" "${syn[@]}"
  expect_exit 3 "$TMP/huge/train-images-idx3-ubyte: 2147483647 images of 4096x4096 with labels .*needs 2147483647 x 33554437 = 72057604741791739 bytes" \
    "${run[@]}" --set "data.path=\"$TMP/huge\""
  expect_exit 3 "$TMP/notrailer/train-images-idx3-ubyte.gz: truncated: the gzip stream ends before its CRC-32 and length trailer" \
    "${run[@]}" --set "data.path=\"$TMP/notrailer\""
  expect_exit 3 "$TMP/notrailer/train-images-idx3-ubyte.gz: truncated" \
    "${run[@]}" --set "data.path=\"$TMP/notrailer\"" --set data.train_limit=10
done
# Under an address-space limit (ulimit -v), which the physical memory and cgroup limits do not
# show: 4.9 GB of synthetic images under 2 GB is exit 3 with the numbers, not SIGABRT in mp_alloc.
if sanitizer_build; then
  echo "skip: ulimit -v: a sanitizer build cannot start under an address limit"
else
  expect_exit 3 "410000 images of 64x64x3 needs .* this process may use \(the address-space limit, ulimit -v, less what is mapped\)" \
    bash -c 'ulimit -v 2000000 && exec "$@"' _ "$MPDIST" "$cfg" --set data.format=synthetic \
    --set "data.synthetic_shape=[64, 64, 3]" --set data.synthetic_train=400000
fi
finish
