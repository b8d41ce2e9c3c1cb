#!/usr/bin/env bash
# Shapes box host K's link (both directions: its eth0 and the bridge port mpbvK): a rate alone
# with tc's token bucket (tbf); a one-way delay or a loss with netem (sch_netem, which some
# kernels lack: then this says so and exits 77); no option clears the shaping. --down and --up
# cut and restore the link (its eth0). Used by cluster/box/up.sh, and to change a link while a
# job runs.
# Usage: cluster/box/shape.sh K [--rate RATE] [--delay DELAY] [--loss PCT] | K --down | K --up
#   RATE: e.g. 1gbit; DELAY: e.g. 0.2ms; PCT: loss in percent
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
k=${1:?usage: cluster/box/shape.sh K [--rate R] [--delay D] [--loss P] | K --down | K --up}
shift
case "${1:-}" in
  --down) ip -n "mpbox-h$k" link set eth0 down; exit 0 ;;
  --up) ip -n "mpbox-h$k" link set eth0 up; exit 0 ;;
esac
rate='' netem=()
while [ $# -gt 0 ]; do
  case $1 in
    --rate) rate=$2; shift 2 ;;
    --delay) netem+=(delay "$2"); shift 2 ;;
    --loss) netem+=(loss "$2%"); shift 2 ;;
    *) echo "cluster/box/shape.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# add DEV-ARGS...: the qdisc on both ends of the link
add() {
  ip netns exec "mpbox-h$k" tc qdisc add dev eth0 root "$@" && tc qdisc add dev "mpbv$k" root "$@"
}
ip -n "mpbox-h$k" link show eth0 >/dev/null 2>&1 || { echo "cluster/box/shape.sh: host h$k is not up" >&2; exit 2; }
ip netns exec "mpbox-h$k" tc qdisc del dev eth0 root 2>/dev/null || true
tc qdisc del dev "mpbv$k" root 2>/dev/null || true
if [ ${#netem[@]} -gt 0 ]; then
  add netem "${netem[@]}" ${rate:+rate "$rate"} 2>/dev/null ||
    { echo "cluster/box/shape.sh: this kernel has no netem (sch_netem): --delay and --loss cannot be shaped here" >&2; exit 77; }
elif [ -n "$rate" ]; then
  # A bucket of 0.25 ms at the rate (16 KB at least): a full bucket lets that many bytes through
  # at once, and it fills while the ranks compute, so a larger one would let whole all-reduces
  # of a small model cross unshaped, faster than the link.
  [[ $rate =~ ^([0-9]+)([kmg]?)bit$ ]] ||
    { echo "cluster/box/shape.sh: --rate: give bits per second as N[k|m|g]bit (got '$rate')" >&2; exit 2; }
  case ${BASH_REMATCH[2]} in k) unit=1000 ;; m) unit=1000000 ;; g) unit=1000000000 ;; *) unit=1 ;; esac
  burst=$((BASH_REMATCH[1] * unit / 8 / 4000)) # bytes in 0.25 ms
  [ "$burst" -ge 16384 ] || burst=16384
  add tbf rate "$rate" burst "$burst" latency 50ms
fi
