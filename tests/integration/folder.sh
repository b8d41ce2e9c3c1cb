#!/usr/bin/env bash
# Image folders (data.format = "folder", io/folder.c) end to end, on a folder of PNG and JPEG
# files written from Fashion-MNIST's IDX files (tests/util/make_folder.c: even samples PNG, odd
# JPEG). The MLP trains on 2 ranks at the images' own size, and the cnn with the training
# transform (random resized crop and flip): each bit for bit the same over reruns and with 0, 1
# and 3 loader threads; a damaged JPEG (a cut header, a cut scan, a scan ended early by its end
# marker), an image name that is no regular file and a class without images end the run with
# exit 3 naming the file; bad configs end with exit 2 naming the key.
source "$(dirname "$0")/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
[ -d "$FMNIST" ] || { echo "skip: $FMNIST (dataset-fashion-mnist) is not installed"; exit 77; }
"$(dirname "$MPDIST")/tests/make_folder" "$FMNIST" "$TMP/fm" 3000 500 ||
  { echo "FAIL: make_folder"; exit 1; }

run() { # run NAME CONFIG [MPDIST ARGS]: 2 ranks, 30 steps on the folder
  local name=$1 cfg=$2
  shift 2
  timeout 300 mpirun -np 2 "$MPDIST" "$SRC/configs/$cfg" --set 'data.format="folder"' \
    --set "data.path=\"$TMP/fm\"" --set data.image_size=28 --set data.channels=1 \
    --set train.max_steps=30 --set log.every=5 --set "checkpoint.dir=\"$TMP/ck-$name\"" \
    --set "log.metrics=\"$TMP/$name.jsonl\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -5 "$TMP/$name.out"; exit 1; }
  comparable "$TMP/$name.jsonl" "$TMP/$name.cmp"
}
run mlp fashion-mnist-mlp.cfg --set data.resize=28
run mlp0 fashion-mnist-mlp.cfg --set data.resize=28 --set data.loader_threads=0
run mlp3 fashion-mnist-mlp.cfg --set data.resize=28 --set data.loader_threads=3
aug=(--set data.augment=true --set data.pad_crop=0)
run cnn fashion-mnist-cnn-bn.cfg "${aug[@]}"
run cnnb fashion-mnist-cnn-bn.cfg "${aug[@]}"
run cnn3 fashion-mnist-cnn-bn.cfg "${aug[@]}" --set data.loader_threads=3 --set data.prefetch=1
[ "$(grep -c '"type":"step"' "$TMP/mlp.cmp")" = 6 ] || { echo "FAIL: want 6 step records"; exit 1; }
expect_ok "mlp: 0 loader threads as 1" cmp "$TMP/mlp.cmp" "$TMP/mlp0.cmp"
expect_ok "mlp: 3 loader threads as 1" cmp "$TMP/mlp.cmp" "$TMP/mlp3.cmp"
expect_ok "cnn with random crops: a rerun the same" cmp "$TMP/cnn.cmp" "$TMP/cnnb.cmp"
expect_ok "cnn with random crops: 3 loader threads as 1" cmp "$TMP/cnn.cmp" "$TMP/cnn3.cmp"
if grep -q '"accuracy":0\.[0-5]' "$TMP/mlp.jsonl"; then
  echo "FAIL: the MLP learned little on the folder:"; grep eval "$TMP/mlp.jsonl"
  failures=$((failures + 1))
fi

one=("$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set train.max_steps=2
  --set "checkpoint.dir=\"$TMP/ck-bad\"" --set "log.metrics=\"$TMP/bad.jsonl\""
  --set 'data.format="folder"' --set data.image_size=28 --set data.channels=1)
