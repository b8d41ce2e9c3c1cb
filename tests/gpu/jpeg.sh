#!/usr/bin/env bash
# The nvJPEG stage of tests/gpu/run.sh (issue 50: "On a GPU machine: nvJPEG decode images/s
# beside the CPU's"): bench_jpeg (bench/jpeg_decode.c) on two JPEG folders written from
# Fashion-MNIST by make_folder, the ones bench/loader.sh times on the CPU: fm (10,000 images of
# 28 x 28 gray) and fm224 (2,000 upscaled to 224 x 224 RGB). Each prints libjpeg-turbo's
# images/s on one CPU thread, nvJPEG's (hardware decoder where the GPU has one, batches of 128)
# and a check of nvJPEG's pixels against the CPU's. nvJPEG is found where the image keeps it
# (libnvjpeg.so.13, then .so.12, in the CUDA toolkits' lib64, newest first, a pip wheel's
# nvidia/*/lib, the system's) unless MPDIST_NVJPEG_LIB names it; none found is a SKIP line. One line
# per check or row in OUT/jpeg.txt.
# Usage: tests/gpu/jpeg.sh BUILD DATA OUT    (BUILD has bench_jpeg and tests/make_folder; DATA
# Fashion-MNIST's directory). Exits 1 when a check failed.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^set -e/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 0 ;; esac
build=${1:?build directory} data=${2:?Fashion-MNIST directory} out=${3:?output directory}
cd "$(dirname "$0")/../.."
mkdir -p "$out"
report=$out/jpeg.txt
source tests/gpu/checks.bash
# libdirs: the toolkits' lib64 (newest first), the pip wheels' nvidia/*/lib, the system's
libdirs() {
  ls -d /usr/local/cuda*/lib64 2>/dev/null | sort -rV || true
  python3 -c 'import nvidia, os; print("\n".join(os.path.join(p, d, "lib") for p in nvidia.__path__ for d in os.listdir(p)))' 2>/dev/null || true
  echo /usr/lib/x86_64-linux-gnu
}
if [ -z "${MPDIST_NVJPEG_LIB:-}" ]; then
  for v in 13 12; do # the toolkit's own major first (bench_jpeg links CUDA 13's runtime)
    lib=$(libdirs | while read -r d; do [ -e "$d/libnvjpeg.so.$v" ] && echo "$d/libnvjpeg.so.$v"; done | head -1 || true)
    [ -z "$lib" ] || { export MPDIST_NVJPEG_LIB=$lib; break; }
  done
fi
say "nvJPEG library: ${MPDIST_NVJPEG_LIB:-none found (libnvjpeg.so.13 from the search path)}"
for spec in "fm 0 10000" "fm224 224 2000"; do
  read -r name side count <<<"$spec"
  if [ ! -d "$out/$name" ] && ! "$build/tests/make_folder" "$data" "$out/$name" "$count" 100 "$side" jpeg >/dev/null; then
    check "$name: make_folder wrote the folder" false
    continue
  fi
  rc=0
  "$build/bench_jpeg" "$out/$name" 128 3 >"$out/$name.txt" 2>&1 || rc=$?
  while read -r l; do say "     $name: $l"; done <"$out/$name.txt"
  if [ "$rc" = 77 ]; then
    say "SKIP $name: nvJPEG did not run ($(grep '^nvjpeg: not run' "$out/$name.txt" || echo exit 77))"
  else
    check "$name: bench_jpeg ran nvJPEG and its pixels match the CPU's (exit $rc)" \
      grep -q '^check ok: ' "$out/$name.txt"
  fi
  rm -rf "${out:?}/$name"
done
say "$failures check(s) failed"
[ "$failures" = 0 ]
