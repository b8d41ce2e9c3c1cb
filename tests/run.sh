#!/usr/bin/env bash
# The whole test suite from a fresh Debian 12 machine: installs what is missing, builds
# (normal and AddressSanitizer + UndefinedBehaviorSanitizer, warnings as errors), and runs ctest
# on both; and builds Release and Debug the user's way, and Release with clang where it is
# installed (tests/user_builds.sh: plain cmake, warnings printed, not errors), which must build.
# Long runs are labelled `slow` and left to bench/; MPDIST_TEST_SLOW=1 includes them.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
bash launch/deps.sh python3-h5py python3-torch slurm-wlm munge gnuplot-nox gdb  # h5py: the tests read a checkpoint as docs/checkpoints.md shows, torch: a gpt checkpoint loads into PyTorch; a one-node Slurm; plots; gdb: the stack of a rank that crashed under Slurm
source launch/env.sh
exclude=slow
[ "${MPDIST_TEST_SLOW:-0}" = 1 ] && exclude='^$'

echo "== build (RelWithDebInfo)"
bash launch/build.sh build
echo "== ctest (build)"
(cd build && ctest --output-on-failure --timeout 900 -j2 -LE "$exclude")

echo "== build (Release and Debug, the user's way)"
bash tests/user_builds.sh build

echo "== build (sanitizers)"
bash launch/build.sh build-asan -DMPDIST_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
echo "== ctest (build-asan)"
(cd build-asan && ctest --output-on-failure --timeout 900 -j2 -LE "$exclude|nosan")