cp -r "$TMP/fm" "$TMP/bad"
jpegs=("$TMP"/bad/train/0/*.jpg)
bad=${jpegs[0]}
truncate -s 100 "$bad"
expect_exit 3 "$(basename "$bad"): not a readable JPEG file" \
  "${one[@]}" --set "data.path=\"$TMP/bad\"" --set data.shuffle=false
# A JPEG cut inside its scan, or whose scan meets its end marker early, decodes with filler
# pixels; it is refused as a damaged file (exit 3), not trained on.
cp -r "$TMP/fm" "$TMP/cut" && cp -r "$TMP/fm" "$TMP/eoi"
cut=("$TMP"/cut/train/0/*.jpg) eoi=("$TMP"/eoi/train/0/*.jpg)
truncate -s $(($(stat -c %s "${cut[0]}") - 40)) "${cut[0]}"
expect_exit 3 "$(basename "${cut[0]}"): not a readable JPEG file \(Premature end of JPEG file\)" \
  "${one[@]}" --set "data.path=\"$TMP/cut\"" --set data.shuffle=false --set "checkpoint.dir=\"$TMP/ck-cut\""
printf '\xff\xd9' | dd of="${eoi[0]}" bs=1 seek=$(($(stat -c %s "${eoi[0]}") - 60)) conv=notrunc status=none
expect_exit 3 "$(basename "${eoi[0]}"): not a readable JPEG file \(Corrupt JPEG data: premature end of data segment\)" \
  "${one[@]}" --set "data.path=\"$TMP/eoi\"" --set data.shuffle=false --set "checkpoint.dir=\"$TMP/ck-eoi\""
# A class directory without an image (a link to the root, say) and an image name that is not
# a readable regular file (a dangling or looping link, a directory) are refused, not skipped.
links=("$TMP/fm/train/3/loop.jpg" "$TMP/fm/train/3/gone.png" "$TMP/fm/train/3/dir.jpeg")
ln -s loop.jpg "${links[0]}" && ln -s nowhere.png "${links[1]}" && mkdir "${links[2]}"
expect_exit 3 'train/3/loop.jpg: Too many levels of symbolic links' "${one[@]}" --set "data.path=\"$TMP/fm\"" --dry-run
rm "${links[0]}"
expect_exit 3 'train/3/gone.png: No such file or directory' "${one[@]}" --set "data.path=\"$TMP/fm\"" --dry-run
rm "${links[1]}"
expect_exit 3 'train/3/dir.jpeg: not a regular file' "${one[@]}" --set "data.path=\"$TMP/fm\"" --dry-run
rmdir "${links[2]}"
ln -s .. "$TMP/fm/train/zz"
expect_exit 3 'train/zz: a class directory with no image' "${one[@]}" --set "data.path=\"$TMP/fm\"" \
  --set data.num_classes=11 --dry-run
rm "$TMP/fm/train/zz"
mkdir -p "$TMP/noval" && cp -r "$TMP/fm/train" "$TMP/noval/"
expect_exit 3 'noval/val: no such directory' "${one[@]}" --set "data.path=\"$TMP/noval\""
# The run's outputs inside the folder would be read back as classes or images: refused (exit 2).
expect_exit 2 "checkpoint.dir: $TMP/fm/train/ck lies inside $TMP/fm/train, which data.format \"folder\" reads whole" \
  "${one[@]}" --set "data.path=\"$TMP/fm\"" --set "checkpoint.dir=\"$TMP/fm/train/ck\"" --dry-run
expect_ok "outputs beside train/ and val/ are fine" "${one[@]}" --set "data.path=\"$TMP/fm\"" \
  --set "checkpoint.dir=\"$TMP/fm/ck\"" --set "log.metrics=\"$TMP/fm/m.jsonl\"" --dry-run
printf 'data: { format = "folder"; };\n' >"$TMP/nopath.cfg"
expect_exit 2 "nopath.cfg: folder data needs data.path" "$MPDIST" "$TMP/nopath.cfg"
expect_exit 2 'data.channels: image folders have 1 \(luminance\) or 3 \(RGB\) channels' \
  "${one[@]}" --set "data.path=\"$TMP/fm\"" --set data.channels=2
expect_exit 2 'data.resize: test images are resized to at least data.image_size = 28' \
  "${one[@]}" --set "data.path=\"$TMP/fm\"" --set data.resize=20
finish
