#!/usr/bin/env bash
# Stops the Slurm that start.sh started in DIR: the slurmds, slurmctld, then munged, by the
# PIDs in their PID files, waiting for each to exit (SIGKILL after 10 s). Jobs still running are
# ended with the daemons. Quiet when nothing runs.
# Usage: cluster/local-slurm/stop.sh [DIR]      (DIR default /tmp/mpdist-slurm)
set -uo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
dir=${1:-/tmp/mpdist-slurm}
stop() { # PIDFILE
  [ -f "$1" ] || return 0
  local pid
  pid=$(cat "$1")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  fi
  rm -f "$1"
}
if [ -f "$dir/slurm.conf" ]; then
  SLURM_CONF=$dir/slurm.conf scancel --state=RUNNING -u "$(id -un)" 2>/dev/null || true
fi
for f in "$dir"/slurmd-*.pid "$dir"/slurmd.pid; do stop "$f"; done # (slurmd.pid: before --box)
stop "$dir/slurmctld.pid"
stop "$dir/munge/munged.pid"
exit 0
