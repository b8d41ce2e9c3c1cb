#!/usr/bin/env bash
# From a fresh Debian 12 machine to a trained model: installs what is missing, builds, and
# trains the Fashion-MNIST MLP on 2 MPI ranks, ending with the test accuracy.
# Extra arguments go to mpdist, e.g. launch/quickstart.sh --set train.epochs=2
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
cd "$(dirname "$0")/.."
bash launch/deps.sh
bash launch/build.sh build
source launch/env.sh
echo "== mpirun -np 2 build/mpdist configs/fashion-mnist-mlp.cfg $*"
mpirun -np 2 build/mpdist configs/fashion-mnist-mlp.cfg "$@"
