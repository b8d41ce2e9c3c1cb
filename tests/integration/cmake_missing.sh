#!/usr/bin/env bash
# Configuring without a required library stops with a message naming the Debian package to
# install (here pkg-config finds nothing, so libconfig is the first library missing).
source "$(dirname "$0")/common.bash"
rc=0
PKG_CONFIG_LIBDIR=/nonexistent cmake -S "$SRC" -B "$TMP/b" -DMPDIST_CUDA=OFF >"$TMP/out" 2>&1 || rc=$?
if [ $rc = 0 ] || ! grep -q "libconfig not found: install the Debian package 'libconfig-dev'" "$TMP/out"; then
  echo "FAIL: configure exited $rc"; cat "$TMP/out"; exit 1
fi
echo "ok: $(grep -o "libconfig not found.*" "$TMP/out" | head -1)"
