#!/usr/bin/env bash
# Every bad dataset input is a one-line error naming the problem, exit code 3, on 1 and 2 ranks
# (all ranks agree, none hangs): missing directory, missing file, wrong magic, truncated pixels,
# truncated gzip, corrupt gzip, image/label count mismatch, label out of range. And the real
# Fashion-MNIST files cut before their gzip trailer (the last 8, 4 or 1 bytes), Debian's own and
# recompressed, with and without --dry-run and data.train_limit (issue 45: they used to load).
source "$(dirname "$0")/common.bash"

# A small valid IDX set: the first 100 training and 50 test samples of the real data.
make_set() {
  local d=$1
  mkdir -p "$d"
  set +o pipefail # head closes the pipe early on purpose
  for split in train t10k; do
    local n=100; [ $split = t10k ] && n=50
    { printf '\x00\x00\x08\x03'; printf "\\x00\\x00\\x00\\x$(printf %02x $n)"; printf '\x00\x00\x00\x1c\x00\x00\x00\x1c';
      gzip -dc "$FMNIST/$split-images-idx3-ubyte.gz" | tail -c +17 | head -c $((n * 784)); } >"$d/$split-images-idx3-ubyte"
    { printf '\x00\x00\x08\x01'; printf "\\x00\\x00\\x00\\x$(printf %02x $n)";
      gzip -dc "$FMNIST/$split-labels-idx1-ubyte.gz" | tail -c +9 | head -c $n; } >"$d/$split-labels-idx1-ubyte"
  done
  set -o pipefail
}

cfg=$TMP/run.cfg
printf 'train: { epochs = 1; };\nlog: { progress = "none"; };\n' >"$cfg"

make_set "$TMP/good"
timeout 120 "$MPDIST" "$cfg" --set "data.path=\"$TMP/good\"" >"$TMP/good.out" 2>&1 ||
  { echo "FAIL: the valid small set does not train"; cat "$TMP/good.out"; exit 1; }

for np in 1 2; do
  run=(mpirun -np $np "$MPDIST" "$cfg" --set)
  expect_exit 3 "$TMP/nowhere.*no such directory" "${run[@]}" "data.path=\"$TMP/nowhere\""

  cp -r "$TMP/good" "$TMP/nofile"; rm "$TMP/nofile/t10k-labels-idx1-ubyte"
  expect_exit 3 "t10k-labels-idx1-ubyte.*no such file" "${run[@]}" "data.path=\"$TMP/nofile\""

  cp -r "$TMP/good" "$TMP/magic"; printf '\x00\x00\x08\x01' | dd of="$TMP/magic/train-images-idx3-ubyte" conv=notrunc status=none
  expect_exit 3 "train-images-idx3-ubyte.*magic" "${run[@]}" "data.path=\"$TMP/magic\""

  cp -r "$TMP/good" "$TMP/trunc"; truncate -s 50000 "$TMP/trunc/train-images-idx3-ubyte"
  expect_exit 3 "train-images-idx3-ubyte.*truncated" "${run[@]}" "data.path=\"$TMP/trunc\""

  cp -r "$TMP/good" "$TMP/truncgz"; gzip "$TMP/truncgz/t10k-images-idx3-ubyte"
  head -c 3000 "$TMP/truncgz/t10k-images-idx3-ubyte.gz" >"$TMP/x.gz"; mv "$TMP/x.gz" "$TMP/truncgz/t10k-images-idx3-ubyte.gz"
  expect_exit 3 "t10k-images-idx3-ubyte.gz.*truncated" "${run[@]}" "data.path=\"$TMP/truncgz\""

  cp -r "$TMP/good" "$TMP/corrupt"; gzip "$TMP/corrupt/train-labels-idx1-ubyte"
  size=$(stat -c %s "$TMP/corrupt/train-labels-idx1-ubyte.gz")
  printf '\xff\xff\xff\xff' | dd of="$TMP/corrupt/train-labels-idx1-ubyte.gz" bs=1 seek=$((size - 8)) conv=notrunc status=none
  expect_exit 3 "train-labels-idx1-ubyte.gz.*(gzip|check|corrupt)" "${run[@]}" "data.path=\"$TMP/corrupt\""

  cp -r "$TMP/good" "$TMP/count"; printf '\x00\x00\x00\x63' | dd of="$TMP/count/train-labels-idx1-ubyte" bs=1 seek=4 conv=notrunc status=none
  truncate -s $((8 + 99)) "$TMP/count/train-labels-idx1-ubyte"
  expect_exit 3 "train-labels-idx1-ubyte.*count mismatch" "${run[@]}" "data.path=\"$TMP/count\""

  cp -r "$TMP/good" "$TMP/label"; printf '\x0c' | dd of="$TMP/label/t10k-labels-idx1-ubyte" bs=1 seek=20 conv=notrunc status=none
  expect_exit 3 "t10k-labels-idx1-ubyte.*label 12.*out of range" "${run[@]}" "data.path=\"$TMP/label\""

  rm -rf "$TMP/nofile" "$TMP/magic" "$TMP/trunc" "$TMP/truncgz" "$TMP/corrupt" "$TMP/count" "$TMP/label"
done

# The real files without (part of) their gzip trailer: zlib 1.2.13's gzread reported the end of
# the data without an error, so these loaded unverified.
mkdir -p "$TMP/real" "$TMP/re"
cp "$FMNIST"/*.gz "$TMP/real/"
for f in "$FMNIST"/*.gz; do gzip -dc "$f" | gzip -6 >"$TMP/re/$(basename "$f")"; done
for set in real re; do
  for cut in 8 4 1; do
    d=$TMP/$set-cut$cut
    cp -r "$TMP/$set" "$d"
    size=$(stat -c %s "$d/train-images-idx3-ubyte.gz")
    truncate -s $((size - cut)) "$d/train-images-idx3-ubyte.gz"
    want="train-images-idx3-ubyte.gz: truncated: the gzip stream ends before its CRC-32 and length trailer"
    expect_exit 3 "$want" "$MPDIST" "$cfg" --set "data.path=\"$d\"" --dry-run
    [ "$cut" != 8 ] || expect_exit 3 "$want" "$MPDIST" "$cfg" --set "data.path=\"$d\"" \
      --set data.train_limit=100 --set train.max_steps=1
    rm -rf "$d"
  done
done

# Only one rank's data is bad (a path present on one node only): the ranks still agree and
# stop together instead of hanging.
expect_exit 3 "$TMP/nowhere: no such directory" mpirun -np 1 "$MPDIST" "$cfg" --set "data.path=\"$TMP/good\"" \
  : -np 1 "$MPDIST" "$cfg" --set "data.path=\"$TMP/nowhere\""
finish
