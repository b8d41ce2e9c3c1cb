#!/usr/bin/env bash
# A tiny gpt trained by mpdist loads into PyTorch (bench/torch_models.py, Debian's
# python3-torch and python3-h5py): the checkpoint's arrays map 1:1 onto the PyTorch module
# (strict load_state_dict), and on the same data PyTorch computes the losses mpdist computed:
#   - the validation loss of the final checkpoint equals the last eval record's (1e-4 relative)
#     and what mpdist eval prints (4 decimals), also for fp16 and bf16 exports of it;
#   - from the step-5 checkpoint, the loss of the batch mpdist trained on at step 6 (dropout 0)
#     equals the loss mpdist logged for step 6 (1e-4 relative): same files in the same order
#     (a directory with a subdirectory, a hidden file, a *.dat file and a symbolic link, which
#     mpdist skips), same split, same windows, same shuffled batch order and offset;
#   - train --amp fp16 on the same text trains with a GradScaler (its loss scale in the JSON
#     line) where this PyTorch has a CPU one, and is refused (exit 2, saying why) where not.
# Skips (exit 77) when PyTorch or h5py cannot be imported.
source "$(dirname "$0")/common.bash"
PY=${MPDIST_PYTHON:-/usr/bin/python3}
"$PY" -c 'import torch, h5py, numpy' 2>/dev/null ||
  { echo "skip: $PY cannot import torch, h5py and numpy (Debian: python3-torch python3-h5py)"; exit 77; }
TT=$SRC/bench/torch_models.py
F=/usr/share/games/fortunes/fortunes
[ -f "$F" ] || { echo "skip: $F missing (Debian package fortunes)"; exit 77; }

# The corpus: 2 files read in byte order of names (a/one, then b), 3 entries skipped.
mkdir -p "$TMP/text/a"
head -c 20000 "$F" >"$TMP/text/a/one"
tail -c +20001 "$F" | head -c 30000 >"$TMP/text/b"
head -c 5000 /usr/share/games/fortunes/linux >"$TMP/text/.hidden"
head -c 5000 /usr/share/games/fortunes/linux >"$TMP/text/c.dat"
ln -s b "$TMP/text/b.u8"
cat >"$TMP/gpt.cfg" <<EOF
data: { format = "text"; path = "$TMP/text"; context = 32; batch_size = 8; val_fraction = 0.1; };
model: { preset = "gpt"; dim = 32; depth = 2; heads = 2; dropout = 0.0; };
amp: { opt_level = "O0"; };
optim: { name = "adam"; lr = 0.02; };
train: { epochs = 100; max_steps = 6; seed = 7; eval_every = 0; };
checkpoint: { dir = "$TMP/ckpt"; every_steps = 5; };
log: { every = 1; progress = "none"; metrics = "$TMP/m.jsonl"; };
EOF

run() { # run WHAT CMD...: CMD must succeed; its output in $TMP/out
  local what=$1
  shift
  timeout 300 "$@" >"$TMP/out" 2>&1 || { echo "FAIL: $what: exit $?: $*"; tail -20 "$TMP/out"; exit 1; }
}
field() { sed -n "s/.*\"$1\": *\\([^,}]*\\).*/\\1/p" | tail -1; }
close() { # close WHAT A B RTOL
  if awk -v a="$2" -v b="$3" -v r="$4" 'BEGIN { d = a - b; if (d < 0) d = -d; m = b < 0 ? -b : b
                                               exit !(a != "" && b != "" && d <= r * m) }'; then
    echo "ok: $1: PyTorch $2, mpdist $3"
  else
    echo "FAIL: $1: PyTorch '$2', mpdist '$3' (relative tolerance $4)"
    failures=$((failures + 1))
  fi
}

run "train" mpirun -np 1 "$MPDIST" "$TMP/gpt.cfg"
C5=$TMP/ckpt/ckpt-00000005.h5 C6=$TMP/ckpt/ckpt-00000006.h5
[ -f "$C5" ] && [ -f "$C6" ] || { echo "FAIL: no step 5 and 6 checkpoints:"; ls "$TMP/ckpt"; exit 1; }
want_test=$(grep '"type":"eval"' "$TMP/m.jsonl" | field loss)
want_step6=$(grep '"type":"step"' "$TMP/m.jsonl" | grep '"step":6[,}]' | field loss)

run "PyTorch eval" "$PY" "$TT" eval --checkpoint "$C6"
got=$(field test_loss <"$TMP/out")
close "validation loss of step 6" "$got" "$want_test" 1e-4
run "PyTorch batch of step 6" "$PY" "$TT" eval --checkpoint "$C5" --train-step 6
close "training loss of step 6 from the step 5 weights" "$(field train_loss <"$TMP/out")" "$want_step6" 1e-4

# mpdist eval prints 6 decimals for text: PyTorch's value within 1e-4 relative (FP32 sums in
# another order).
for dt in fp32 fp16 bf16; do
  file=$C6
  if [ $dt != fp32 ]; then
    file=$TMP/export-$dt.h5
    run "export $dt" "$MPDIST" export "$C6" "$file" --dtype $dt
  fi
  run "mpdist eval $dt" mpirun -np 1 "$MPDIST" eval "$TMP/gpt.cfg" --checkpoint "$file"
  printed=$(sed -nE 's/.*: test loss ([0-9.]+) \(([0-9.]+) bits per byte\)$/\1/p' "$TMP/out")
  run "PyTorch eval $dt" "$PY" "$TT" eval --checkpoint "$file"
  got=$(field test_loss <"$TMP/out")
  if awk -v a="$got" -v b="$printed" 'BEGIN { d = a - b; exit !(b != "" && d <= 1e-4 * b && d >= -1e-4 * b) }'; then
    echo "ok: $dt: mpdist eval prints $printed, PyTorch $got"
  else
    echo "FAIL: $dt: mpdist eval prints '$printed', PyTorch '$got'"
    failures=$((failures + 1))
  fi
done

rc=0 && timeout 300 "$PY" "$TT" train --model gpt --data "$TMP/text" --context 32 --dim 32 --depth 1 --heads 2 \
  --batch 4 --steps 3 --every 1 --test-limit 4 --amp fp16 >"$TMP/out" 2>"$TMP/err" || rc=$?
if "$PY" -c 'import sys, torch; sys.exit(not hasattr(torch.amp, "GradScaler"))'; then
  expect_ok "train --amp fp16: a GradScaler's loss scale" test "$rc" = 0 -a -n "$(field loss_scale <"$TMP/out" | grep -x '[0-9.]*')"
else
  expect_ok "train --amp fp16 without a CPU GradScaler: exit $rc (want 2), $(tail -1 "$TMP/err")" \
    test "$rc" = 2 -a "$(grep -c 'error: --amp fp16 needs PyTorch 2.3' "$TMP/err")" = 1
fi
finish
