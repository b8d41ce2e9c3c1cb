#!/usr/bin/env bash
# Installs the Debian 12 packages mpdist needs to build, test and train, only those missing.
# Idempotent; uses sudo only when not root and something is missing.
set -euo pipefail

packages=(gcc make cmake pkg-config libopenmpi-dev openmpi-bin libhdf5-dev hdf5-tools
          libcmocka-dev libconfig-dev zlib1g-dev libopenblas-dev libcjson-dev
          dataset-fashion-mnist "$@")

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "mpdist: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "mpdist: installing ${missing[*]}"
"${sudo[@]}" apt-get update -q
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
