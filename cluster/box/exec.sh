#!/usr/bin/env bash
# Runs a command on box host hK (cluster/box/up.sh): inside its network namespace, in a UTS
# namespace of its own whose host name is hK. Open MPI uses it as its remote shell
# (--mca plm_rsh_agent cluster/box/exec.sh): it is called as `exec.sh [ssh options] hK CMD...`.
# Usage: cluster/box/exec.sh hK COMMAND [ARG...]
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do shift; done # ssh options Open MPI may pass
host=${1:?usage: cluster/box/exec.sh hK COMMAND...}
shift
[[ "$host" =~ ^h([1-9])$ ]] || { echo "cluster/box/exec.sh: not a box host: $host" >&2; exit 2; }
ns=mpbox-h${BASH_REMATCH[1]}
[ -e "/run/netns/$ns" ] || { echo "cluster/box/exec.sh: $host is not up (cluster/box/up.sh)" >&2; exit 2; }
# nsenter, not `ip netns exec`: that one also mounts a sysfs of the namespace's own over /sys,
# which hides /sys/fs/cgroup from slurmd (cluster/local-slurm --box).
exec nsenter --net="/run/netns/$ns" unshare --uts sh -c 'hostname "$0" && exec sh -c "$*"' "$host" "$@"
