# Shared by the integration scripts (sourced, not run): paths, a scratch directory, and
# expect_exit, which runs a command with a deadline and checks its exit code and message, and
# expect_ok, which counts a failed check.
set -euo pipefail
MPDIST=${MPDIST:?set by ctest}
SRC=${MPDIST_SRC:?set by ctest}
TMP=${MPDIST_TEST_TMP:-/tmp}/$(basename "$0" .sh).$$
rm -rf "$TMP" && mkdir -p "$TMP"
trap 'rm -rf "$TMP"' EXIT
FMNIST=/usr/share/datasets/fashion-mnist
failures=0

# expect_exit CODE REGEX CMD...: CMD must exit with CODE within 120 s (no hang), and its output
# must hold exactly one "mpdist: error:" line, matching REGEX (extended grep).
expect_exit() {
  local want=$1 regex=$2 rc=0
  shift 2
  timeout 120 "$@" >"$TMP/out" 2>&1 || rc=$?
  local errors
  errors=$(grep -c '^mpdist: error:' "$TMP/out" || true)
  if [ "$rc" != "$want" ] || [ "$errors" != 1 ] || ! grep '^mpdist: error:' "$TMP/out" | grep -Eq -- "$regex"; then
    echo "FAIL: $* -> exit $rc (want $want), $errors error line(s), want /$regex/:"
    sed 's/^/    /' "$TMP/out" | head -20
    failures=$((failures + 1))
  else
    echo "ok: exit $rc: $(grep '^mpdist: error:' "$TMP/out")"
  fi
}

# expect_ok WHAT CMD...: prints "ok: WHAT" when CMD succeeds, else counts a failure.
expect_ok() {
  local what=$1
  shift
  if "$@"; then echo "ok: $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}

# sanitizer_build: whether $MPDIST is a sanitizer build, which cannot start under `ulimit -v`
# (its shadow memory needs terabytes of address space).
sanitizer_build() {
  # (not `ldd | grep -q`: under pipefail, grep leaving early may fail ldd and so the test)
  [[ $(ldd "$MPDIST" 2>/dev/null || true) == *libasan* ]]
}

# expect_larger_than_memory KB WHAT READ_WHOLE CONFIG [MPDIST ARGS]: the python code READ_WHOLE
# (reading WHAT whole) must fail under `ulimit -v KB`, and 3 steps of mpdist CONFIG ARGS on one
# rank and thread must train under the same limit (skipped for a sanitizer build of mpdist).
expect_larger_than_memory() {
  local kb=$1 what=$2 read=$3 cfg=$4 rc=0
  shift 4
  if sanitizer_build; then
    echo "skip: $what under ulimit -v: a sanitizer build cannot start under an address limit"
    return 0
  fi
  if (ulimit -v "$kb" && /usr/bin/python3 -c "$read") 2>/dev/null; then
    echo "FAIL: reading $what whole fits under ulimit -v $kb"
    failures=$((failures + 1))
  else
    echo "ok: reading $what whole fails under ulimit -v $kb"
  fi
  (ulimit -v "$kb" && OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 timeout 300 "$MPDIST" "$cfg" \
    --set train.max_steps=3 --set "checkpoint.dir=\"$TMP/ck-big\"" \
    --set "log.metrics=\"$TMP/big.jsonl\"" "$@") >"$TMP/big.out" 2>&1 || rc=$?
  if [ $rc = 0 ] && grep -q '^done: 3 steps' "$TMP/big.out"; then
    echo "ok: 3 steps on $what under ulimit -v $kb"
  else
    echo "FAIL: $what under ulimit -v $kb: exit $rc"
    tail -5 "$TMP/big.out"
    failures=$((failures + 1))
  fi
}

# comparable IN OUT: the metrics file IN without its timings and memory figures and without its
# checkpoint records (file names and save times: what may differ between runs that must otherwise
# match bit for bit), into OUT.
comparable() {
  local timings='images_per_s|step_ms|device_ms|comm_ms|comm_hidden|comm_last_ms|comm_skew_ms'
  local memory='wall_s|peak_mem_bytes|device_peak_bytes|host_peak_bytes|data'
  grep -v '"type":"checkpoint"' "$1" |
    sed -E 's/"(time_s|loader)":\{[^}]*\},?//g; s/"('"$timings|$memory"')":[^,}]*,?//g' >"$2"
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
  fi
  echo "all checks passed"
}

# tiny_gpt: a corpus for a tiny gpt, $TMP/corpus.txt (400 lines of one sentence and a number),
# and CFG and MODEL, the gpt config and the --set options of a 1-block model of width 32 on
# 32-byte windows without dropout (sample.sh, any_level.sh).
tiny_gpt() {
  local i
  for i in $(seq 1 400); do
    echo "the quick brown fox jumps over the lazy dog $i times."
  done >"$TMP/corpus.txt"
  CFG=$SRC/configs/fortunes-gpt.cfg
  MODEL=(--set model.dim=32 --set model.depth=1 --set model.heads=2 --set data.context=32
         --set model.dropout=0)
}
