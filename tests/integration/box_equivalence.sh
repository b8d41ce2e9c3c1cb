#!/usr/bin/env bash
# labels: integration cluster
# serial
# A cluster in a box (issue 22, cluster/box): 2 hosts x 2 ranks, Open MPI between the hosts'
# network namespaces over TCP (a host's own two ranks share memory), trains bitwise as 1 host x
# 4 ranks: the same metrics to the last digit (timings aside) and the same parameters in the
# final checkpoint. The inter-host traffic crossed the bridge: its ports counted at least the
# gradients' all-reduce bytes. Skipped (77) where network namespaces cannot be made; the box is
# torn down however the test ends. The box scripts' usage errors (and those of local-slurm's and
# scaling.sh's box modes) exit 2 with one line. MPDIST_BOX_PIN=1 gives each host its own cores.
source "$(dirname "$0")/common.bash"
box=$SRC/cluster/box
trap 'bash "$box/down.sh"; rm -rf "$TMP"' EXIT
rc=0
bash "$box/up.sh" 2 || rc=$?
[ "$rc" = 77 ] && { echo "skipped: network namespaces cannot be made here"; exit 77; }
[ "$rc" = 0 ] || { echo "FAIL: cluster/box/up.sh 2 exited $rc"; exit 1; }

# usage_error CODE REGEX CMD...: CMD exits CODE with one line on stderr matching REGEX
usage_error() {
  local want=$1 regex=$2 rc=0
  shift 2
  timeout 20 "$@" >"$TMP/uout" 2>"$TMP/uerr" || rc=$?
  if [ "$rc" = "$want" ] && [ "$(wc -l <"$TMP/uerr")" = 1 ] && grep -Eq -- "$regex" "$TMP/uerr"; then
    echo "ok: exit $rc: $(cat "$TMP/uerr")"
  else
    echo "FAIL: $* -> exit $rc (want $want), stderr:"; sed 's/^/    /' "$TMP/uerr"
    failures=$((failures + 1))
  fi
}
usage_error 2 'N must be 2, 3 or 4' bash "$box/up.sh" 5
usage_error 2 'unknown option --bogus' bash "$box/up.sh" 2 --bogus
usage_error 2 'not a box host: node1' bash "$box/exec.sh" node1 true
usage_error 2 'h4 is not up' bash "$box/exec.sh" h4 true
usage_error 2 'unknown option --bogus' bash "$box/shape.sh" 1 --bogus 1
usage_error 2 'host h7 is not up' bash "$box/shape.sh" 7 --rate 1gbit
usage_error 2 "give bits per second as N\[k\|m\|g\]bit \(got '1gb'\)" bash "$box/shape.sh" 1 --rate 1gb
usage_error 2 "--box N: N must be 2, 3 or 4 \(got '5'\)" bash "$SRC/cluster/local-slurm/start.sh" "$TMP/sl" 8 --box 5
usage_error 2 "--box: host counts are 2, 3 or 4 \(got '1'\)" \
  bash "$SRC/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --box 1 --out "$TMP/study"
usage_error 2 "--link: give RATE or RATE/DELAY, e.g. 1gbit/0.2ms \(got '1gb'\)" \
  bash "$SRC/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --box 2 --link 1gb --out "$TMP/study"
usage_error 2 "--link: a rate above 0 bit/s \(got '0kbit/1ms'\)" \
  bash "$SRC/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --box 2 --link 0kbit/1ms --out "$TMP/study"
usage_error 2 "--rounds: 1 to 10 \(got '0'\)" \
  bash "$SRC/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --box 2 --rounds 0 --out "$TMP/study"
usage_error 2 "--rounds is for the study on the box \(--box\)" \
  bash "$SRC/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --rounds 2 --out "$TMP/study"

