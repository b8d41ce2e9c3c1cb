#!/usr/bin/env bash
# Starts a one-node Slurm cluster on localhost from Debian's slurm-wlm and munge: munged (as
# user munge, with its own socket), slurmctld, then slurmd for node "localhost", which
# advertises CPUS CPUs (default 8) whatever the machine has. Everything lives in DIR (config,
# state, logs, PID files). Needs root. Prints the line to source for the clients
# (export SLURM_CONF=DIR/slurm.conf) and writes it to DIR/env.sh. Stop with stop.sh DIR.
# Usage: cluster/local-slurm/start.sh [DIR] [CPUS]      (DIR default /tmp/mpdist-slurm)
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
dir=${1:-/tmp/mpdist-slurm} cpus=${2:-8}
die() { echo "local-slurm: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users)"
for p in munged slurmctld slurmd sbatch; do
  command -v "$p" >/dev/null || die "$p not found: install slurm-wlm and munge (launch/deps.sh slurm-wlm munge)"
done
if [ -f "$dir/slurmctld.pid" ] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
  die "already running in $dir (stop it with cluster/local-slurm/stop.sh $dir)"
fi
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -rf "$dir/ctld" "$dir/slurmd" "$dir/munge"
mkdir -p "$dir/ctld" "$dir/slurmd" "$dir/munge"
# A port pair of our own, so a system Slurm (6817/6818) is left alone.
port=$((17000 + ($$ % 400) * 2))
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@PORT1@|$((port + 1))|g" \
    -e "s|@CPUS@|$cpus|g" -e "s|@MEM@|$mem|g" "$here/slurm.conf.in" >"$dir/slurm.conf"

# munge: a key of our own, readable by the munge user only.
dd if=/dev/urandom of="$dir/munge/munge.key" bs=1 count=1024 status=none
chown -R munge:munge "$dir/munge"
chmod 755 "$dir/munge" # clients need to reach the socket; the key stays 0400
chmod 400 "$dir/munge/munge.key"
runuser -u munge -- munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" \
  --seed-file="$dir/munge/munged.seed" || die "munged did not start (see $dir/munge/munged.log)"

export SLURM_CONF=$dir/slurm.conf
slurmctld -f "$SLURM_CONF" || die "slurmctld did not start (see $dir/slurmctld.log)"
slurmd -f "$SLURM_CONF" -N localhost || die "slurmd did not start (see $dir/slurmd.log)"
echo "export SLURM_CONF=$SLURM_CONF" >"$dir/env.sh"

# Ready when the node is idle (a few seconds at most).
for _ in $(seq 1 100); do
  state=$(sinfo -h -N -o %T 2>/dev/null | head -1 || true)
  case $state in idle*) echo "export SLURM_CONF=$SLURM_CONF"; exit 0 ;; esac
  sleep 0.2
done
echo "local-slurm: node not idle after 20 s (state: ${state:-none}); logs in $dir" >&2
bash "$here/stop.sh" "$dir" >&2 || true
exit 1
