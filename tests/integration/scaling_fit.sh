#!/usr/bin/env bash
# labels: integration
# cluster/scaling_box.py (the box study's model) on made-up runs: bench-comm sweeps that jump where
# the ring's blocks (size/hosts) stop fitting in Open MPI's eager limit with ob1's 56-byte header,
# eager sizes on one line and rendezvous sizes on another, with other slopes in the sweep after the
# training than before (means 1 ms + 2 ns/byte and 2 ms + 5 ns/byte), plus a size whose 4-host
# block is the limit itself (rendezvous: the header does not fit). The model's alpha and beta must
# be those of the gradients' own protocol's mean line, with the protocol and the number of sizes it
# fitted in box.csv (and bench_ms, the line's time at the gradients' size), with the limit at 64
# KiB (every gradient rendezvous) and at 256 KiB (both protocols); where the gradients' side of the
# limit has a single size, a one-line error naming the limit; without the ompi_info record, or with
# a sweep after the training that is missing or has other sizes, one naming that. With --rounds 2
# (a second training and sweep after it, as the study's --rounds writes them), the line is that of
# the three sweeps' mean (round 2's: 1 ms + 5 ns/byte eager, 2 ms + 8 ns/byte rendezvous), the
# measurement the median of both rounds' step records (each round's first left out) and the step
# time the rounds' median; a missing round-2 file is named.
source "$(dirname "$0")/common.bash"
cd "$SRC"
runs=$TMP/runs
mkdir -p "$runs"
# made-up runs for the MLP (G: its FP32 gradient bytes, as the study rounds them) at the limit $1
make_runs() {
  python3 - "$runs" "$1" <<'P'
import json, sys
runs, limit = sys.argv[1], int(sys.argv[2])
nparam, G = 235146, 940544
# seconds, before and after the training: on average 1 ms + 2 ns/byte eager, 2 ms + 5 ns/byte rendezvous
lines = {"": lambda eager, s: (1e-3 + 1e-9 * s) if eager else (2e-3 + 4e-9 * s),
         "-after": lambda eager, s: (1e-3 + 3e-9 * s) if eager else (2e-3 + 6e-9 * s)}
with open(f"{runs}/ompi-btl-tcp.txt", "w") as f:
    f.write(f"mca:btl:tcp:param:btl_tcp_eager_limit:value:{limit}\n"
            "mca:btl:tcp:param:btl_tcp_eager_limit:source:default\n")
summary = lambda grads: {"type": "summary", "steps": 20, "amp": {"grads": grads},
                         "time_s": {"steps": 0.2, "compute": 0.05, "input_wait": 0.01, "comm_exposed": 0.1}}
step = {"type": "step", "comm_last_ms": 5.0, "comm_ms": 5.5, "comm_skew_ms": 0.5}
for o, grads in (("O0", "fp32"), ("O2", "fp16")):
    for name in [f"{o}-1"] + [f"l-{o}-{n}" for n in (2, 4)]:
        with open(f"{runs}/{name}.jsonl", "w") as f:
            for _ in range(3):
                f.write(json.dumps(step) + "\n")
            f.write(json.dumps(summary(grads)) + "\n")
        with open(f"{runs}/{name}.log", "w") as f:
            f.write(f"mpdist 0.1.0: model mlp ({nparam} parameters), global batch 64\n")
for n in (2, 4):
    for when, line in lines.items():
        with open(f"{runs}/bench-l-{n}{when}.csv", "w") as f:
            f.write("op,size_bytes,count,type,redop,time_us\n")
            for t, width in (("float", 4), ("half", 2)):
                for s in sorted([G // 4 + k * G // 8 for k in range(15)] + ([4 * 65536] if n == 4 else [])):
                    block = -(-(s // width) // n) * width  # ob1 sends it eagerly if it fits with the header
                    f.write(f"allreduce,{s},{s // width},{t},sum,{line(block + 56 <= limit, s) * 1e6:.4f}\n")
P
}
# round 2 of the made-up runs: its sweep after the training (same sizes as make_runs's, other
# slopes) and training records whose first (1 ms, left out) is unlike the others (9 ms); its
# summaries take 0.3 s for 20 steps where round 1's take 0.2 s
make_round2() {
  python3 - "$runs" <<'P'
import csv, json, re, sys
runs = sys.argv[1]
limit = int(re.search(r"eager_limit:value:(\d+)", open(f"{runs}/ompi-btl-tcp.txt").read()).group(1))
for n in (2, 4):
    with open(f"{runs}/bench-l-{n}-after-r2.csv", "w") as g:
        g.write("op,size_bytes,count,type,redop,time_us\n")
        for r in csv.DictReader(open(f"{runs}/bench-l-{n}.csv")):
            s, width = int(r["size_bytes"]), 4 if r["type"] == "float" else 2
            eager = -(-(s // width) // n) * width + 56 <= limit  # as make_runs decides
            g.write(f"allreduce,{s},{r['count']},{r['type']},sum,{((1e-3 + 5e-9 * s) if eager else (2e-3 + 8e-9 * s)) * 1e6:.4f}\n")
for o, grads in (("O0", "fp32"), ("O2", "fp16")):
    for n in (2, 4):
        with open(f"{runs}/l-{o}-{n}-r2.jsonl", "w") as f:
            for ms in (1.0, 9.0, 9.0):
                f.write(json.dumps({"type": "step", "comm_last_ms": ms, "comm_ms": ms + 0.5, "comm_skew_ms": 0.5}) + "\n")
            f.write(json.dumps({"type": "summary", "steps": 20, "amp": {"grads": grads},
                                "time_s": {"steps": 0.3, "compute": 0.05, "input_wait": 0.01, "comm_exposed": 0.1}}) + "\n")
P
}
box() { python3 cluster/scaling_box.py --runs "$runs" --opts "O0 O2" --hosts "2 4" --links l \
  --out "$TMP" --config configs/fashion-mnist-mlp.cfg "$@"; }
# check LIMIT "OPT HOSTS PROTOCOL SIZES" ...: box.csv's rows have the protocol, the number of sizes
# fitted, and that protocol's line's alpha and beta
check() {
  python3 - "$TMP/box.csv" "$@" <<'P' || failures=$((failures + 1))
import csv, os, sys
ROUNDS = int(os.environ.get("ROUNDS", "1"))
rows = {(r["opt"], r["hosts"]): r for r in csv.DictReader(open(sys.argv[1]))}
assert len(rows) == 4, rows
for want in sys.argv[3:]:
    o, n, proto, k = want.split()
    r, n = rows[(o, n)], int(n)
    A, B = (1e-3, 2e-9) if proto == "eager" else (2e-3, 5e-9)
    if ROUNDS == 2:  # the mean of make_runs's two sweeps and make_round2's
        A, B = (1e-3, 3e-9) if proto == "eager" else (2e-3, 6e-9)
    alpha, beta_mbs = A / (2 * (n - 1)) * 1e6, 1e-6 / (B * n / (2 * (n - 1)))
    assert (r["protocol"], r["fit_points"]) == (proto, k), (want, r)
    assert abs(float(r["alpha_us"]) - alpha) < 1e-3 * alpha, (want, r["alpha_us"], alpha)
    assert abs(float(r["beta_mbs"]) - beta_mbs) < 1e-3 * beta_mbs, (want, r["beta_mbs"], beta_mbs)
    size = 940544 if o == "O0" else 470272  # the sweep's size nearest the gradients' bytes
    assert abs(float(r["bench_ms"]) - (A + B * size) * 1e3) < 1e-3, (want, r["bench_ms"])
print(f"ok: limit {sys.argv[2]}: the line of each gradient's protocol:", "; ".join(sys.argv[3:]))
P
}
# 64 KiB: every gradient rendezvous; O2's 4-host window loses G/4 (eager) and keeps 262144
# (its block is the limit, which leaves no room for the header)
make_runs 65536
expect_ok "the model runs at 64 KiB" box
check 65536 "O0 2 rendezvous 13" "O0 4 rendezvous 13" "O2 2 rendezvous 7" "O2 4 rendezvous 7"
grep -q "btl_tcp_eager_limit (65536 bytes)" "$TMP/box.md" ||
  { echo "FAIL: box.md does not name the eager limit"; failures=$((failures + 1)); }
# 256 KiB: blocks up to 262088 bytes are eager
make_runs 262144
expect_ok "the model runs at 256 KiB" box
check 262144 "O0 2 rendezvous 12" "O0 4 eager 5" "O2 2 eager 3" "O2 4 eager 8"
# two rounds: the three sweeps' mean line, both rounds' records, the rounds' median step
make_runs 262144
make_round2
expect_ok "the model runs on two rounds" box --rounds 2
ROUNDS=2 check 262144 "O0 2 rendezvous 12" "O0 4 eager 5" "O2 2 eager 3" "O2 4 eager 8"
expect_ok "two rounds: measured 7 ms (median of 5, 5, 9, 9), step 12.5 ms (of 10 and 15)" python3 -c "
import csv
for r in csv.DictReader(open('$TMP/box.csv')):
    assert abs(float(r['meas_ms']) - 7.0) < 1e-9 and abs(float(r['step_ms']) - 12.5) < 1e-9, r"
grep -q "2 rounds of training and calibration" "$TMP/box.md" ||
  { echo "FAIL: box.md does not say 2 rounds"; failures=$((failures + 1)); }
rm "$runs/l-O2-4-r2.jsonl"
rc=0 && box --rounds 2 >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: .*l-O2-4-r2.jsonl is missing" "$TMP/err" ||
  { echo "FAIL: a missing round: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
rc=0 && box --rounds 11 >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: --rounds must be 1 to 10 (got 11)" "$TMP/err" ||
  { echo "FAIL: --rounds 11: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
# a 4-host sweep that ends at G/2: one size of the FP32 window, rendezvous, with an eager one below
make_runs 65536
for f in "$runs"/bench-l-4{,-after}.csv; do
  awk -F, 'NR == 1 || $2 <= 470272' "$f" >"$TMP/cut" && mv "$TMP/cut" "$f"
done
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
  grep -q "^scaling: fewer than 2 float all-reduce rows of .* sent by rendezvous (ring blocks over btl_tcp_eager_limit 65536 with ob1's 56-byte header, 4 ranks)" "$TMP/err" ||
  { echo "FAIL: one rendezvous size: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
make_runs 65536
sed -i '$d' "$runs/bench-l-2-after.csv"
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: the half sizes of .*bench-l-2.csv and its sweep bench-l-2-after.csv differ" "$TMP/err" ||
  { echo "FAIL: sweeps of different sizes: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
rm "$runs/bench-l-2-after.csv"
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: .*bench-l-2-after.csv is missing" "$TMP/err" ||
  { echo "FAIL: no sweep after the training: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
rm "$runs/ompi-btl-tcp.txt"
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: no btl_tcp_eager_limit in .*ompi-btl-tcp.txt" "$TMP/err" ||
  { echo "FAIL: no ompi_info record: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
finish
