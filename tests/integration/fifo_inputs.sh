#!/usr/bin/env bash
# Every reader refuses what is not a regular file before it opens it for reading (issue 45,
# class 6): given a FIFO where a file should be (nothing ever writes into it), each command exits
# at once with its code and one line, and never blocks in the open: IDX images (raw and .gz
# names), IDX labels, a CIFAR-10 batch, a text corpus, a config and an @include in it, and a
# checkpoint given to inspect, eval, export, sample and --resume; and a socket as a checkpoint.
# Each must end within 20 s.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
SMALL=(--set data.train_limit=64 --set data.test_limit=64 --set train.max_steps=1 --set log.progress=none)
fifo_ok() { # fifo_ok CODE REGEX CMD...: exit CODE with one matching line, within 20 s
  local want=$1 regex=$2 rc=0
  shift 2
  timeout -k 5 20 "$@" >"$TMP/out" 2>&1 || rc=$? # -k: a blocked open ignores SIGTERM
  if [ "$rc" = "$want" ] && [ "$(grep -c '^mpdist: error:' "$TMP/out")" = 1 ] &&
     grep '^mpdist: error:' "$TMP/out" | grep -Eq -- "$regex"; then
    echo "ok: exit $rc: $(grep '^mpdist: error:' "$TMP/out")"
  else
    echo "FAIL: $* -> exit $rc (want $want; 124: it blocked), want /$regex/:"
    sed 's/^/    /' "$TMP/out" | head -5
    failures=$((failures + 1))
  fi
}

# IDX: the images, as the raw name and as the .gz name; the labels.
for f in train-images-idx3-ubyte train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz; do
  d=$TMP/idx-$f
  mkdir -p "$d"
  cp "$FMNIST"/*.gz "$d/"
  rm -f "$d/${f%.gz}.gz"
  mkfifo "$d/$f"
  fifo_ok 3 "$f: not a regular file \(a FIFO\)" "$MPDIST" "$CFG" "${SMALL[@]}" --set "data.path=\"$d\"" --dry-run
done
# CIFAR-10 binary: a batch file.
mkdir -p "$TMP/cifar"
for b in 1 2 3 4 5; do head -c 3073 /dev/zero >"$TMP/cifar/data_batch_$b.bin"; done
head -c 3073 /dev/zero >"$TMP/cifar/test_batch.bin"
rm "$TMP/cifar/data_batch_3.bin"
mkfifo "$TMP/cifar/data_batch_3.bin"
fifo_ok 3 "data_batch_3\.bin: not a regular file" "$MPDIST" "$SRC/configs/cifar-wrn16-4.cfg" \
  --set data.format=cifar10 --set "data.path=\"$TMP/cifar\"" --set log.progress=none --dry-run
# Text: the corpus itself.
mkfifo "$TMP/corpus"
fifo_ok 3 "corpus: neither a regular file nor a directory" "$MPDIST" "$SRC/configs/fortunes-gpt.cfg" \
  --set "data.path=\"$TMP/corpus\"" --set log.progress=none --dry-run
# A config, and an @include inside one.
mkfifo "$TMP/train.cfg" "$TMP/part.cfg"
fifo_ok 2 "train\.cfg.*not a regular file" "$MPDIST" "$TMP/train.cfg" --dry-run
printf '@include "part.cfg"\n' >"$TMP/inc.cfg"
fifo_ok 2 "part\.cfg.*not a regular file" "$MPDIST" "$TMP/inc.cfg" --dry-run
# A checkpoint, to every command that reads one.
mkfifo "$TMP/ckpt.h5"
want="ckpt\.h5: not a checkpoint file \(not a regular file \(a FIFO\)\)"
fifo_ok 4 "$want" "$MPDIST" inspect "$TMP/ckpt.h5"
fifo_ok 4 "$want" "$MPDIST" export "$TMP/ckpt.h5" "$TMP/out.h5" --dtype fp16
fifo_ok 4 "$want" mpirun -np 1 "$MPDIST" eval "$CFG" "${SMALL[@]}" --checkpoint "$TMP/ckpt.h5"
fifo_ok 4 "$want" "$MPDIST" sample "$SRC/configs/fortunes-gpt.cfg" --checkpoint "$TMP/ckpt.h5"
fifo_ok 4 "$want" mpirun -np 1 "$MPDIST" "$CFG" "${SMALL[@]}" --resume "$TMP/ckpt.h5"
# A socket cannot even be opened (ENXIO): it is named as what it is, not "No such device".
/usr/bin/python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' \
  "$TMP/ckpt.sock"
fifo_ok 4 "ckpt\.sock: cannot open the checkpoint \(not a regular file \(a socket\)\)" \
  "$MPDIST" inspect "$TMP/ckpt.sock"
finish
