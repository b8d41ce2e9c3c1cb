#!/usr/bin/env bash
# Installs the Debian 12 packages mpdist needs to build, test and train, only those missing.
# Idempotent; uses sudo only when not root and something is missing.
# Usage: launch/deps.sh [--check] [EXTRA-PACKAGE...]
#   --check   install nothing: when a package is missing, print the one command that installs
#             what is missing and exit 2 (what the bench scripts do; only tests/run.sh and
#             launch/quickstart.sh install)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
check=0
[ "${1:-}" != --check ] || { check=1; shift; }

packages=(gcc make cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libcmocka-dev libconfig-dev zlib1g-dev libjpeg62-turbo-dev libpng-dev libopenblas-dev
          libopenblas0-openmp libcjson-dev
          libdnnl-dev ocl-icd-opencl-dev iproute2 procps iptables libnetfilter-queue-dev
          dataset-fashion-mnist fortunes "$@")

if [ "$check" = 1 ] && ! command -v dpkg-query >/dev/null; then
  echo "mpdist: not a Debian system (no dpkg-query): packages not checked" >&2
  exit 0
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
if [ "$check" = 1 ]; then
  echo "mpdist: missing Debian packages: ${missing[*]}; install them with:" >&2
  echo "  ${sudo[*]}${sudo:+ }apt-get install -y --no-install-recommends ${missing[*]}" >&2
  exit 2
fi
[ ${#sudo[@]} -eq 0 ] || command -v sudo >/dev/null ||
  { echo "mpdist: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
echo "mpdist: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
