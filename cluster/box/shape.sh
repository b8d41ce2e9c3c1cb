#!/usr/bin/env bash
# Shapes box host K's link: a rate with tc's token bucket (tbf) on both ends of it (its eth0 and
# the bridge port mpbvK); a one-way delay and a random loss of what host K receives with
# mpdist-delayline (cluster/box/delayline.c, user space: this VM's kernel has no netem), which
# an iptables rule in host K hands what arrives on eth0 to through netfilter queue 0. On
# arrival, not on departure: a packet held before it leaves its host still counts against its
# socket's TCP small queues (about 1 ms of its pacing rate), so delays above that would throttle
# the sender to a few packets per delay; netem frees the packet from its socket, a netfilter
# queue cannot. The same delay on every host is a one-way delay D between any two. No option
# clears the shaping. --down and --up cut and restore the link (its eth0). Used by
# cluster/box/up.sh, and to change a link while a job runs.
# Usage: cluster/box/shape.sh K [--rate RATE] [--delay DELAY] [--loss PCT] | K --down | K --up
#   RATE: N[k|m|g]bit, e.g. 1gbit; DELAY: N[.N](us|ms|s), e.g. 0.2ms; PCT: loss in percent of
#   the packets as queued (a GSO packet of up to 64 KB counts once)
# mpdist-delayline is found at $MPDIST_DELAYLINE, else next to $MPDIST_BIN, else in build/; it
# adds 0.05-0.15 ms of its own wake-ups to the delay on the 2-core VM measured (docs/cluster.md).
# Exit codes: 0 done; 2 usage or host not up; 77 a delay or loss asked for where
# mpdist-delayline or iptables is missing (the message says which); 1 the delay line failed.
set -euo pipefail
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/s/^# \{0,1\}//p' "$0"; exit 0 ;; esac
k=${1:?usage: cluster/box/shape.sh K [--rate R] [--delay D] [--loss P] | K --down | K --up}
shift
case "${1:-}" in
  --down) ip -n "mpbox-h$k" link set eth0 down; exit 0 ;;
  --up) ip -n "mpbox-h$k" link set eth0 up; exit 0 ;;
esac
source "$(dirname "$0")/rate.bash"
rate='' delay_us='' loss=''
while [ $# -gt 0 ]; do
  case $1 in
    --rate)
      bps=$(rate_bps "${2:-}") ||
        { echo "cluster/box/shape.sh: --rate: give bits per second as N[k|m|g]bit (got '${2:-}')" >&2; exit 2; }
      rate=$2
      shift 2 ;;
    --delay)
      [[ ${2:-} =~ ^([0-9]+(\.[0-9]+)?)(us|ms|s)$ ]] ||
        { echo "cluster/box/shape.sh: --delay: give N[.N]us, ms or s, e.g. 0.2ms (got '${2:-}')" >&2; exit 2; }
      case ${BASH_REMATCH[3]} in us) f=1 ;; ms) f=1000 ;; s) f=1000000 ;; esac
      delay_us=$(awk -v v="${BASH_REMATCH[1]}" -v f="$f" 'BEGIN { printf "%.3f", v * f }')
      awk -v d="$delay_us" 'BEGIN { exit !(d <= 60e6) }' ||
        { echo "cluster/box/shape.sh: --delay: at most 60 s (got '$2')" >&2; exit 2; }
      shift 2 ;;
    --loss)
      [[ ${2:-} =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v v="$2" 'BEGIN { exit !(v <= 100) }' ||
        { echo "cluster/box/shape.sh: --loss: give a percentage from 0 to 100 (got '${2:-}')" >&2; exit 2; }
      loss=$2; shift 2 ;;
    *) echo "cluster/box/shape.sh: unknown option $1" >&2; exit 2 ;;
  esac
done
# add DEV-ARGS...: the qdisc on both ends of the link
add() {
  ip netns exec "mpbox-h$k" tc qdisc add dev eth0 root "$@" && tc qdisc add dev "mpbv$k" root "$@"
}
# lines: host K's delay line processes (also when its binary was rebuilt: "... (deleted)")
lines() {
  local p
  for p in $(ip netns pids "mpbox-h$k" 2>/dev/null); do
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == */mpdist-delayline* ]] && echo "$p"
  done
  return 0
}
# stop_line: removes host K's rule and ends its delay line (SIGTERM: it accepts what it holds;
# SIGKILL after 1 s), so that the queue is free for the next one
stop_line() {
  ip netns exec "mpbox-h$k" iptables -t mangle -F PREROUTING 2>/dev/null || true
  local pids
  pids=$(lines)
  [ -n "$pids" ] || return 0
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 50); do
    [ -n "$(lines)" ] || return 0
    sleep 0.02
  done
  kill -KILL $(lines) 2>/dev/null || true
  sleep 0.1
  return 0
}
ip -n "mpbox-h$k" link show eth0 >/dev/null 2>&1 || { echo "cluster/box/shape.sh: host h$k is not up" >&2; exit 2; }
ip netns exec "mpbox-h$k" tc qdisc del dev eth0 root 2>/dev/null || true
tc qdisc del dev "mpbv$k" root 2>/dev/null || true
stop_line
if [ -n "$delay_us$loss" ]; then
  line=${MPDIST_DELAYLINE:-$(dirname "${MPDIST_BIN:-$(dirname "$0")/../../build/mpdist}")/mpdist-delayline}
  [ -x "$line" ] || { echo "cluster/box/shape.sh: --delay and --loss need mpdist-delayline, built with mpdist where libnetfilter-queue-dev is installed (not at $line; set MPDIST_DELAYLINE or MPDIST_BIN)" >&2; exit 77; }
  command -v iptables >/dev/null || { echo "cluster/box/shape.sh: --delay and --loss need iptables (Debian: iptables)" >&2; exit 77; }
  err=$(mktemp)
  ip netns exec "mpbox-h$k" setsid "$line" --queue 0 --delay-us "${delay_us:-0}" --loss "${loss:-0}" \
    </dev/null >/dev/null 2>"$err" &
  bound=0
  for _ in $(seq 100); do # until it has bound queue 0 (at most 2 s; its port id is its pid)
    if ip netns exec "mpbox-h$k" awk -v pid=$! '$1 == 0 && $2 == pid { f = 1 } END { exit !f }' \
      /proc/net/netfilter/nfnetlink_queue 2>/dev/null; then
      bound=1
      break
    fi
    kill -0 $! 2>/dev/null || break
    sleep 0.02
  done
  [ "$bound" = 1 ] || { stop_line; echo "cluster/box/shape.sh: mpdist-delayline did not start on h$k: $(head -1 "$err")" >&2; rm -f "$err"; exit 1; }
  rm -f "$err"
  ip netns exec "mpbox-h$k" iptables -t mangle -A PREROUTING -i eth0 -j NFQUEUE --queue-num 0 \
    --queue-bypass || { stop_line; echo "cluster/box/shape.sh: iptables refused the NFQUEUE rule on h$k" >&2; exit 1; }
fi
if [ -n "$rate" ]; then
  # A bucket of 0.25 ms at the rate (16 KB at least): a full bucket lets that many bytes through
  # at once, and it fills while the ranks compute, so a larger one would let whole all-reduces
  # of a small model cross unshaped, faster than the link.
  burst=$((bps / 8 / 4000)) # bytes in 0.25 ms
  [ "$burst" -ge 16384 ] || burst=16384
  add tbf rate "$rate" burst "$burst" latency 50ms
fi
