#!/usr/bin/env bash
# Checkpoints of sharded runs (optim.zero = 1) and of accumulating runs (train.accum_steps):
# 1. a 2-rank ZeRO-1 run at O2 with Adam stopped at step 10 writes bitwise the checkpoint of the
#    same run unsharded (whole tensors by name: the file does not depend on the sharding);
# 2. resumed on 4 ranks, sharded again (each rank takes its new block), it continues as the
#    unsharded checkpoint resumed on 4 ranks unsharded does: the same steps, losses within fp16
#    rounding of the sums' order; and on 1 rank bitwise as the unsharded one;
# 3. an accumulating run (2 micro-batches a step) stopped at step 10 and resumed gives bitwise
#    the checkpoint and step records of the same run uninterrupted: checkpoints fall between
#    windows, never inside one;
# 4. --dry-run counts the shards and the accumulator in its bytes (test_recompute counts the
#    recomputation arena);
# 5. on 4 ranks with ZeRO-1 a synchronous save gathers one parameter at a time as rank 0 writes
#    it: rank 0's peak bytes (the allocator's counters, the summary's peak_mem_bytes) exceed those
#    of the same run without checkpoints by at most a quarter of the unsharded state (masters and
#    both Adam slots) plus the buffers (the largest parameter in FP32, gathered, and the writer's
#    copy of one chunk of it, at most 4 MiB: here the whole tensor), where the whole gather that
#    checkpoint.async still makes does not (so the check can fail); the files are the same, h5py
#    reads every tensor whole, and resumed from step 10 on 4 ranks the run ends bitwise equal
#    to the uninterrupted one, on 2 and 1 rank it trains to the end.
source "$(dirname "$0")/common.bash"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
COMMON=(--set data.train_limit=2048 --set data.test_limit=256 --set data.batch_size=32
        --set train.max_steps=20 --set log.every=1 --set log.progress=plain
        --set amp.opt_level=O2 --set optim.name=adam --set optim.lr=0.002)

run() { # run NAME NP [ARGS]: metrics to $TMP/NAME.jsonl, checkpoints in $TMP/NAME/
  local name=$1 np=$2
  shift 2
  timeout 300 mpirun -np "$np" "$MPDIST" "$CFG" "${COMMON[@]}" --set "log.metrics=\"$TMP/$name.jsonl\"" \
    --set "checkpoint.dir=\"$TMP/$name\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -20 "$TMP/$name.out"; exit 1; }
}
ckpt() { ls "$TMP/$1"/ckpt-*.h5 | tail -1; }
steps() { grep '"type":"step"' "$1" | sed -E 's/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms)":[^,}]*,?//g'; }
loss() { grep "\"type\":\"step\",\"step\":$2," "$1" | sed -E 's/.*"loss":([^,]*).*/\1/'; }
same_ckpt() { # same_ckpt A B WHAT: the objects a resume reads are the same bytes
  for obj in /params /optim /buffers /scaler /rng /data; do
    h5ls "$1$obj" >/dev/null 2>&1 || h5ls "$2$obj" >/dev/null 2>&1 || continue # none in either (no BatchNorm)
    h5diff "$1" "$2" "$obj" "$obj" >"$TMP/diff" 2>&1 ||
      { echo "FAIL: $3: $obj differs"; head -5 "$TMP/diff"; failures=$((failures + 1)); return; }
  done
  echo "ok: $3"
}

# 1. sharded and unsharded checkpoints at step 10
run z2 2 --set optim.zero=1 --set train.step_budget=10
grep -q 'ZeRO-1: masters and optimizer state sharded over 2 ranks' "$TMP/z2.out" ||
  { echo "FAIL: no ZeRO-1 in the banner"; cat "$TMP/z2.out"; exit 1; }
