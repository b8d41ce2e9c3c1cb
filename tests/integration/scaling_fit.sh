#!/usr/bin/env bash
# labels: integration
# cluster/scaling_box.py (the box study's model) on made-up runs: a bench-comm sweep that jumps
# where the ring's messages (size/hosts) pass Open MPI's eager limit, eager sizes on one line and
# rendezvous sizes on another. The model's alpha and beta must be those of the gradients' own
# protocol's line, at both 2 hosts (all sizes rendezvous) and 4 (the smallest sizes eager), with
# the protocol and the sizes it fitted in box.csv; where the gradients' side of the limit has a
# single size, a one-line error naming the limit; without the ompi_info record, one naming that.
source "$(dirname "$0")/common.bash"
cd "$SRC"
runs=$TMP/runs
mkdir -p "$runs"
python3 - "$runs" <<'P'
import json, sys
runs, nparam, G = sys.argv[1], 235146, 940544  # the MLP; G: its FP32 gradient bytes, as the study rounds them
limit = 65536
line = lambda eager, s: (1e-3 + 1e-9 * s) if eager else (2e-3 + 4e-9 * s)  # seconds
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
    with open(f"{runs}/bench-l-{n}.csv", "w") as f:
        f.write("op,size_bytes,count,type,redop,time_us\n")
        for t, width in (("float", 4), ("half", 2)):
            for k in range(15):
                s = G // 4 + k * G // 8
                f.write(f"allreduce,{s},{s // width},{t},sum,{line(s / n <= limit, s) * 1e6:.4f}\n")
P
box() { python3 cluster/scaling_box.py --runs "$runs" --opts "O0 O2" --hosts "2 4" --links l \
  --out "$TMP" --config configs/fashion-mnist-mlp.cfg; }
expect_ok "the model runs" box
python3 - "$TMP/box.csv" <<'P' || failures=$((failures + 1))
import csv, sys
rows = {(r["opt"], int(r["hosts"])): r for r in csv.DictReader(open(sys.argv[1]))}
G = 940544
for (o, n), r in rows.items():
    g = G if o == "O0" else G // 2
    # the rendezvous line: A = 2 ms, B = 4 ns/byte; alpha = A / 2(n-1), beta = B n / 2(n-1)
    alpha, beta_mbs = 2e-3 / (2 * (n - 1)) * 1e6, 1e-6 / (4e-9 * n / (2 * (n - 1)))
    assert abs(float(r["alpha_us"]) - alpha) < 1e-3 * alpha, (o, n, r["alpha_us"], alpha)
    assert abs(float(r["beta_mbs"]) - beta_mbs) < 1e-3 * beta_mbs, (o, n, r["beta_mbs"], beta_mbs)
    assert r["protocol"] == "rendezvous", r
    sizes = [G // 4 + k * G // 8 for k in range(15)]
    want = sum(1 for s in sizes if 0.45 * g <= s <= 2.2 * g and s / n > 65536)
    assert int(r["fit_points"]) == want, (o, n, r["fit_points"], want)
# the 4-host half sweep starts with an eager size, left out
assert int(rows[("O2", 4)]["fit_points"]) == int(rows[("O2", 2)]["fit_points"]) - 1, rows
print("ok: alpha and beta of the rendezvous line at", sorted(rows))
P
grep -q "btl_tcp_eager_limit (65536 bytes)" "$TMP/box.md" ||
  { echo "FAIL: box.md does not name the eager limit"; failures=$((failures + 1)); }
# a 4-host sweep that ends at G/2: one size of the FP32 window, rendezvous, with an eager one below
awk -F, 'NR == 1 || $2 <= 470272' "$runs/bench-l-4.csv" >"$TMP/cut" && mv "$TMP/cut" "$runs/bench-l-4.csv"
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && [ "$(wc -l <"$TMP/err")" = 1 ] &&
  grep -q "^scaling: fewer than 2 float all-reduce rows of .* sent by rendezvous (messages of size/4 over btl_tcp_eager_limit 65536)" "$TMP/err" ||
  { echo "FAIL: one rendezvous size: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
rm "$runs/ompi-btl-tcp.txt"
rc=0 && box >"$TMP/err" 2>&1 || rc=$?
[ "$rc" = 1 ] && grep -q "^scaling: no btl_tcp_eager_limit in .*ompi-btl-tcp.txt" "$TMP/err" ||
  { echo "FAIL: no ompi_info record: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
finish
