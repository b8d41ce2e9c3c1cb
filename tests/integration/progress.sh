#!/usr/bin/env bash
# The progress line: piped (a Slurm log), rank 0 prints one plain line every log.every steps
# and nothing else per step; on a terminal (a pty from script(1), through mpirun) it draws a
# live bar with rate and ETA redrawn in place.
source "$(dirname "$0")/common.bash"
cd "$TMP"
args=(--set data.train_limit=2560 --set data.test_limit=500 --set train.epochs=2 --set log.every=10)

mpirun -np 2 "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" "${args[@]}" >plain.out 2>&1
# 2560 samples / 2 ranks / batch 64 = 20 steps per epoch, 40 steps: lines at 10, 20, 30, 40.
[ "$(grep -c '^step [0-9]*/40 epoch [12] loss [0-9.]* lr [0-9.e-]* [0-9]* img/s elapsed [0-9.]*s ETA ' plain.out)" = 4 ] ||
  { echo "FAIL: want 4 plain progress lines"; cat plain.out; exit 1; }
if grep -q $'\r' plain.out; then echo "FAIL: carriage returns in a log file"; exit 1; fi

script -qec "mpirun -np 2 '$MPDIST' '$SRC/configs/fashion-mnist-mlp.cfg' ${args[*]}" /dev/null >tty.out 2>&1
grep -q $'\repoch 2 \[=*>* *\] [0-9]*/40 loss .* img/s ETA ' tty.out ||
  { echo "FAIL: no live bar on a terminal"; cat -v tty.out | head; exit 1; }
if grep -q '^step [0-9]*/40' tty.out; then echo "FAIL: plain lines on a terminal"; exit 1; fi
grep -q '^test accuracy: ' tty.out || { echo "FAIL: no accuracy on a terminal"; exit 1; }
echo "ok: plain lines in logs, a live bar on a terminal"
