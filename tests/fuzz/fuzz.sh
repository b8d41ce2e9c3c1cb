#!/usr/bin/env bash
# Coverage-guided fuzzing of the tests/fuzz targets with libFuzzer (clang, ASan, UBSan).
#   tests/fuzz/fuzz.sh [--seconds N] [--build DIR] [--jobs J] [--parallel] [TARGET...]
# Builds the targets with -DMPDIST_FUZZ=ON in DIR (default build-fuzz), then fuzzes each
# target (default: all, e.g. config idx cifar checkpoint; --parallel: all at once, else one
# after the other; --jobs: libFuzzer processes per target) for N seconds (default 600) starting
# from a copy of its corpus in tests/fuzz/corpus/<name>; inputs the fuzzer finds go to
# DIR/fuzz-work/<name>/corpus, crashes to DIR/fuzz-work/<name>/crash-* (an earlier run's are
# moved to earlier/). Prints one line per target (seconds, executions, corpus before and after,
# crashes); exits 1 when a target crashed, leaked or hung, 77 when clang or libFuzzer is missing.
# A crash is reproduced with DIR/tests/fuzz/fuzz_<name> FILE or with the replay build:
#   build/tests/fuzz/fuzz_<name>_replay FILE; add the input to corpus/<name>/ once fixed.
set -euo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
cd "$(dirname "$0")/../.."
seconds=600 build=build-fuzz jobs=1 parallel=0
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --parallel) parallel=1; shift ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
if ! command -v clang >/dev/null ||
   ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "fuzz.sh: needs clang and libFuzzer: apt-get install clang libclang-rt-dev" >&2
  exit 77
fi
mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do n=${f##*/fuzz_}; targets+=("${n%.c}"); done
fi
CC=clang cmake -S . -B "$build" -DMPDIST_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  >"$build.cmake.log" 2>&1 || { cat "$build.cmake.log" >&2; exit 1; }
cmake --build "$build" -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >"$build.build.log" 2>&1 ||
  { tail -40 "$build.build.log" >&2; exit 1; }

supp=$PWD/tests/lsan.supp
# fuzz_one T: fuzzes target T; writes its table row to $build/fuzz-work/T/result, and the word
# "failed" to $build/fuzz-work/T/failed when it crashed, leaked or hung.
fuzz_one() {
  local t=$1 work=$build/fuzz-work/$1 rc=0
  mkdir -p "$work/corpus" "$work/earlier"
  rm -f "$work/failed"
  # An earlier run's findings are kept in earlier/, not counted as this run's.
  find "$work" -maxdepth 1 -type f -regex '.*/\(crash\|leak\|timeout\|oom\)-.*' \
    -exec mv -f {} "$work/earlier/" \;
  cp -n tests/fuzz/corpus/"$t"/* "$work/corpus/" 2>/dev/null || true
  local before
  before=$(ls "$work/corpus" | wc -l)
  # allocator_may_return_null: HDF5 sizes some metadata buffers from the file, and a damaged
  # size asks malloc for terabytes; glibc returns NULL and HDF5 fails the open, as it should,
  # where ASan would abort instead (tests/fuzz/corpus/h5data/huge_metadata_size).
  (cd "$work" && ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
     LSAN_OPTIONS=suppressions=$supp:print_suppressions=0 \
     "$build/tests/fuzz/fuzz_$t" corpus \
     -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
     $([ "$jobs" -gt 1 ] && echo "-jobs=$jobs -workers=$jobs") >log.txt 2>&1) || rc=$?
  local after execs crashes
  after=$(ls "$work/corpus" | wc -l)
  execs=$({ grep -ho 'stat::number_of_executed_units: *[0-9]*' "$work"/log.txt "$work"/fuzz-*.log \
            2>/dev/null || true; } | awk '{s += $2} END {print s + 0}') # no fuzz-*.log with one job
  crashes=$(ls "$work" | grep -c -E '^(crash|leak|timeout|oom)-' || true)
  printf '%-12s %8s %12s %8s %8s %8s\n' "$t" "$seconds" "$execs" "$before" "$after" "$crashes" \
    >"$work/result"
  if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
    echo failed >"$work/failed"
  fi
}

if [ "$parallel" = 1 ]; then
  for t in "${targets[@]}"; do fuzz_one "$t" & done
  wait
else
  for t in "${targets[@]}"; do fuzz_one "$t"; done
fi
status=0
printf '%-12s %8s %12s %8s %8s %8s\n' target seconds execs before after crashes
for t in "${targets[@]}"; do
  cat "$build/fuzz-work/$t/result"
  if [ -e "$build/fuzz-work/$t/failed" ]; then
    status=1
    echo "fuzz.sh: $t failed; see $build/fuzz-work/$t/log.txt" >&2
    grep -h -m3 -E 'ERROR|SUMMARY' "$build/fuzz-work/$t"/log.txt "$build/fuzz-work/$t"/fuzz-*.log >&2 || true
  fi
done
exit $status
