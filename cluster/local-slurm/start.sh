#!/usr/bin/env bash
# Starts a Slurm cluster on this machine from Debian's slurm-wlm and munge: munged (as user
# munge, with its own socket), slurmctld, then the nodes' slurmd. One node, "localhost", by
# default; with --box N, the N hosts h1..hN of the cluster box (cluster/box/up.sh N, started
# first), each running its own slurmd in its namespace (cluster/box/exec.sh), with slurmctld on
# the box's bridge (10.77.0.1) and 4 GPUs per node in its GRES (stand-in device files, no GPU), so
# the multi-node template's --gpus-per-node=4 is granted. Each node advertises CPUS CPUs
# (default 8) whatever the machine has. Everything lives in DIR (config, state, logs, PID
# files). Needs root. Prints the line to source for the clients (export SLURM_CONF=DIR/slurm.conf)
# and writes it to DIR/env.sh. Stop with stop.sh DIR.
# Usage: cluster/local-slurm/start.sh [DIR] [CPUS] [--box N]      (DIR default /tmp/mpdist-slurm)
# Exit codes: 0 ready; 2 usage; 1 anything else (the message says what; whatever it started is
# stopped again).
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
here=$(cd "$(dirname "$0")" && pwd)
box=0 args=()
while [ $# -gt 0 ]; do
  case $1 in
    --box) box=${2:-}; shift 2 || { echo "local-slurm: --box needs a host count" >&2; exit 2; } ;;
    *) args+=("$1"); shift ;;
  esac
done
dir=${args[0]:-/tmp/mpdist-slurm} cpus=${args[1]:-8}
[[ $box =~ ^(0|[2-4])$ ]] || { echo "local-slurm: --box N: N must be 2, 3 or 4 (got '$box')" >&2; exit 2; }
die() { echo "local-slurm: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (slurmd runs jobs as their users)"
for p in munged slurmctld slurmd sbatch; do
  command -v "$p" >/dev/null || die "$p not found: install slurm-wlm and munge (launch/deps.sh slurm-wlm munge)"
done
for f in "$dir"/slurmctld.pid "$dir"/slurmd*.pid; do
  if [ -f "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null; then
    die "already running in $dir (stop it with cluster/local-slurm/stop.sh $dir)"
  fi
done
trap 'bash "$here/stop.sh" "$dir" >&2' EXIT # until the nodes are ready
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
rm -rf "$dir/ctld" "$dir"/slurmd-* "$dir/munge" "$dir"/gpu[0-3] "$dir/gres.conf" "$dir"/h[1-4]
mkdir -p "$dir/ctld" "$dir/munge"
# A port pair of our own, so a system Slurm (6817/6818) is left alone.
port=$((17000 + ($$ % 400) * 2))
mem=$(awk '/MemTotal/ { print int($2 / 1024 * 0.8) }' /proc/meminfo)
if [ "$box" = 0 ]; then
  ctl=localhost nodes=(localhost)
  conf_nodes="NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN"
  conf_nodes+="\nPartitionName=local Nodes=localhost Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
else
  box_dir=$(cd "$here/../box" && pwd)
  [ -e "/run/netns/mpbox-h$box" ] || die "the box has no host h$box: start it first (cluster/box/up.sh $box)"
  ctl='localhost(10.77.0.1)' nodes=() conf_nodes="GresTypes=gpu"
  for k in $(seq "$box"); do
    nodes+=("h$k")
    conf_nodes+="\nNodeName=h$k NodeAddr=10.77.0.$((10 + k)) CPUs=$cpus RealMemory=$((mem / box)) Gres=gpu:4 State=UNKNOWN"
  done
  conf_nodes+="\nPartitionName=box Nodes=$(seq -s, -f "h%g" "$box") Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
  # Slurm counts a GPU per device file; four stand-ins (character devices like /dev/null) per node.
  for i in 0 1 2 3; do mknod "$dir/gpu$i" c 1 3; done
  echo "Name=gpu File=$dir/gpu[0-3]" >"$dir/gres.conf"
fi
sed -e "s|@DIR@|$dir|g" -e "s|@PORT@|$port|g" -e "s|@PORT1@|$((port + 1))|g" -e "s|@CTL@|$ctl|g" \
    -e "s|@NODES@|$conf_nodes|" "$here/slurm.conf.in" >"$dir/slurm.conf"

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
for node in "${nodes[@]}"; do
  mkdir -p "$dir/slurmd-$node"
  if [ "$box" = 0 ]; then
    slurmd -f "$SLURM_CONF" -N "$node"
  else
    # The nodes share this machine's /tmp, where Slurm's PMIx plugin makes a directory per job
    # step with the same name on every node: each slurmd reads the configuration from a
    # directory of its own whose mpi.conf puts that directory elsewhere.
    mkdir -p "$dir/$node/pmix"
    ln -sf ../slurm.conf ../gres.conf "$dir/$node/"
    echo "PMIxCliTmpDirBase=$dir/$node/pmix" >"$dir/$node/mpi.conf"
    bash "$box_dir/exec.sh" "$node" slurmd -f "$dir/$node/slurm.conf" -N "$node"
  fi || die "slurmd of node $node did not start (see $dir/slurmd-$node.log)"
done
echo "export SLURM_CONF=$SLURM_CONF" >"$dir/env.sh"

# Ready when every node is idle (a few seconds at most).
for _ in $(seq 1 100); do
  state=$(sinfo -h -N -o %T 2>/dev/null | sort -u | tr '\n' ' ' || true)
  [ "$(sinfo -h -N -o %T 2>/dev/null | grep -cvx idle)" = 0 ] && [ -n "$state" ] &&
    { trap - EXIT; echo "export SLURM_CONF=$SLURM_CONF"; exit 0; }
  sleep 0.2
done
echo "local-slurm: nodes not idle after 20 s (states: ${state:-none}); logs in $dir" >&2
exit 1
