#!/usr/bin/env bash
# Runs a command on box host hK (cluster/box/up.sh): inside its network namespace, in a UTS
# namespace of its own whose host name is hK. Open MPI uses it as its remote shell
# (--mca plm_rsh_agent cluster/box/exec.sh): it is called as `exec.sh [ssh options] hK CMD...`.
# With MPDIST_BOX_PIN=1 in the environment (mpirun passes its own to its remote shell), host K
# of the N hosts up runs on its own share of the cores this script may use, in blocks: with C
# cores, cores floor((K-1)C/N) to floor(KC/N)-1, or core floor((K-1)C/N) alone where N > C
# (hosts 1-2 on the first core and 3-4 on the second for 4 hosts on 2 cores). As on real hosts,
# a host's ranks then always share the same cores: left to the scheduler, the box's ranks move
# between cores during a run, and which ranks share a core changes a 4-host all-reduce's time
# by 20-50% (bench/results/box-scaling/placement-experiment.txt).
# Usage: cluster/box/exec.sh hK COMMAND [ARG...]
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done # ssh options Open MPI may pass
host=${1:?usage: cluster/box/exec.sh hK COMMAND...}
shift
[[ "$host" =~ ^h([1-9])$ ]] || { echo "cluster/box/exec.sh: not a box host: $host" >&2; exit 2; }
ns=mpbox-h${BASH_REMATCH[1]}
[ -e "/run/netns/$ns" ] || { echo "cluster/box/exec.sh: $host is not up (cluster/box/up.sh)" >&2; exit 2; }
pin=()
if [ "${MPDIST_BOX_PIN:-0}" = 1 ]; then
  k=${BASH_REMATCH[1]}
  n=$(find /run/netns -maxdepth 1 -name 'mpbox-h[0-9]' | wc -l)
  cores=()
  IFS=, read -ra ranges <<<"$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)"
  for r in "${ranges[@]}"; do
    for c in $(seq "${r%-*}" "${r#*-}"); do cores+=("$c"); done
  done
  nc=${#cores[@]}
  [ "$k" -le "$n" ] || { echo "cluster/box/exec.sh: MPDIST_BOX_PIN: $host is not among hosts h1..h$n" >&2; exit 2; }
  lo=$(((k - 1) * nc / n)) hi=$((k * nc / n - 1))
  [ "$hi" -ge "$lo" ] || hi=$lo
  mine=$(IFS=,; echo "${cores[*]:lo:hi-lo+1}")
  pin=(taskset -c "$mine")
fi
# nsenter, not `ip netns exec`: that one also mounts a sysfs of the namespace's own over /sys,
# which hides /sys/fs/cgroup from slurmd (cluster/local-slurm --box).
exec ${pin[@]+"${pin[@]}"} nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
