#!/usr/bin/env bash
# labels: integration nosan
# cluster/scaling.sh over 1, 2 and 4 ranks at O0 and O2 (weak scaling, 40 steps each): one CSV
# row per run with the time split adding up, the Markdown table, the model's predictions at 8,
# 64 and 512 ranks, and three non-empty PNG plots; an option given without its value exits 2 with
# one line.
source "$(dirname "$0")/common.bash"
cd "$SRC"
export MPDIST_BIN=$MPDIST
# an option without its value: one line naming it, exit 2
for opt in --rounds --ranks --link; do
  rc=0 && bash cluster/scaling.sh configs/fashion-mnist-mlp.cfg "$opt" >/dev/null 2>"$TMP/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -qx "scaling: $opt needs a value" "$TMP/err" ||
    { echo "FAIL: $opt without a value: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
done
out=$TMP/study
bash cluster/scaling.sh configs/fashion-mnist-mlp.cfg --ranks "1 2 4" --opt "O0 O2" --steps 40 \
  --out "$out" -- --set data.train_limit=4096 --set data.test_limit=500 >"$TMP/log" 2>&1 ||
  { cat "$TMP/log"; echo "FAIL: scaling.sh failed"; exit 1; }
python3 - "$out/scaling.csv" "$out/runs" <<'P' || failures=$((failures + 1))
import csv, json, sys
rows = list(csv.DictReader(open(sys.argv[1])))
assert [(r["opt_level"], int(r["ranks"])) for r in rows] == \
    [(o, n) for o in ("O0", "O2") for n in (1, 2, 4)], rows
for r in rows:
    step_ms = 1e3 * float(r["step_s"]) / int(r["steps"])
    parts = float(r["compute_ms"]) + float(r["comm_exposed_ms"]) + float(r["input_wait_ms"])
    assert abs(parts - step_ms) < 1e-3 * step_ms + 0.01, (r, parts, step_ms)
    assert int(r["global_batch"]) == 64 * int(r["ranks"]) and int(r["steps"]) == 40, r
    # the ratios follow from the rates (a bound on their values would be a timing test: a
    # one-rank run slowed by a busy machine reads efficiency above 1)
    n, ips = int(r["ranks"]), float(r["images_per_s"])
    base = float(next(b for b in rows if b["opt_level"] == r["opt_level"] and b["ranks"] == "1")["images_per_s"])
    assert ips > 0 and abs(float(r["ideal_images_per_s"]) - n * base) <= 1e-4 * n * base + 0.1, r
    assert abs(float(r["speedup"]) - ips / base) <= 1e-3, r
    assert abs(float(r["efficiency"]) - ips / (n * base)) <= 1e-3, r
    # one rank communicates nothing; several sum every step's gradients (comm_ms), of which the
    # exposed part may round to 0.000 ms where the sum ended before backward's last call returned
    comm = [x["comm_ms"] for x in map(json.loads, open(f"{sys.argv[2]}/{r['opt_level']}-{n}.jsonl"))
            if x["type"] == "step"]
    assert comm and (min(comm) > 0 if n > 1 else float(r["comm_exposed_ms"]) == 0 and max(comm) == 0), (r, comm)
print("ok: scaling.csv has 6 rows, time splits add up, speedup and efficiency follow from the rates, comm only on several ranks")
P
png() { [ "$(head -c 4 "$1" | od -An -c | tr -d ' ')" = '211PNG' ] && [ "$(stat -c %s "$1")" -gt 5000 ]; }
for f in throughput efficiency time_split; do
  expect_ok "$f.png is a plot" png "$out/$f.png"
done
expect_ok "the table, in scaling.md and printed" \
  sh -c "grep -q '^| O2 | 4 | 64 |' '$out/scaling.md' && grep -q '^| O2 | 4 | 64 |' '$TMP/log'"
expect_ok "model predictions at 8, 64, 512 ranks" \
  test "$(grep -c '25 GB/s, 5 us | \(8\|64\|512\) |' "$out/model.md")" = 6
finish
