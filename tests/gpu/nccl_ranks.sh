#!/usr/bin/env bash
# The multi-rank NCCL stage of tests/gpu/run.sh (issue 46): 2 and 4 ranks through NCCL on the
# one GPU of the machine, shared under comm.share_gpu = true (each rank a host of its own to
# NCCL, talking over loopback sockets: this tests NCCL's API, our streams, events, offsets and
# watchdog, not NVLink, P2P or speed).
#   - cnn_bn on Fashion-MNIST at O2 fp16 and bf16, 2 ranks, 30 steps, ZeRO-1 off and on: the
#     final checkpoint of the NCCL run (comm.backend = nccl) is bitwise the MPI route's
#     (comm.backend = mpi: the same device buffers through host copies and Open MPI), h5diff of
#     /params /optim /scaler /buffers; the NCCL run's banner says NCCL with the GPU shared; every
#     run under amp.deterministic (cuDNN algorithms without atomics: bitwise claims need them)
#   - CUDA graphs with NCCL inside (issue 48): the 2-rank fp16 NCCL runs above (ZeRO-1 off and
#     on; amp.cuda_graphs = "off") again with "on": they
#     capture their step with its collectives and launch it (their summaries' "graph" record),
#     and end bitwise where the eager runs did
#   - 4 ranks at O2 fp16: the final parameters within 1e-2 relative L2 distance of the MPI
#     route's (sums in another order: an fp16 rounding per step at most)
#   - comm_hidden of the NCCL runs, as their metrics report it (overlap measured, not assumed:
#     timed on the device by the backend's clock marks, comm/buckets.c), in [0, 1]
#   - bench-comm --device cuda on 1 rank and on 2 sharing the GPU: our NCCL transport beside a
#     bare NCCL loop, no wrong element, the average busbw ratios reported
#   - a damaged image in rank 1's shard of an image folder (made from DATA by BUILD's
#     tests/make_folder), the step a graph over NCCL: both ranks exit 3 themselves, one line
#   - rank 1 stopped (SIGSTOP) in a 2-rank NCCL run with comm.timeout_s 5: exit 6 within 15 s,
#     rank 0's error line first, naming rank 1 as the one that did not arrive (the census), at
#     most one line a rank, no process left
# Usage: tests/gpu/nccl_ranks.sh BUILD DATA OUT      (BUILD has mpdist; DATA Fashion-MNIST's
# directory; OUT gets the runs, nccl-ranks.txt with one line per check, and the metrics).
# Exits 1 when a check failed. Needs a GPU, h5diff, h5dump and python3.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:?build directory} data=${2:?Fashion-MNIST directory} out=${3:?output directory}
cd "$(dirname "$0")/../.."
mpdist=$build/mpdist
cfg=configs/fashion-mnist-cnn-bn.cfg
mkdir -p "$out"
report=$out/nccl-ranks.txt
source tests/gpu/checks.bash
common=(--set amp.device=cuda --set "data.path=\"$data\"" --set train.max_steps=30
        --set data.train_limit=8192 --set data.test_limit=512 --set train.eval_every=0
        --set checkpoint.at_end=true --set log.progress=none --set log.every=10
        --set comm.share_gpu=true --set comm.timeout_s=120 --set amp.opt_level=O2
        --set amp.deterministic=true)

