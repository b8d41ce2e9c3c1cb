#!/usr/bin/env bash
# labels: integration cluster nosan
# serial
# cluster/scaling.sh --box on the cluster box (issue 22): 2 hosts, one link (1gbit: at 10gbit the
# 2-core VM's noise hid the all-reduce's slope about once in 12 runs), O0 and O2,
# 30 steps, 2 rounds: a bench-comm sweep per host count with the sizes that bracket the gradients
# (G/4 to 2G in steps of G/8, in the gradients' dtypes; before, and again after each round's
# training), the
# training runs across the hosts with Open MPI's ring all-reduce, the baselines; box.csv has a
# row per opt level with the model's fit (beta positive, three or more sizes of the gradients'
# protocol), the prediction following from alpha and beta, the error from the prediction and the
# measurement (the all-reduce after the last rank's arrival, within the step records' range),
# rank 0's time with the wait at least that, and box.md the table; both plots are PNGs; the
# --out directory's name holds both quotes. How close the model comes is the study's result
# (docs/cluster.md), not checked here: the machine is shared.
# Skipped (77) where network namespaces cannot be made.
source "$(dirname "$0")/common.bash"
cd "$SRC"
trap 'bash "$SRC/cluster/box/down.sh"; rm -rf "$TMP"' EXIT
ip netns add mpbox-probe 2>/dev/null || { echo "skipped: network namespaces cannot be made here"; exit 77; }
ip netns del mpbox-probe
export MPDIST_BIN=$MPDIST
out="$TMP/it's a \"study\"" # both quotes: the plots' gnuplot and log.metrics quote it
bash cluster/scaling.sh configs/fashion-mnist-mlp.cfg --box 2 --link 1gbit --opt "O0 O2" --steps 30 \
  --rounds 2 --out "$out" -- --set data.train_limit=4096 --set data.test_limit=500 >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; for f in "$out"/runs/bench-*.csv; do [ ! -f "$f" ] || { echo "--- $f"; cat "$f"; }; done
    echo "FAIL: scaling.sh --box failed"; exit 1; } # (the calibration sweeps: a failed fit's data)
expect_ok "the box is down afterwards" sh -c '! ip netns list | grep -q mpbox-h'
python3 - "$out" <<'P' || failures=$((failures + 1))
import csv, json, sys
out = sys.argv[1]
rows = list(csv.DictReader(open(f"{out}/box.csv")))
assert [(r["link"], r["opt"], r["hosts"]) for r in rows] == [("1gbit", "O0", "2"), ("1gbit", "O2", "2")], rows
assert [r["grads"] for r in rows] == ["fp32", "fp16"], rows
for r in rows:
    n, k, g = int(r["hosts"]), int(r["buckets"]), float(r["grad_mb"]) * 1e6
    alpha, beta = float(r["alpha_us"]) * 1e-6, 1 / (float(r["beta_mbs"]) * 1e6)
    pred = 2 * (n - 1) * k * alpha + 2 * (n - 1) / n * g * beta
    assert beta > 0 and abs(pred * 1e3 - float(r["pred_ms"])) < 0.01 * float(r["pred_ms"]) + 0.01, (r, pred)
    assert abs(float(r["pred_ms"]) / float(r["meas_ms"]) - 1 - float(r["err"])) < 1e-3, r
    comm = sorted(x["comm_last_ms"] for f in ("", "-r2")  # both rounds' records
                  for x in map(json.loads, open(f"{out}/runs/1gbit-{r['opt']}-2{f}.jsonl")) if x["type"] == "step")
    assert comm[0] <= float(r["meas_ms"]) <= comm[-1] and float(r["meas_ms"]) > 0, (r, comm)
    # per step rank 0's time is at least the least over the ranks, so its median is too
    assert float(r["first_ms"]) >= float(r["meas_ms"]) - 1e-3 and float(r["skew_ms"]) >= 0, r
    assert float(r["exposed_ms"]) <= float(r["step_ms"]), r
bench = list(csv.DictReader(open(f"{out}/runs/bench-1gbit-2.csv")))
sizes = sorted({int(b["size_bytes"]) for b in bench})
assert len(sizes) == 15 and all(b - a == sizes[0] // 2 for a, b in zip(sizes, sizes[1:])), sizes
assert sorted({b["type"] for b in bench}) == ["float", "half"], bench  # the gradients' dtypes only
assert all(b["wrong"] == "0" for b in bench), bench
for f in ("", "-r2"):  # the sweeps after each round's training
    after = list(csv.DictReader(open(f"{out}/runs/bench-1gbit-2-after{f}.csv")))
    assert [(b["size_bytes"], b["type"]) for b in after] == [(b["size_bytes"], b["type"]) for b in bench], after
assert all(r["protocol"] == "rendezvous" and int(r["fit_points"]) >= 3 for r in rows), rows
md = open(f"{out}/box.md").read()
assert md.count("| 1gbit |") == 2 and "points" in md and "2 rounds" in md, md
P
is_png() { head -c 8 "$1" | od -An -c | grep -q 'P   N   G'; }
for png in box_allreduce box_efficiency; do
  expect_ok "$png.png is a PNG" is_png "$out/$png.png"
done
expect_ok "the runs crossed hosts: 2 ranks on h1 and h2" grep -q "mpdist-run: mpirun -np 2 --host h1:1,h2:1" "$out/runs/1gbit-O0-2.log"
finish
