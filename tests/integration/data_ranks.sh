#!/usr/bin/env bash
# A data error met during a run of several ranks (a damaged image in an image folder, read by
# the loader of one rank) ends every rank together: exit 3, one error line from the first rank
# that met it (the lowest of those that met one in the same step), no MPI_Abort, no step logged
# or checkpoint written after it. On the CPU every step is a host point, so the run ends in the
# step that met it; on the staged backend (a GPU's copy path) with the step replayed as a graph,
# at the next host point (log.every), the blank steps in between skipped, the first step's
# failure the one reported. The same for a damaged test image, in training's evaluation and in
# `mpdist eval`.
source "$(dirname "$0")/common.bash"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
[ -d "$FMNIST" ] || { echo "skip: $FMNIST (dataset-fashion-mnist) is not installed"; exit 77; }
"$(dirname "$MPDIST")/tests/make_folder" "$FMNIST" "$TMP/fm" 600 100 ||
  { echo "FAIL: make_folder"; exit 1; }

# With data.shuffle = false and 8 samples a rank, step s (from 1) of rank r reads the samples
# (8 (s - 1) + j) 2 + r, j < 8, in the folder's order (classes, then names, as C sorts them).
sample() { # sample SPLIT INDEX: the file of that sample
  find "$1" -type f | LC_ALL=C sort | sed -n "$(($2 + 1))p"
}
damage() { # damage SPLIT INDEX: cuts that sample's file short; prints its name
  local f
  f=$(sample "$1" "$2")
  truncate -s 100 "$f"
  basename "$f"
}
# Each rank runs under a shell that notes how it ended in $EXITS: a job ended through MPI_Abort
# has ranks killed (no line, or a signal's status) and mpirun may print its banner.
export EXITS=$TMP/exits
ranks=(mpirun -np 2 bash -c 'rc=0; "$0" "$@" || rc=$?; echo "exit $rc" >>"$EXITS"; exit $rc')
# no_abort NAME: every rank of the last run (its output in $TMP/out) ended with exit 3 itself
no_abort() {
  local ends
  ends=$(sort "$EXITS" | tr '\n' ' ')
  if [ "$ends" != "exit 3 exit 3 " ] || grep -qi 'MPI_ABORT' "$TMP/out"; then
    echo "FAIL: $1: the ranks ended [$ends], want two exit 3 without MPI_Abort:"
    sed 's/^/    /' "$TMP/out" | head -20
    failures=$((failures + 1))
  fi
  rm -f "$EXITS"
}
# records NAME WANT: the steps logged in $TMP/NAME.jsonl are 1..WANT
records() {
  local got
  got=$(grep -c '"type":"step"' "$TMP/$1.jsonl" || true)
  [ "$got" = "$2" ] || { echo "FAIL: $1: $got steps logged, want $2"; failures=$((failures + 1)); }
}
run=("${ranks[@]}" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" --set 'data.format="folder"'
  --set data.image_size=28 --set data.channels=1 --set data.resize=28 --set data.batch_size=8
  --set data.shuffle=false --set train.max_steps=6 --set log.progress=\"none\")
at() { # at NAME: the outputs of a run named NAME
  echo --set "checkpoint.dir=\"$TMP/ck-$1\"" --set "log.metrics=\"$TMP/$1.jsonl\""
}

# Rank 1's third batch (sample 33): rank 1 reports; steps 1 and 2 are logged and saved.
cp -r "$TMP/fm" "$TMP/one"
f=$(damage "$TMP/one/train" 33)
expect_exit 3 "$f: not a readable" "${run[@]}" --set "data.path=\"$TMP/one\"" $(at one) \
  --set log.every=1 --set checkpoint.every_steps=1
no_abort "rank 1's batch"
records one 2
ls "$TMP/ck-one"/ckpt-*3.h5 >/dev/null 2>&1 && { echo "FAIL: a checkpoint of step 3"; failures=$((failures + 1)); }
ls "$TMP/ck-one"/ckpt-*2.h5 >/dev/null 2>&1 || { echo "FAIL: no checkpoint of step 2"; failures=$((failures + 1)); }

# Both ranks' third batches: rank 0's file is named.
cp -r "$TMP/fm" "$TMP/both"
f0=$(damage "$TMP/both/train" 32)
damage "$TMP/both/train" 35 >/dev/null
expect_exit 3 "$f0: not a readable" "${run[@]}" --set "data.path=\"$TMP/both\"" $(at both)
no_abort "both ranks' batches"

# Rank 0's fourth batch and rank 1's third: rank 1 met it first.
cp -r "$TMP/fm" "$TMP/first"
damage "$TMP/first/train" 48 >/dev/null
f1=$(damage "$TMP/first/train" 33)
expect_exit 3 "$f1: not a readable" "${run[@]}" --set "data.path=\"$TMP/first\"" $(at first) \
  --set log.every=1
no_abort "rank 1 first"
records first 2

# The staged backend, the step a graph: the run ends at step 5's host point, no step logged;
# with rank 0's batch damaged in step 4 as well, rank 1's (step 3) is still the one named.
staged=(--set log.every=5 --set checkpoint.every_steps=5 --set amp.cuda_graphs=\"on\"
  --set amp.opt_level=\"O2\")
MPDIST_CPU_STAGED=1 expect_exit 3 "$f: not a readable" "${run[@]}" \
  --set "data.path=\"$TMP/one\"" $(at staged) "${staged[@]}"
no_abort "staged"
records staged 0
ls "$TMP/ck-staged"/ckpt-*.h5 >/dev/null 2>&1 && { echo "FAIL: staged: a checkpoint"; failures=$((failures + 1)); }
MPDIST_CPU_STAGED=1 expect_exit 3 "$f1: not a readable" "${run[@]}" \
  --set "data.path=\"$TMP/first\"" $(at staged-first) "${staged[@]}"
no_abort "staged, rank 1 first"

# A damaged test image of rank 1 (test sample 3): the evaluation after training, and `mpdist
# eval` of a good run's checkpoint.
cp -r "$TMP/fm" "$TMP/val"
fv=$(damage "$TMP/val/val" 3)
expect_exit 3 "$fv: not a readable" "${run[@]}" --set "data.path=\"$TMP/val\"" $(at val)
no_abort "evaluation"
records val 1
"${run[@]}" --set "data.path=\"$TMP/fm\"" $(at good) >"$TMP/good.out" 2>&1 ||
  { echo "FAIL: the good run"; cat "$TMP/good.out"; exit 1; }
rm -f "$EXITS"
ck=$(ls "$TMP/ck-good"/ckpt-*.h5 | tail -1)
expect_exit 3 "$fv: not a readable" "${ranks[@]}" "$MPDIST" eval "$SRC/configs/fashion-mnist-mlp.cfg" \
  --set 'data.format="folder"' --set data.image_size=28 --set data.channels=1 --set data.resize=28 \
  --set data.batch_size=8 --set "data.path=\"$TMP/val\"" --checkpoint "$ck"
no_abort "mpdist eval"
finish
