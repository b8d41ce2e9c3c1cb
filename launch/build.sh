#!/usr/bin/env bash
# Configures and builds mpdist into build/ (or the directory given as $1, with any further
# arguments passed to cmake), with warnings as errors (MPDIST_WERROR). Idempotent: a second run
# only rebuilds what changed.
# Usage: launch/build.sh [DIR [CMAKE-ARGUMENTS...]]      (DIR default build)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
dir=${1:-build}
shift || true
case $dir in -*) echo "build.sh: unknown option '${dir:0:100}' (the first argument is the build directory)" >&2; exit 2 ;; esac
err=$(mkdir -p -- "$dir" 2>&1) || { echo "build.sh: cannot make the build directory $dir: ${err#mkdir: }" >&2; exit 2; }
[ -w "$dir" ] || { echo "build.sh: the build directory $dir is not writable" >&2; exit 2; }
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMPDIST_WERROR=ON "$@" >"$dir.cmake.log" 2>&1 ||
  { cat "$dir.cmake.log" >&2; exit 1; }
cmake --build "$dir" -j"$(nproc)"
