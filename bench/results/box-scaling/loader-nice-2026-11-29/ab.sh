#!/bin/bash
# training's all-reduce on the box: when it starts and how long MPI takes, per loader setting
set -u
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../../../.." # the repository root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 MPDIST_BOX_PIN=1
B=$MPDIST_BIN X=${X:-/tmp/start-experiment}
mkdir -p "$X"
mpicc -O2 -shared -fPIC -o "$X/shim.so" "$here/shim.c"
hosts=h1:1,h2:1
MPDIST_BIN=$B bash cluster/box/up.sh 2 --rate 10gbit --delay 0.05ms >/dev/null 2>&1 || { echo up failed; exit 1; }
trap 'bash cluster/box/down.sh >/dev/null 2>&1' EXIT
M="mpirun -x MPDIST_BOX_PIN -x LD_PRELOAD=$X/shim.so -x SHIM_DIR --host $hosts $(cluster/box/mpirun-args)
   --mca coll_tuned_use_dynamic_rules 1 --mca coll_tuned_allreduce_algorithm 4 --mca pml ob1"
for rep in 1 2 3; do
  export SHIM_DIR=$X/bench$rep; rm -rf "$SHIM_DIR"; mkdir -p "$SHIM_DIR"
  $M $B bench-comm --op allreduce --blocking -b 470272 -e 470272 -f 2 -n 20 -w 2 -r 3 -d half --csv 2>/dev/null |
    awk -F, '/^allreduce/ {print "bench-comm median", $6}'
  python3 "$here/analyse.py" "$SHIM_DIR"
  for mode in ${MODES:-nice0 nice19 thr0}; do
    case $mode in nice*) set_=(--set data.loader_nice=${mode#nice}) ;; thr0) set_=(--set data.loader_threads=0) ;; esac
    export SHIM_DIR=$X/$rep-$mode; rm -rf "$SHIM_DIR"; mkdir -p "$SHIM_DIR"
    $M $B configs/fashion-mnist-mlp.cfg --set amp.opt_level=O2 --set train.max_steps=200 --set log.every=1 \
      --set log.progress=none --set log.metrics=$SHIM_DIR/m.jsonl --set log.trace=$SHIM_DIR/trace \
      --set data.train_limit=8192 --set data.test_limit=500 "${set_[@]}" >/dev/null 2>&1
    python3 "$here/analyse.py" "$SHIM_DIR" "$mode"
  done
done