# MPDIST_BOX_PIN=1: each of the 2 hosts on its own half of the cores this test may use (both on
# the first where there is only one); without it, on every core.
expand() { # a CPU list (0-2,5) as 0,1,2,5
  local r out=()
  IFS=, read -ra rs <<<"$1"
  for r in "${rs[@]}"; do out+=($(seq "${r%-*}" "${r#*-}")); done
  (IFS=,; echo "${out[*]}")
}
cpus_of() { # the cores a command on box host $1 may run on, MPDIST_BOX_PIN=$2
  MPDIST_BOX_PIN=$2 bash "$box/exec.sh" "$1" 'awk "/^Cpus_allowed_list:/ {print \$2}" /proc/self/status'
}
IFS=, read -ra all <<<"$(expand "$(awk '/^Cpus_allowed_list:/ {print $2}' /proc/self/status)")"
c=${#all[@]} h=$((${#all[@]} / 2))
first=$(IFS=,; echo "${all[*]:0:h > 0 ? h : 1}") second=$(IFS=,; echo "${all[*]:h}")
expect_ok "MPDIST_BOX_PIN=1: h1 on cores $first of $c" test "$(expand "$(cpus_of h1 1)")" = "$first"
expect_ok "MPDIST_BOX_PIN=1: h2 on cores $second of $c" test "$(expand "$(cpus_of h2 1)")" = "$second"
expect_ok "without MPDIST_BOX_PIN, h1 on all $c cores" \
  test "$(expand "$(cpus_of h1 0)")" = "$(IFS=,; echo "${all[*]}")"

steps=30
run() { # run NAME MPIRUN-ARGS...: trains the MLP for $steps steps with metrics and a checkpoint
  local name=$1
  shift
  timeout 300 mpirun "$@" "$MPDIST" "$SRC/configs/fashion-mnist-mlp.cfg" \
    --set data.train_limit=6000 --set data.test_limit=1000 --set train.max_steps=$steps \
    --set log.every=5 --set "log.metrics=\"$TMP/$name.jsonl\"" \
    --set "checkpoint.dir=\"$TMP/$name\"" >"$TMP/$name.out" 2>&1 ||
    { echo "FAIL: run $name exited $?"; cat "$TMP/$name.out"; exit 1; }
  comparable "$TMP/$name.jsonl" "$TMP/$name.cmp"
}
bytes() { echo $(($(cat /sys/class/net/mpbv1/statistics/tx_bytes) + $(cat /sys/class/net/mpbv1/statistics/rx_bytes))); }

before=$(bytes)
run box --host h1:2,h2:2 $("$box/mpirun-args")
crossed=$(($(bytes) - before))
run one -np 4
grep -q '"world_size":4' "$TMP/box.jsonl" || { echo "FAIL: the box run did not have 4 ranks"; exit 1; }
# Every step sums the model's FP32 gradients over the 4 ranks: each host's partial sum has to
# cross to the other host, at least the gradients' bytes a step.
params=$(sed -n 's/.*model mlp (\([0-9]*\) parameters).*/\1/p' "$TMP/box.out")
[ -n "$params" ] || { echo "FAIL: no parameter count in the box run's start-up line"; exit 1; }
need=$((steps * params * 4))
expect_ok "the hosts' traffic crossed the bridge ($crossed bytes, at least $need)" test "$crossed" -ge "$need"
expect_ok "metrics of 2 hosts x 2 ranks equal 1 host x 4 ranks" cmp "$TMP/box.cmp" "$TMP/one.cmp"
params() { h5dump -g /params "$(ls "$1"/ckpt-*.h5 | tail -1)" | tail -n +2; } # not the file name
expect_ok "final parameters equal" cmp <(params "$TMP/box") <(params "$TMP/one")
# A host beyond those up (h1 gone, h2 left): refused before anything runs.
ip netns del mpbox-h1
usage_error 2 'MPDIST_BOX_PIN: h2 is not among hosts h1..h1' env MPDIST_BOX_PIN=1 bash "$box/exec.sh" h2 true
finish
