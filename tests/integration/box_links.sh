#!/usr/bin/env bash
# labels: integration cluster
# serial
# The box's link delay and loss (issue 22, cluster/box/shape.sh with mpdist-delayline, for
# kernels without netem): a TCP ping-pong between h1 and h2 (200 one-byte round trips, the
# median) takes under 1 ms unshaped; with 5 ms on both hosts, 10 ms plus the delay line's own
# wake-ups (under 2 ms); with 5 ms on h2 alone, 5 ms plus them, and 20 ms after changing it to
# that (one delay line on h2: the old one ended); reshaping h2 without a delay ends its delay
# line and the round trip is fast again; with 100% loss on h2 a connection to it cannot be
# made, and clearing the loss restores it; bad values exit 2 and a missing delay line or
# iptables 77, each with one line; down.sh leaves no delay line. Skipped (77) where network
# namespaces cannot be made, or where libnetfilter-queue-dev is not installed (mpdist-delayline
# not built).
source "$(dirname "$0")/common.bash"
box=$SRC/cluster/box
trap 'bash "$box/down.sh"; rm -rf "$TMP"' EXIT
export MPDIST_DELAYLINE=$(dirname "$MPDIST")/mpdist-delayline
if [ ! -x "$MPDIST_DELAYLINE" ]; then
  pkg-config --exists libnetfilter_queue 2>/dev/null &&
    { echo "FAIL: libnetfilter_queue is installed but $MPDIST_DELAYLINE was not built"; exit 1; }
  echo "skipped: mpdist-delayline not built (libnetfilter-queue-dev missing)"
  exit 77
fi
rc=0
bash "$box/up.sh" 2 >/dev/null || rc=$?
[ "$rc" = 77 ] && { echo "skipped: network namespaces cannot be made here"; exit 77; }
[ "$rc" = 0 ] || { echo "FAIL: cluster/box/up.sh 2 exited $rc"; exit 1; }

cat >"$TMP/pingpong.py" <<'EOF'
import socket, statistics, sys, time
if sys.argv[1] == "serve":
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", 5997))
    s.listen(1)
    c, _ = s.accept()
    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    while c.recv(1):
        c.sendall(b"y")
    sys.exit(0)
deadline = time.monotonic() + 5
while True:  # refused: the server is not listening yet; a timeout: the SYN got no answer
    try:
        c = socket.create_connection(("10.77.0.12", 5997), timeout=2)
        break
    except ConnectionRefusedError:
        if time.monotonic() > deadline:
            print("refused")
            sys.exit(0)
        time.sleep(0.05)
    except socket.timeout:
        print("timeout")
        sys.exit(0)
c.settimeout(10)
c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
rtt = []
for _ in range(200):
    t = time.perf_counter()
    c.sendall(b"x")
    c.recv(1)
    rtt.append((time.perf_counter() - t) * 1e3)
print("%.3f" % statistics.median(rtt))
EOF
# rtt: the median round trip h1 -> h2 in ms, or "timeout" (no answer to connecting)
rtt() {
  ip netns exec mpbox-h2 timeout 30 python3 "$TMP/pingpong.py" serve &
  local server=$!
  ip netns exec mpbox-h1 timeout 30 python3 "$TMP/pingpong.py" ping || true
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null || true
}
# within LO HI VALUE: LO <= VALUE < HI
within() { awk -v lo="$1" -v hi="$2" -v v="$3" 'BEGIN { exit !(v ~ /^[0-9.]+$/ && v >= lo && v < hi) }'; }
lines_on() { # HOST: mpdist-delayline processes in the host's namespace
  local p
  for p in $(ip netns pids "mpbox-$1" 2>/dev/null); do
    [[ $(readlink "/proc/$p/exe" 2>/dev/null) == */mpdist-delayline* ]] && echo "$p"
  done
  return 0
}

r=$(rtt)
expect_ok "unshaped: round trip $r ms (under 1)" within 0 1 "$r"
bash "$box/shape.sh" 1 --delay 5ms
bash "$box/shape.sh" 2 --delay 5ms
r=$(rtt)
expect_ok "5 ms on both hosts: round trip $r ms (10 to 12)" within 10 12 "$r"
bash "$box/shape.sh" 1
r=$(rtt)
expect_ok "5 ms on h2 alone: round trip $r ms (5 to 7)" within 5 7 "$r"
bash "$box/shape.sh" 2 --delay 20ms
r=$(rtt)
expect_ok "h2's delay changed to 20 ms: round trip $r ms (20 to 22)" within 20 22 "$r"
expect_ok "one delay line on h2" test "$(lines_on h2 | wc -l)" = 1
bash "$box/shape.sh" 2 --rate 1gbit
r=$(rtt)
expect_ok "h2 reshaped without a delay: round trip $r ms (under 1)" within 0 1 "$r"
expect_ok "no delay line left on h1 or h2" test -z "$(lines_on h1)$(lines_on h2)"
bash "$box/shape.sh" 2 --loss 100
r=$(rtt)
expect_ok "100% loss on h2: connecting to it: $r" test "$r" = timeout
bash "$box/shape.sh" 2
r=$(rtt)
expect_ok "the loss cleared: round trip $r ms (under 1)" within 0 1 "$r"

# usage_error CODE REGEX CMD...: CMD exits CODE with one line on stderr matching REGEX
usage_error() {
  local want=$1 regex=$2 rc=0
  shift 2
  timeout 20 "$@" >/dev/null 2>"$TMP/err" || rc=$?
  if [ "$rc" = "$want" ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -Eq -- "$regex" "$TMP/err"; then
    echo "ok: exit $rc: $(cat "$TMP/err")"
  else
    echo "FAIL: $* -> exit $rc (want $want), stderr:"; sed 's/^/    /' "$TMP/err"
    failures=$((failures + 1))
  fi
}
usage_error 2 "--delay: give" bash "$box/shape.sh" 2 --delay 5
usage_error 2 "--loss: give a percentage" bash "$box/shape.sh" 2 --loss 101
usage_error 2 "--rate: give" bash "$box/shape.sh" 2 --rate fast
usage_error 2 "--delay: at most 60 s" bash "$box/shape.sh" 2 --delay 61s
usage_error 77 "need mpdist-delayline" env MPDIST_DELAYLINE="$TMP/no-such-delayline" bash "$box/shape.sh" 2 --delay 1ms
mkdir -p "$TMP/bin" && ln -s "$(command -v ip)" "$(command -v tc)" "$TMP/bin/"
usage_error 77 "need iptables" env PATH="$TMP/bin:/usr/bin:/bin" bash "$box/shape.sh" 2 --delay 1ms
usage_error 2 "a number in range" "$MPDIST_DELAYLINE" --queue 0 --delay-us -1
usage_error 2 "unknown option" "$MPDIST_DELAYLINE" --bogus 1
usage_error 2 "--queue and --delay-us are required" "$MPDIST_DELAYLINE" --queue 0
bash "$box/shape.sh" 2 --delay 1ms
bash "$box/down.sh"
expect_ok "down.sh left no delay line" test -z "$(pgrep -f "^$MPDIST_DELAYLINE " || true)"
finish
