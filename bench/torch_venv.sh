#!/usr/bin/env bash
# The PyTorch a user installs today, for the bench scripts' side-by-side runs: the current
# release of `torch` from the Python package registry (with numpy, and torchvision and Pillow
# for the loader benchmark's DataLoader), in a virtual environment
# outside the repository. Debian's python3-torch (1.13) stays the other peer; the benches report
# both and compare against the faster.
#
# Usage: bench/torch_venv.sh [--install]
#   (no option)  print the venv's python when it imports torch, else exit 1 with one line saying
#                how to install it
#   --install    create the venv and `pip install torch numpy torchvision pillow` into it when
#                it does not import them yet (about 4 GB with the CUDA libraries the wheel depends on; a few
#                minutes), then print its python. Never run by the test suite.
#   MPDIST_TORCH_VENV   where the venv lives (default ${XDG_CACHE_HOME:-$HOME/.cache}/mpdist/torch-venv)
#   MPDIST_TORCH_SPEC   what pip installs (default "torch"; e.g. "torch==2.15.0")
# Exit: 0 ready, 1 not installed (without --install) or the install failed, 2 usage.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
venv=${MPDIST_TORCH_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/mpdist/torch-venv}
spec=${MPDIST_TORCH_SPEC:-torch}
install=0
case "${1:-}" in
  "") ;;
  --install) install=1 ;;
  *) echo "torch_venv: unknown option '$1' (--install, --help)" >&2; exit 2 ;;
esac
[ $# -le 1 ] || { echo "torch_venv: one option at most" >&2; exit 2; }
repo=$(cd "$(dirname "$0")/.." && pwd -P)
case "$(realpath -m -- "$venv")/" in # (-m: what is not made yet resolves too; nothing is made)
  "$repo"/*) echo "torch_venv: $venv is inside the repository; set MPDIST_TORCH_VENV elsewhere" >&2; exit 2 ;;
esac
ready() {
  [ -x "$venv/bin/python" ] && "$venv/bin/python" -c 'import torch, numpy, torchvision, PIL' 2>/dev/null
}
if ready; then echo "$venv/bin/python"; exit 0; fi
if [ "$install" = 0 ]; then
  echo "torch_venv: no PyTorch (with torchvision) in $venv; install it with:" \
    "bash bench/torch_venv.sh --install" >&2
  exit 1
fi
base=/usr/bin/python3
"$base" -c 'import venv, ensurepip' 2>/dev/null || base=python3
"$base" -c 'import venv, ensurepip' 2>/dev/null ||
  { echo "torch_venv: no python3 with venv and ensurepip (Debian: apt-get install python3-venv)" >&2; exit 1; }
echo "torch_venv: installing $spec, numpy, torchvision and pillow into $venv (a few minutes)" >&2
[ -x "$venv/bin/pip" ] || "$base" -m venv "$venv" >&2 ||
  { echo "torch_venv: python3 -m venv $venv failed" >&2; exit 1; }
"$venv/bin/pip" install -q --disable-pip-version-check "$spec" numpy torchvision pillow >&2 ||
  { echo "torch_venv: pip install $spec numpy torchvision pillow failed" >&2; exit 1; }
ready || { echo "torch_venv: $venv/bin/python still cannot import torch" >&2; exit 1; }
echo "torch_venv: $("$venv/bin/python" -c 'import torch; print(torch.__version__)') ready" >&2
echo "$venv/bin/python"