run u2 2 --set optim.zero=0 --set train.step_budget=10
same_ckpt "$(ckpt z2)" "$(ckpt u2)" "the 2-rank ZeRO-1 checkpoint is the unsharded one's"
expect_ok "the sharded and unsharded step records agree bitwise" cmp -s <(steps "$TMP/z2.jsonl") <(steps "$TMP/u2.jsonl")

# 2. resumed on 4 ranks (re-sharded) and on 1 rank
for n in 4 1; do
  cp -r "$TMP/z2" "$TMP/z2to$n" && cp "$TMP/z2.jsonl" "$TMP/z2to$n.jsonl"
  cp -r "$TMP/u2" "$TMP/u2to$n" && cp "$TMP/u2.jsonl" "$TMP/u2to$n.jsonl"
  run z2to$n $n --set optim.zero=1 --resume auto
  run u2to$n $n --set optim.zero=0 --resume auto
  for r in z2to$n u2to$n; do
    grep -q '^done: 20 steps' "$TMP/$r.out" && grep -q 'resumed from .*step 10' "$TMP/$r.out" ||
      { echo "FAIL: $r did not resume at 10 and end at 20"; cat "$TMP/$r.out"; failures=$((failures + 1)); }
  done
done
expect_ok "resumed on 1 rank, sharded and unsharded checkpoints continue bitwise alike" \
  cmp -s <(steps "$TMP/z2to1.jsonl") <(steps "$TMP/u2to1.jsonl")
for s in 11 15 20; do # 4 ranks: the sums of 4 half gradients round in another order
  a=$(loss "$TMP/z2to4.jsonl" $s) b=$(loss "$TMP/u2to4.jsonl" $s)
  expect_ok "re-sharded on 4 ranks, step $s's loss $a is the unsharded run's $b within 0.5%" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 0.005 * b) }'
done

# 3. accumulation: stopped and resumed is the uninterrupted run, bitwise
run a2 2 --set train.accum_steps=2 --set data.batch_size=16
run s2 2 --set train.accum_steps=2 --set data.batch_size=16 --set train.step_budget=10
grep -q 'global batch 64 (2 micro-batches of 16 per rank a step)' "$TMP/s2.out" ||
  { echo "FAIL: the banner does not count the micro-batches"; cat "$TMP/s2.out"; failures=$((failures + 1)); }
run s2 2 --set train.accum_steps=2 --set data.batch_size=16 --resume auto
same_ckpt "$(ckpt a2)" "$(ckpt s2)" "an accumulating run stopped at 10 and resumed ends as the uninterrupted one"
expect_ok "and its step records are the uninterrupted run's" cmp -s <(steps "$TMP/a2.jsonl") <(steps "$TMP/s2.jsonl")

# 4. the byte counts of --dry-run
cat_bytes() { grep '^bytes per rank' "$1" | sed -E "s/.* $2 ([0-9]+).*/\1/"; }
dry() { timeout 120 mpirun -np "$1" "$MPDIST" "$CFG" "${COMMON[@]}" --dry-run "${@:2}" >"$TMP/dry" 2>&1 && cat "$TMP/dry"; }
dry 2 --set optim.zero=0 >"$TMP/d0"; dry 2 --set optim.zero=1 >"$TMP/d1"
dry 2 --set train.accum_steps=2 >"$TMP/da"
m0=$(cat_bytes "$TMP/d0" master) m1=$(cat_bytes "$TMP/d1" master)
o0=$(cat_bytes "$TMP/d0" optim) o1=$(cat_bytes "$TMP/d1" optim)
g0=$(cat_bytes "$TMP/d0" grads) ga=$(cat_bytes "$TMP/da" grads)
expect_ok "--dry-run: ZeRO-1 halves the masters ($m0 -> $m1) and optimizer state ($o0 -> $o1) on 2 ranks" \
  awk -v a="$m0" -v b="$m1" -v c="$o0" -v d="$o1" 'BEGIN { exit !(a > 0 && 2 * b <= a + 256 && 2 * d <= c + 1024) }'
