#!/usr/bin/env bash
# bench_jpeg (bench/jpeg_decode.c, issue 50): JPEG decode with nvJPEG on the GPU beside
# libjpeg-turbo on the CPU, on a folder of JPEG files written from Fashion-MNIST (make_folder).
# Without a GPU (CI) it decodes every file on the CPU, prints that line, says in one line why
# nvJPEG did not run and exits 77; with a GPU and nvJPEG it prints the nvJPEG rate and a check of
# its pixels against the CPU's and exits 0. Bad arguments and an empty folder: exit 2, one line.
# Skipped (77) in a build without CUDA, where bench_jpeg is not built.
source "$(dirname "$0")/common.bash"
bench=$(dirname "$MPDIST")/bench_jpeg
[ -x "$bench" ] || { echo "skip: no bench_jpeg (a build without CUDA)"; exit 77; }
"$(dirname "$MPDIST")/tests/make_folder" "$FMNIST" "$TMP/fm" 300 20 0 jpeg >/dev/null ||
  { echo "FAIL: make_folder"; exit 1; }
rc=0
"$bench" "$TMP/fm" 64 1 >"$TMP/out" 2>&1 || rc=$?
cat "$TMP/out"
if grep -Eq '^cpu libjpeg-turbo, 1 thread: 320 files, [0-9]+ images/s$' "$TMP/out"; then
  echo "ok: every file decoded on the CPU"
else
  echo "FAIL: no CPU line for 320 files"; failures=$((failures + 1))
fi
if [ "$rc" = 77 ]; then
  [ "$(grep -c '^nvjpeg: not run: .' "$TMP/out")" = 1 ] && [ "$(wc -l <"$TMP/out")" = 2 ] &&
    echo "ok: no GPU or no nvJPEG: exit 77 and one line saying why" ||
    { echo "FAIL: exit 77 without one line saying why"; failures=$((failures + 1)); }
elif [ "$rc" = 0 ]; then
  grep -Eq '^nvjpeg [0-9.]+, (hardware|default)[^,]* backend, batch 64, 1 CPU thread: [0-9]+ images/s' "$TMP/out" &&
    grep -q '^check ok: ' "$TMP/out" && echo "ok: nvJPEG ran and its pixels match the CPU's" ||
    { echo "FAIL: exit 0 without the nvJPEG line and a passed check"; failures=$((failures + 1)); }
else
  echo "FAIL: exit $rc"; failures=$((failures + 1))
fi
mkdir -p "$TMP/empty"
for args in "$TMP/empty" "$TMP/fm 0" "$TMP/fm 64 x" ""; do
  rc=0
  # shellcheck disable=SC2086 # the arguments are split on purpose
  "$bench" $args >"$TMP/bad" 2>&1 || rc=$?
  if [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/bad")" = 1 ]; then
    echo "ok: '$args': exit 2, $(cat "$TMP/bad")"
  else
    echo "FAIL: '$args': exit $rc: $(cat "$TMP/bad")"; failures=$((failures + 1))
  fi
done
finish