# run NAME NP ARGS...: a run into $out/NAME (checkpoints) and $out/NAME.jsonl; its output in
# $out/NAME.out; returns its exit code.
run() {
  local name=$1 np=$2
  shift 2
  rm -rf "${out:?}/$name"
  timeout -k 10 "${MPDIST_GPU_RUN_TIMEOUT:-300}" mpirun -np "$np" "$mpdist" "$cfg" "${common[@]}" \
    --set "checkpoint.dir=\"$out/$name\"" --set "log.metrics=\"$out/$name.jsonl\"" "$@" \
    >"$out/$name.out" 2>&1
}
last_ckpt() { ls "$out/$1"/ckpt-*.h5 2>/dev/null | tail -1; }
same_ckpt() { # same_ckpt A B: the final checkpoints' state is bitwise equal
  local a b obj
  a=$(last_ckpt "$1") b=$(last_ckpt "$2")
  [ -n "$a" ] && [ -n "$b" ] || { echo "  no checkpoint in $out/$1 or $out/$2"; return 1; }
  for obj in /params /optim /scaler /buffers; do
    h5diff "$a" "$b" "$obj" "$obj" >/dev/null 2>&1 || { echo "  $obj differs"; h5diff -r "$a" "$b" "$obj" "$obj" | head -5; return 1; }
  done
}
said_nccl() { grep -q '^comm: NCCL: .* sharing 1 GPU' "$out/$1.out"; }
hidden() { # the comm_hidden values of a run's step records
  python3 - "$out/$1.jsonl" <<'EOF'
import json, sys
v = [r.get("comm_hidden") for r in map(json.loads, open(sys.argv[1])) if r.get("type") == "step"]
print(" ".join("null" if x is None else f"{x:.2f}" for x in v))
EOF
}
measured() { # a step record of the run has comm_hidden in [0, 1]
  hidden "$1" | tr ' ' '\n' | awk '$1 != "null" && $1 >= 0 && $1 <= 1 { ok = 1 } END { exit !ok }'
}

echo "== NCCL between ranks on one shared GPU: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
for half in fp16 bf16; do
  for zero in 0 1; do
    tag=$half-zero$zero
    rc_n=0 rc_m=0
    run "nccl2-$tag" 2 --set amp.half="\"$half\"" --set optim.zero=$zero --set comm.backend='"nccl"' \
      --set amp.cuda_graphs='"off"' || rc_n=$?
    run "mpi2-$tag" 2 --set amp.half="\"$half\"" --set optim.zero=$zero --set comm.backend='"mpi"' || rc_m=$?
    check "2 ranks O2 $half ZeRO-1 $zero: both runs end well (nccl exit $rc_n, mpi exit $rc_m)" \
      test "$rc_n" = 0 -a "$rc_m" = 0
    check "2 ranks O2 $half ZeRO-1 $zero: the NCCL run took NCCL on the shared GPU" said_nccl "nccl2-$tag"
    check "2 ranks O2 $half ZeRO-1 $zero: NCCL's checkpoint is bitwise the MPI route's" \
      same_ckpt "nccl2-$tag" "mpi2-$tag"
    check "2 ranks O2 $half ZeRO-1 $zero: comm_hidden measured on the device ($(hidden "nccl2-$tag" 2>/dev/null || echo none))" \
      measured "nccl2-$tag"
  done
done

graph_rec() { grep -o '"graph":{[^}]*}' "$out/$1.jsonl" 2>/dev/null | tail -1; }
launched() { graph_rec "$1" | grep -Eq '"captured_at":3,"captures":[1-9][0-9]*,"launches":[1-9]'; }
for zero in 0 1; do
  rc=0
  run "nccl2-fp16-zero$zero-graph" 2 --set amp.half='"fp16"' --set optim.zero=$zero \
    --set comm.backend='"nccl"' --set amp.cuda_graphs='"on"' || rc=$?
  check "2 ranks O2 fp16 ZeRO-1 $zero NCCL, graphs on: exit $rc, the step launched as a graph with its collectives ($(graph_rec "nccl2-fp16-zero$zero-graph" || echo no graph record))" \
    launched "nccl2-fp16-zero$zero-graph"
  check "2 ranks O2 fp16 ZeRO-1 $zero NCCL: the graph run ends bitwise where the eager run did" \
    same_ckpt "nccl2-fp16-zero$zero-graph" "nccl2-fp16-zero$zero"
done

