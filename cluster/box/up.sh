#!/usr/bin/env bash
# A cluster in a box (issue 22): N "hosts" (2-4) on this machine, each a network namespace
# mpbox-hK with its own address 10.77.0.(10+K) on a private bridge (mpbox0, 10.77.0.1 on the
# host side), its own host name hK (a UTS namespace, set by cluster/box/exec.sh), and its link
# shaped by tc when asked (cluster/box/shape.sh). Open MPI reaches the hosts with exec.sh as its
# remote shell (mpirun --mca plm_rsh_agent), so ranks on different hosts talk over TCP through
# the bridge, never shared memory. Needs root (or CAP_NET_ADMIN) and ip(8); tear it all down
# with cluster/box/down.sh. Only addresses inside 10.77.0.0/24 are used.
#
# Usage: cluster/box/up.sh N [--rate RATE] [--delay DELAY] [--loss PCT]
#   RATE: tc rate, e.g. 1gbit; DELAY: one-way delay of what each host receives, e.g. 0.2ms; PCT:
#   loss in percent (cluster/box/shape.sh; delay and loss need mpdist-delayline and iptables)
# Exit codes: 0 up; 2 usage; 77 namespaces cannot be made here, or what the shaping asked for
# needs is missing; the message says which.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
n=${1:-}
[[ "$n" =~ ^[2-4]$ ]] || { echo "cluster/box/up.sh: N must be 2, 3 or 4 (got '${n}')" >&2; exit 2; }
shift
rate='' delay='' loss=''
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=${2:?--rate needs a value}; shift 2 ;;
    --delay) delay=${2:?--delay needs a value}; shift 2 ;;
    --loss) loss=${2:?--loss needs a value}; shift 2 ;;
    *) echo "cluster/box/up.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
here=$(cd "$(dirname "$0")" && pwd)
command -v ip >/dev/null || { echo "cluster/box: ip(8) is missing (Debian: iproute2)" >&2; exit 77; }
ip netns add mpbox-probe 2>/dev/null || { echo "cluster/box: cannot make network namespaces here (not root, or the kernel refuses)" >&2; exit 77; }
ip netns del mpbox-probe
bash "$here/down.sh" >/dev/null 2>&1 || true
trap 'bash "$here/down.sh" >/dev/null 2>&1' ERR
ip link add mpbox0 type bridge
ip addr add 10.77.0.1/24 dev mpbox0
ip link set mpbox0 up
for k in $(seq "$n"); do
  ns=mpbox-h$k
  ip netns add "$ns"
  ip link add "mpbv$k" type veth peer name eth0 netns "$ns"
  ip link set "mpbv$k" master mpbox0 up
  ip -n "$ns" addr add "10.77.0.$((10 + k))/24" dev eth0
  ip -n "$ns" link set eth0 up
  ip -n "$ns" link set lo up
  ip -n "$ns" route add default via 10.77.0.1
  bash "$here/shape.sh" "$k" ${rate:+--rate "$rate"} ${delay:+--delay "$delay"} ${loss:+--loss "$loss"}
done
trap - ERR
echo "cluster/box: $n hosts up (h1..h$n at 10.77.0.11..$((10 + n)))${rate:+, rate $rate}${delay:+, delay $delay}${loss:+, loss $loss%}"
