# Resume checks shared by the integration scripts (sourced after common.bash, with CFG and
# COMMON set): run, the metrics without timings, the newest checkpoint, same_state,
# killed_save, and graphs (the runs of graphs.sh and graphs_ranks.sh).

run() { # run NAME NP LEVEL [ARGS]: metrics to $TMP/NAME.jsonl, checkpoints in $TMP/NAME/
  local name=$1 np=$2 level=$3
  shift 3
  timeout 300 mpirun -np "$np" "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level="$level" \
    --set "log.metrics=\"$TMP/${METRICS:-$name}.jsonl\"" --set "checkpoint.dir=\"$TMP/${DIR:-$name}\"" "$@" \
    >"$TMP/$name.out" 2>&1 || { echo "FAIL: run $name exited $?"; tail -20 "$TMP/$name.out"; exit 1; }
}
strip() { grep -v '"type":"checkpoint"' "$1" | sed -E 's/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms|wall_s|peak_mem_bytes|device_peak_bytes|host_peak_bytes)":[^,}]*,?//g' | grep -v '"summary"'; }
ckpt() { ls "$TMP/$1"/ckpt-*.h5 | tail -1; }
same_state() { # same_state A B: the final checkpoints' training state is bitwise identical
  local a b
  a=$(ckpt "$1") b=$(ckpt "$2")
  for obj in /params /optim /scaler /rng /data; do
    h5diff "$a" "$b" "$obj" "$obj" >"$TMP/diff" 2>&1 ||
      { echo "FAIL: $1 and $2 differ in $obj:"; head -20 "$TMP/diff"; exit 1; }
  done
  cmp <(strip "$TMP/$1.jsonl") <(strip "$TMP/$2.jsonl") ||
    { echo "FAIL: metrics of $1 and $2 differ"; diff <(strip "$TMP/$1.jsonl") <(strip "$TMP/$2.jsonl") | head; exit 1; }
  echo "ok: $2 is bitwise $1 ($(grep -c '"type":"step"' "$TMP/$2.jsonl") step records, $(basename "$b"))"
}

killed_save() { # killed_save NAME [ARGS]: a 2-rank O2 run saving every 100 steps whose writer kills
  # the process (SIGKILL, the test hook) after 18 datasets: 13 of ckpt-100 (6 parameters, 6
  # momentum buffers, the RNG table) and 5 of ckpt-200. ckpt-100 must be whole and alone in
  # $TMP/NAME, ckpt-200 only a torn temporary.
  local name=$1 rc=0
  shift
  MPDIST_TEST_CKPT_KILL_AFTER=18 timeout 300 mpirun -np 2 -x MPDIST_TEST_CKPT_KILL_AFTER "$MPDIST" "$CFG" \
    "${COMMON[@]}" --set amp.opt_level=O2 --set checkpoint.every_steps=100 "$@" \
    --set "checkpoint.dir=\"$TMP/$name\"" --set "log.metrics=\"$TMP/$name.jsonl\"" >"$TMP/$name.out" 2>&1 || rc=$?
  [ "$rc" != 0 ] || { echo "FAIL: the killed run exited 0"; exit 1; }
  [ "$(ls "$TMP/$name")" = ckpt-00000100.h5 ] || { echo "FAIL: checkpoint dir after the crash: $(ls -a "$TMP/$name")"; exit 1; }
  ls -a "$TMP/$name" | grep -Eq '^\.ckpt-00000200\.h5\.[0-9]+-[0-9]+\.tmp$' || { echo "FAIL: no torn temporary file"; exit 1; }
}

# graphs NAME MODE CFG [ARGS]: a run with amp.cuda_graphs = MODE, started by ${LAUNCH[@]} (none:
# one rank); metrics to $TMP/NAME.jsonl, a checkpoint at the end, its output in $TMP/NAME.out.
graphs() {
  local name=$1 mode=$2 cfg=$3
  shift 3
  timeout 300 ${LAUNCH[@]+"${LAUNCH[@]}"} "$MPDIST" "$cfg" --set "amp.cuda_graphs=\"$mode\"" \
    --set log.progress=plain --set "log.metrics=\"$TMP/$name.jsonl\"" \
    --set "checkpoint.dir=\"$TMP/$name\"" "$@" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; tail -20 "$TMP/$name.out"; exit 1; }
}