expect_ok "--dry-run: accumulation adds an FP32 accumulator to the gradients ($g0 -> $ga)" \
  awk -v a="$g0" -v b="$ga" 'BEGIN { exit !(b >= a + 235146 * 4) }'

# 5. the sharded save's memory, file and resume
summary() { # summary NAME EXPR: a python expression of the summary record s
  /usr/bin/python3 -c 'import json, sys
s = [json.loads(l) for l in open(sys.argv[1]) if "\"summary\"" in l][-1]
print(eval(sys.argv[2]))' "$TMP/$1.jsonl" "$2"
}
run none 4 --set optim.zero=1 --set 'checkpoint.dir=""'
run sync 4 --set optim.zero=1 --set checkpoint.every_steps=10
run async 4 --set optim.zero=1 --set checkpoint.every_steps=10 --set checkpoint.async=true
grep -q 'checkpoint: .*ckpt-00000010.h5 (.* MB in' "$TMP/sync.out" || { echo "FAIL: no synchronous save"; cat "$TMP/sync.out"; exit 1; }

# The unsharded state: rank 0's shard of masters and slots, times 4; the buffers: fc1.weight
# (784 x 256 in FP32) and one chunk of it (the whole of it, under 4 MiB).
state=$(summary none '4 * (s["mem_bytes"]["master"] + s["mem_bytes"]["optim"])')
buffer=$((2 * 784 * 256 * 4))
bound=$((state / 4 + buffer))
base=$(summary none 's["peak_mem_bytes"]')
for r in sync async; do
  extra=$(($(summary $r 's["peak_mem_bytes"]') - base))
  echo "$r: rank 0's peak bytes $extra above the run without checkpoints (bound: $((state / 4)) + $buffer = $bound; unsharded state $state)"
  eval "extra_$r=$extra"
done
expect_ok "the sharded save stays within a quarter of the state plus the buffer" test "$extra_sync" -le "$bound"
expect_ok "the gathered save (checkpoint.async) does not" test "$extra_async" -gt "$bound"

for step in 10 20; do
  f=ckpt-$(printf %08d $step).h5
  same_ckpt "$TMP/sync/$f" "$TMP/async/$f" "the sharded save at step $step holds the gathered save's state"
done
/usr/bin/python3 - "$TMP/sync/ckpt-00000020.h5" <<'EOF' || { echo "FAIL: h5py"; exit 1; }
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    names = []
    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) and n.split("/")[0] in ("params", "optim") else None)
    for n in names:
        a = f[n][()]
        assert a.shape == f[n].shape and a.dtype == np.float32 and np.isfinite(a).all(), n
    shapes = {n: f["params/" + n].shape for n in f["params"]}
    for n, shape in shapes.items():
        for slot in ("exp_avg", "exp_avg_sq"):
            assert f["optim/%s/%s" % (n, slot)].shape == shape, (n, slot)
print("ok: h5py reads %d tensors whole (%d parameters and their two Adam slots)" % (len(names), len(shapes)))
EOF

for np in 4 2 1; do
  mkdir -p "$TMP/r$np" && cp "$TMP/sync/ckpt-00000010.h5" "$TMP/r$np/"
  run r$np $np --set optim.zero=1 --resume auto --set checkpoint.every_steps=10
  grep -q "resumed from .*ckpt-00000010.h5: step 10" "$TMP/r$np.out" || { echo "FAIL: $np ranks did not resume at 10"; cat "$TMP/r$np.out"; exit 1; }
  grep -q '^done: ' "$TMP/r$np.out" || { echo "FAIL: $np ranks did not finish"; tail "$TMP/r$np.out"; exit 1; }
  echo "ok: resumed on $np rank(s): $(grep '^done: ' "$TMP/r$np.out")"
done
same_ckpt "$TMP/sync/ckpt-00000020.h5" "$TMP/r4/ckpt-00000020.h5" "resumed on 4 ranks, the state at step 20 is bitwise the uninterrupted run's"
finish
