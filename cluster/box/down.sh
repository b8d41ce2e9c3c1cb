#!/usr/bin/env bash
# Tears the box down: kills what still runs in its hosts, deletes their namespaces, veths and
# the bridge. Safe to run any time, also when nothing is up.
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
for ns in $(ip netns list 2>/dev/null | awk '/^mpbox-h[0-9]/ {print $1}'); do
  pids=$(ip netns pids "$ns" 2>/dev/null)
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
  ip netns del "$ns" 2>/dev/null
done
for l in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^mpbv[0-9]/ {sub(/@.*/, "", $2); print $2}'); do
  ip link del "$l" 2>/dev/null
done
ip link del mpbox0 2>/dev/null
exit 0