rc_n=0 rc_m=0
run nccl4-fp16 4 --set comm.backend='"nccl"' || rc_n=$?
run mpi4-fp16 4 --set comm.backend='"mpi"' || rc_m=$?
check "4 ranks O2 fp16: both runs end well (nccl exit $rc_n, mpi exit $rc_m)" test "$rc_n" = 0 -a "$rc_m" = 0
check "4 ranks O2 fp16: the NCCL run took NCCL on the shared GPU" said_nccl nccl4-fp16
# The relative L2 distance of two checkpoints' /params, read with h5dump (no h5py needed).
params() { h5dump -A 0 -y -w 0 -m %.9g -g /params "$1" | awk '/DATA \{/ {d = 1; next} /\}/ {d = 0} d'; }
dist=$(python3 -c '
import sys
x, y = ([float(v) for v in open(p).read().replace(",", " ").split()] for p in sys.argv[1:3])
assert len(x) == len(y) and x, "parameter counts differ"
print("%.3e" % ((sum((a - b) ** 2 for a, b in zip(x, y)) / sum(b * b for b in y)) ** 0.5))
' <(params "$(last_ckpt nccl4-fp16)") <(params "$(last_ckpt mpi4-fp16)") 2>&1 | tail -1 || true)
check "4 ranks O2 fp16: final parameters within 1e-2 relative L2 of the MPI route's (measured $dist)" \
  python3 -c "import sys; sys.exit(not float('$dist') <= 1e-2)"
check "4 ranks O2 fp16 (graphs under auto): comm_hidden measured on an eager step ($(hidden nccl4-fp16 2>/dev/null || echo none))" \
  measured nccl4-fp16

# bench-comm's device table: GPU memory through our NCCL transport beside a bare NCCL loop
# (comm/nccl_raw.h), every collective and dtype, no wrong element; on 1 rank (NCCL's path on the
# device: the ratio there is our transport's overhead) and on 2 ranks sharing the GPU (sockets on
# loopback: the bytes and the calls, not a speed). The tables are kept in $out.
for np in 1 2; do
  rc=0 share=() size=256M
  [ "$np" = 1 ] || { share=(--share-gpu); size=16M; }
  timeout -k 10 300 mpirun -np "$np" "$mpdist" bench-comm --device cuda "${share[@]}" -b 1K \
    -e "$size" -f 4 -n 10 -w 5 -r 2 >"$out/bench-comm-np$np.txt" 2>&1 || rc=$?
  check "bench-comm --device cuda on $np rank(s): exit 0 (got $rc)" test "$rc" = 0
  check "bench-comm --device cuda on $np rank(s): 3 tables of the NCCL transport on cuda memory" \
    test "$(grep -c '^# mpdist bench-comm: in-place .*, transport nccl on cuda memory (GPU [0-9]*); ' "$out/bench-comm-np$np.txt")" = 3
  check "bench-comm --device cuda on $np rank(s): raw ncclAllReduce rows, none wrong" \
    awk '/raw ncclAllReduce, same bytes/ { raw = 1 } /^ +[0-9]/ { rows++; if ($8 != 0) bad = 1 }
         END { exit !(raw && rows > 0 && !bad) }' "$out/bench-comm-np$np.txt"
  while read -r line; do say "     np $np: $line"; done < <(grep '^# Avg [a-z (1)]* bandwidth' "$out/bench-comm-np$np.txt")
done

# A data error on one rank (a damaged image of an image folder in rank 1's third batch) with the
# step a graph over NCCL: every rank ends itself with exit 3 at the next host point (log.every),
# one error line naming the file, no MPI_Abort (src/train.c's blank batches and data_error).
rm -rf "${out:?}/folder" "$out/folder-ck"
"$build/tests/make_folder" "$data" "$out/folder" 600 100 >/dev/null
bad=$(find "$out/folder/train" -type f | LC_ALL=C sort | sed -n 34p)
truncate -s 100 "$bad"
rm -f "$out/exits"
rc=0
EXITS=$out/exits timeout -k 10 120 mpirun -np 2 -x EXITS bash -c \
  'rc=0; "$0" "$@" || rc=$?; echo "exit $rc" >>"$EXITS"; exit $rc' "$mpdist" "$cfg" "${common[@]}" \
  --set comm.backend='"nccl"' --set amp.cuda_graphs='"on"' --set 'data.format="folder"' \
  --set "data.path=\"$out/folder\"" --set data.image_size=28 --set data.channels=1 \
  --set data.resize=28 --set data.batch_size=8 --set data.shuffle=false --set log.every=5 \
  --set "checkpoint.dir=\"$out/folder-ck\"" --set "log.metrics=\"\"" >"$out/folder.out" 2>&1 || rc=$?
line=$(grep '^mpdist: error:' "$out/folder.out" || true)
check "a damaged image in rank 1's shard, NCCL and graphs: exit 3 (got $rc), one line naming $(basename "$bad"), both ranks exit 3 themselves ($(sort "$out/exits" 2>/dev/null | tr '\n' ' '))" \
  test "$rc" = 3 -a "$(echo "$line" | grep -c .)" = 1 -a "$(sort "$out/exits" 2>/dev/null | tr '\n' ' ')" = "exit 3 exit 3 " \
  -a -n "$(grep -F "$(basename "$bad")" <<<"$line")"
if grep -qi MPI_ABORT "$out/folder.out"; then check "the data error ended without MPI_Abort" false; fi

# A stopped rank: the job must end by the watchdog, with exit 6, and leave nothing.
rank_pid() { # rank_pid R: the process of rank R of the running job
  local p
  for p in $(pgrep -f "^$mpdist $cfg" || true); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$1" && echo "$p"
  done
  return 0
}
rm -rf "${out:?}/stop" "$out/stop.jsonl"
mpirun -np 2 "$mpdist" "$cfg" "${common[@]}" --set comm.backend='"nccl"' --set train.max_steps=0 \
  --set train.epochs=1000 --set comm.timeout_s=5 --set checkpoint.at_end=false \
  --set "log.metrics=\"$out/stop.jsonl\"" >"$out/stop.out" 2>&1 &
job=$!
for _ in $(seq 1200); do grep -q '"type":"step"' "$out/stop.jsonl" 2>/dev/null && break; sleep 0.1; done
victim=$(rank_pid 1)
rc=0 took=-1
if [ -n "$victim" ]; then
  t0=$SECONDS
  kill -STOP "$victim"
  timeout 120 tail --pid=$job -f /dev/null || true
  wait $job || rc=$?
  took=$((SECONDS - t0))
else
  kill -9 $job 2>/dev/null || true
  wait $job || true
fi
sleep 1
left=$(pgrep -f "^$mpdist $cfg" || true)
[ -z "$left" ] || kill -9 $left 2>/dev/null || true
line=$(grep '^mpdist: error:' "$out/stop.out" || true)
check "SIGSTOP of rank 1 (pid ${victim:-none}): exit 6 (got $rc) within 15 s (took $took s), no process left" \
  test -n "$victim" -a "$rc" = 6 -a "$took" -le 15 -a -z "$left"
# mpirun resumes the stopped rank (SIGCONT) before its SIGTERM, a stop request to mpdist, so rank 1
# may report its own failed collective after rank 0's line: one line a rank, the watchdog's first.
ranks_of() { grep -o '\[rank [0-9]*' <<<"$line" | sort; } # one per line that names its rank
check "SIGSTOP of rank 1: one error line a rank, each naming its rank ($(echo "$line" | grep -c .) lines)" \
  test -n "$line" -a "$(ranks_of | uniq | wc -l)" = "$(echo "$line" | grep -c .)" \
  -a "$(ranks_of | wc -l)" = "$(echo "$line" | grep -c .)"
while read -r l; do say "     its line: $l"; done <<<"$line"
check "SIGSTOP of rank 1: the first line is rank 0's watchdog, naming rank 1 as the one that did not arrive" \
  grep -Eq '^mpdist: error: comm: \[rank 0 .*timed out after .* did not arrive: 1( |$)' <<<"$(head -1 <<<"$line")"
say "$failures check(s) failed"
[ "$failures" = 0 ]
