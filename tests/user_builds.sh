#!/usr/bin/env bash
# Builds mpdist the way a user does, as the README shows it: `cmake -B DIR
# -DCMAKE_BUILD_TYPE=TYPE && cmake --build DIR`, with no other option (so MPDIST_WERROR stays
# off: a newer compiler's new warning must not break a user's build), for Release (gcc's -O3
# warns where -O2 does not) and Debug, each from an empty directory. Fails when a build fails;
# prints each build's warnings and their count, which are not errors here (launch/build.sh,
# which the rest of the suite uses, makes them errors). Then the Release build once more with
# CC=clang where clang is installed (a user's other compiler; skipped with a message where it is
# not). Part of tests/run.sh.
# Usage: tests/user_builds.sh [PREFIX]     builds PREFIX-release, PREFIX-debug and
#                                          PREFIX-release-clang (default build)
#   MPDIST_JOBS   parallel compile jobs (default: the number of cores)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
prefix=${1:-build}
jobs=${MPDIST_JOBS:-$(nproc)}
builds=(Release Debug)
if command -v clang >/dev/null; then builds+=(Release-clang); else echo "user_builds: no clang here: the clang build is skipped"; fi
for build in "${builds[@]}"; do
  type=${build%-clang} cc=()
  [ "$build" = "$type" ] || cc=(env CC=clang)
  dir=$prefix-${build,,}
  log=$dir.cmake.log
  rm -rf "$dir"
  start=$SECONDS
  if ! { "${cc[@]}" cmake -B "$dir" -DCMAKE_BUILD_TYPE="$type" && cmake --build "$dir" -j"$jobs"; } >"$log" 2>&1; then
    grep -E -B2 -A6 'error|Error' "$log" | tail -60 >&2
    echo "user_builds: FAIL: the plain $build build failed (${cc[*]} cmake -B $dir -DCMAKE_BUILD_TYPE=$type; log $log)" >&2
    exit 1
  fi
  warnings=$(grep -ci 'warning' "$log" || true)
  [ "$warnings" = 0 ] || grep -i -A4 'warning' "$log"
  echo "user_builds: $build built in $((SECONDS - start)) s ($jobs jobs), $warnings warning line(s); log $log"
done
