# Resume checks shared by the integration scripts (sourced after common.bash, with CFG and
# COMMON set): run, the metrics without timings, the newest checkpoint, and same_state.

run() { # run NAME NP LEVEL [ARGS]: metrics to $TMP/NAME.jsonl, checkpoints in $TMP/NAME/
  local name=$1 np=$2 level=$3
  shift 3
  timeout 300 mpirun -np "$np" "$MPDIST" "$CFG" "${COMMON[@]}" --set amp.opt_level="$level" \
    --set "log.metrics=\"$TMP/${METRICS:-$name}.jsonl\"" --set "checkpoint.dir=\"$TMP/${DIR:-$name}\"" "$@" \
    >"$TMP/$name.out" 2>&1 || { echo "FAIL: run $name exited $?"; tail -20 "$TMP/$name.out"; exit 1; }
}
strip() { sed -E 's/"(images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms|wall_s|peak_mem_bytes|device_peak_bytes|host_peak_bytes)":[^,}]*,?//g' "$1" | grep -v '"summary"'; }
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
