# Sourced by the bench scripts right after `set -euo pipefail` (not run): --help prints the
# script's header comment and exits; the working directory becomes the repository root; and
# bench_build [PACKAGE...] sets $build, the build directory holding mpdist: MPDIST_BENCH_BUILD
# when set (nothing is built or checked), else `build`, made by launch/build.sh once the Debian
# PACKAGEs the script needs are found installed (launch/deps.sh --check: exit 2 and the command
# that installs them otherwise; benchmarks never install).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bench_build() {
  build=${MPDIST_BENCH_BUILD:-}
  [ -z "$build" ] || return 0
  build=build
  [ $# -eq 0 ] || bash launch/deps.sh --check "$@"
  bash launch/build.sh build >/dev/null
}
