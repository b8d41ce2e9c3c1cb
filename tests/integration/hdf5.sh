#!/usr/bin/env bash
# Images in HDF5 files (data.format = "hdf5", io/h5data.c) end to end. The README's h5py
# snippet, run as the README prints it, writes Fashion-MNIST (read from Debian's IDX files) to
# an HDF5 file; the MLP trains on it on 2 ranks with the metrics of the same run on the IDX
# files (the same samples on the same ranks, the same pixels), bit for bit, also with 0 and 3
# loader threads and with the images stored (N, C, H, W) and data.layout = "nchw"; bad files
# (a non-finite float value among them) and configs end with exit 3 and 2 and one line naming
# the file, the dataset or the key; and a 3.9 GB image dataset (chunked, every chunk one
# deflated block: 40 MB of disk) trains under a `ulimit -v` that reading it whole with h5py
# exceeds.
source "$(dirname "$0")/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
PY=/usr/bin/python3
[ -d "$FMNIST" ] || { echo "skip: $FMNIST (dataset-fashion-mnist) is not installed"; exit 77; }

awk '/<!-- snippet: write_h5 -->/ {on = 1; next} on && /^```python/ {code = 1; next}
     code && /^```/ {exit} code {print}' "$SRC/README.md" >"$TMP/write_h5.py"
grep -q "h5py.File" "$TMP/write_h5.py" || { echo "FAIL: README has no write_h5 snippet"; exit 1; }

# Fashion-MNIST from its IDX files into mydata.h5 (the snippet) and nchw.h5 (channels first).
(cd "$TMP" && "$PY" - "$FMNIST" <<'EOF'
import gzip, os, sys, numpy as np
def idx(name):
    path = os.path.join(sys.argv[1], name)
    gz = os.path.exists(path + ".gz")
    raw = gzip.open(path + ".gz").read() if gz else open(path, "rb").read()
    ndim = raw[3]
    dims = np.frombuffer(raw[4:4 + 4 * ndim], dtype=">u4")
    return np.frombuffer(raw[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)
x_train = idx("train-images-idx3-ubyte")[:, :, :, None]
y_train = idx("train-labels-idx1-ubyte")
x_test = idx("t10k-images-idx3-ubyte")[:, :, :, None]
y_test = idx("t10k-labels-idx1-ubyte")
exec(open("write_h5.py").read())
import h5py
with h5py.File("nchw.h5", "w") as f:
    f["train/images"] = x_train.transpose(0, 3, 1, 2)
    f["train/labels"] = y_train.astype(np.int64)
    f["test/images"] = x_test.transpose(0, 3, 1, 2)
    f["test/labels"] = y_test
EOF
) || { echo "FAIL: writing the HDF5 files"; exit 1; }

run() { # run NAME [MPDIST ARGS]: 2 ranks, the MLP, 40 steps
  local name=$1
  shift
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" \
    --set data.train_limit=6000 --set data.test_limit=1000 --set train.max_steps=40 \
    --set log.every=5 --set "checkpoint.dir=\"$TMP/ck-$name\"" \
    --set "log.metrics=\"$TMP/$name.jsonl\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -5 "$TMP/$name.out"; exit 1; }
  # The memory differs: the HDF5 file is not held in memory.
  comparable "$TMP/$name.jsonl" "$TMP/$name.cmp"
}
h5=(--set 'data.format="hdf5"' --set "data.path=\"$TMP/mydata.h5\"")
run idx
run h5 "${h5[@]}"
run h5t0 "${h5[@]}" --set data.loader_threads=0
run h5t3 "${h5[@]}" --set data.loader_threads=3 --set data.prefetch=1
run nchw --set 'data.format="hdf5"' --set "data.path=\"$TMP/nchw.h5\"" --set 'data.layout="nchw"'
[ "$(grep -c '"type":"step"' "$TMP/idx.cmp")" = 8 ] || { echo "FAIL: want 8 step records"; exit 1; }
for name in h5 h5t0 h5t3 nchw; do
  expect_ok "$name: the metrics of the IDX files" cmp "$TMP/idx.cmp" "$TMP/$name.cmp"
done

# Bad files: exit 3 naming the file and the dataset; bad configs: exit 2.
one=("$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set train.max_steps=1
  --set "checkpoint.dir=\"$TMP/ck-bad\"" --set "log.metrics=\"$TMP/bad.jsonl\""
  --set 'data.format="hdf5"')
"$PY" - "$TMP" <<'EOF'
import sys, h5py, numpy as np
d = sys.argv[1]
with h5py.File(d + "/badlabel.h5", "w") as f:
    f["train/images"] = np.zeros((20, 28, 28, 1), np.uint8)
    f["train/labels"] = np.array([3] * 19 + [12])
    f["test/images"] = np.zeros((5, 28, 28, 1), np.uint8)
    f["test/labels"] = np.zeros(5, np.int32)
with h5py.File(d + "/hugelabel.h5", "w") as f:  # read as uint64, not clamped to int64's top
    f["train/images"] = np.zeros((20, 28, 28, 1), np.uint8)
    f["train/labels"] = np.array([3] * 19 + [2**64 - 1], np.uint64)
    f["test/images"] = np.zeros((5, 28, 28, 1), np.uint8)
    f["test/labels"] = np.zeros(5, np.uint8)
for name, bad in (("inf", np.inf), ("nan", np.nan), ("huge", 3e38), ("big", 1e5)):
    with h5py.File(d + "/" + name + ".h5", "w") as f:
        x = np.zeros((20, 28, 28, 1), np.float32)
        x[13, 4, 5, 0] = bad
        f["train/images"] = x
        f["train/labels"] = np.zeros(20, np.int64)
        f["test/images"] = np.zeros((5, 28, 28, 1), np.float32)
        f["test/labels"] = np.zeros(5, np.int32)
EOF
cp "$TMP/mydata.h5" "$TMP/cut.h5" && truncate -s 1000000 "$TMP/cut.h5"
expect_exit 3 'badlabel.h5: train/labels\[19\] is 12, not a class in \[0, 10\)' \
  "${one[@]}" --set "data.path=\"$TMP/badlabel.h5\""
expect_exit 3 'hugelabel.h5: train/labels\[19\] is 18446744073709551615, not a class' \
  "${one[@]}" --set "data.path=\"$TMP/hugelabel.h5\""
for name in inf nan; do # one value in one image: every step would be skipped, silently
  expect_exit 3 "$name.h5: image 13 of train/images holds -?$name at row 4, column 5, channel 0: values must be finite" \
    "${one[@]}" --set "data.path=\"$TMP/$name.h5\"" --set train.max_steps=0 --set data.batch_size=4
done
# Finite in the file, not once normalised (every step would be skipped): 3e38 overflows FP32,
# 1e5 the fp16 input of O2, which FP32 inputs (O0) take.
for c in "huge O0 3e\+38 fp32" "big O2 100000 fp16"; do
  set -- $c
  expect_exit 3 "$1.h5: image 13 of train/images holds $3 at row 4, column 5, channel 0, which \(v - data.mean\) / data.std takes beyond $4's range" \
    "${one[@]}" --set "data.path=\"$TMP/$1.h5\"" --set train.max_steps=0 --set data.batch_size=4 --set amp.opt_level=$2
done
# The augmentation's padding (value 0) normalised beyond the input's dtype: said up front (it
# was skipped silently, or blamed on a pixel of the wrong row).
expect_exit 3 "data.mean and data.std take the padding \(0\) of channel 0 to -1e\+06, beyond fp16's range" \
  "${one[@]}" --set "data.path=\"$TMP/big.h5\"" --set data.augment=true --set data.mean=1000 --set data.std=0.001 \
  --set amp.opt_level=O2 --set data.batch_size=4
trains_ok() { timeout 120 "$@" >"$TMP/out" 2>&1 || { echo "FAIL: $* exited $?"; tail -3 "$TMP/out"; failures=$((failures + 1)); }; }
trains_ok "${one[@]}" --set "data.path=\"$TMP/big.h5\"" --set train.max_steps=8 --set data.batch_size=4 --set amp.opt_level=O0
expect_exit 3 'mydata.h5: no dataset train/pixels' \
  "${one[@]}" --set "data.path=\"$TMP/mydata.h5\"" --set 'data.train_images="train/pixels"'
expect_exit 3 'cut.h5: (holds 1000000 bytes, but its HDF5 structure ends|not a readable HDF5)' \
  "${one[@]}" --set "data.path=\"$TMP/cut.h5\""
expect_exit 3 'fashion-mnist: not a regular file' "${one[@]}" --set "data.path=\"$FMNIST\""
printf 'data: { format = "hdf5"; };\n' >"$TMP/nopath.cfg"
expect_exit 2 'nopath.cfg: hdf5 data needs data.path' "$MPDIST" "$TMP/nopath.cfg"
expect_exit 2 'data.layout' "${one[@]}" --set "data.path=\"$TMP/mydata.h5\"" --set 'data.layout="chw"'

# Larger than memory may allow: 5,000,000 images of 28 x 28 (3.9 GB, chunked, every chunk the
# same deflated block of zeros written directly: 40 MB of disk, no memory until read; a dataset
# never written is refused) train under an address-space limit of 2 GiB, which reading the
# dataset whole with h5py exceeds.
"$PY" - "$TMP/big.h5" <<'EOF'
import sys, zlib, h5py, numpy as np
with h5py.File(sys.argv[1], "w") as f:
    d = f.create_dataset("train/images", (5000000, 28, 28, 1), np.uint8,
                         chunks=(4096, 28, 28, 1), compression="gzip")
    block = zlib.compress(bytes(4096 * 28 * 28))
    for i in range(0, 5000000, 4096):
        d.id.write_direct_chunk((i, 0, 0, 0), block)
    f["train/labels"] = np.arange(5000000) % 10
    f["test/images"] = np.zeros((100, 28, 28, 1), np.uint8)
    f["test/labels"] = np.arange(100) % 10
EOF
expect_larger_than_memory $((2 * 1024 * 1024)) "5,000,000 images (3.9 GB)" \
  "import h5py; h5py.File('$TMP/big.h5')['train/images'][:]" \
  "$SRC/configs/fashion-mnist-mlp.cfg" --set 'data.format="hdf5"' --set "data.path=\"$TMP/big.h5\""
finish
