#!/usr/bin/env bash
# labels: integration nosan
# cluster/scaling.sh over 1, 2 and 4 ranks at O0 and O2 (weak scaling, 40 steps each): one CSV
# row per run with the time split adding up, the Markdown table, the model's predictions at 8,
# 64 and 512 ranks, and three non-empty PNG plots, in an --out directory whose name holds both
# quotes; an option given without its value exits 2 with one line; without --out the study
# writes runs/scaling in the current directory; a plot gnuplot cannot write fails the study with
# gnuplot's own message (not the command it echoes); the model's steps are those of a resumed
# run's last start, and its bucket size is the runs' (their --set after --, else the config's
# outside libconfig's three comment styles and strings).
source "$(dirname "$0")/common.bash"
cd "$SRC"
export MPDIST_BIN=$MPDIST
# an option without its value: one line naming it, exit 2
for opt in --rounds --ranks --link; do
  rc=0 && bash cluster/scaling.sh configs/fashion-mnist-mlp.cfg "$opt" >/dev/null 2>"$TMP/err" || rc=$?
  [ "$rc" = 2 ] && [ "$(wc -l <"$TMP/err")" = 1 ] && grep -qx "scaling: $opt needs a value" "$TMP/err" ||
    { echo "FAIL: $opt without a value: exit $rc"; cat "$TMP/err"; failures=$((failures + 1)); }
done
out="$TMP/it's a \"study\""
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
table() { grep -q '^| O2 | 4 | 64 |' "$out/scaling.md" && grep -q '^| O2 | 4 | 64 |' "$TMP/log"; }
expect_ok "the table, in scaling.md and printed" table
expect_ok "model predictions at 8, 64, 512 ranks" \
  test "$(grep -c '25 GB/s, 5 us | \(8\|64\|512\) |' "$out/model.md")" = 6

# Without --out, from another directory: the results go to its runs/scaling, not into the
# scripts' tree (a copy here), whose bench/results holds committed studies. There a plot gnuplot
# cannot write (a directory in its place): exit 1, gnuplot's message.
mkdir -p "$TMP/tree" "$TMP/cwd/runs/scaling/throughput.png"
cp -r cluster launch "$TMP/tree"
rc=0 && (cd "$TMP/cwd" && bash "$TMP/tree/cluster/scaling.sh" "$SRC/configs/fashion-mnist-mlp.cfg" --ranks 1 \
  --opt O0 --steps 2 -- --set data.train_limit=512 --set=comm.bucket_mb=0.05 --set data.test_limit=100) \
  >/dev/null 2>"$TMP/err" || rc=$?
expect_ok "the default --out is runs/scaling in the current directory" \
  test -s "$TMP/cwd/runs/scaling/scaling.csv" -a ! -e "$TMP/tree/bench"
# The model's buckets are the run's: the --set after -- (0.05 MiB, in mpdist's --set=KEY=VALUE
# form), not the config's 25 MiB.
nparam=$(sed -n 's/.*(\([0-9]*\) parameters).*/\1/p' "$TMP/cwd/runs/scaling/runs/O0-1.log")
expect_ok "the model takes comm.bucket_mb from the runs' --set: $((4 * nparam / 52429 + 1)) buckets" \
  grep -q "^| O0 | [0-9.]* | $((4 * nparam / 52429 + 1)) |" "$TMP/cwd/runs/scaling/model.md"
if [ "$rc" = 1 ] && grep -q '^scaling: gnuplot: line 0: cannot open file' "$TMP/err"; then
  echo "ok: $(cat "$TMP/err")"
else
  echo "FAIL: a plot gnuplot cannot write: exit $rc (want 1 and gnuplot's message)"; cat "$TMP/err"; failures=$((failures + 1))
fi

# The model on O0's runs again, the 1-rank run resumed at step 10 (its log says so) and the
# bucket size hidden in comments and a string but for one setting: the steps are the 30 that
# the summary timed, and 0.01 MiB buckets.
mkdir -p "$TMP/resumed/runs"
cp "$out"/runs/O0-[12].* "$TMP/resumed/runs"
sed -i '1i resumed from ckpt-00000010.h5: step 10, epoch 0, 640 samples into it' "$TMP/resumed/runs/O0-1.log"
cat >"$TMP/comments.cfg" <<'C'
// comm: { bucket_mb = 0.001; };
/* comm: {
  bucket_mb = 0.002; } */
data: { path = "/x/# bucket_mb = 3 // \" bucket_mb = 4"; }; # bucket_mb = 5
comm: { first_bucket_mb = 1; bucket_mb = 0.01; };
C
python3 cluster/scaling_model.py --runs "$TMP/resumed/runs" --opts O0 --ranks "1 2" --mode weak \
  --out "$TMP/resumed" --config "$TMP/comments.cfg" >/dev/null || failures=$((failures + 1))
python3 - "$TMP/resumed" <<'P' || failures=$((failures + 1))
import csv, math, re, sys
rows = list(csv.DictReader(open(f"{sys.argv[1]}/scaling.csv")))
assert [int(r["steps"]) for r in rows] == [30, 40], rows
for r in rows:
    step_ms = 1e3 * float(r["step_s"]) / int(r["steps"])
    parts = float(r["compute_ms"]) + float(r["comm_exposed_ms"]) + float(r["input_wait_ms"])
    assert abs(parts - step_ms) < 1e-3 * step_ms + 0.01, (r, parts, step_ms)
nparam = int(re.search(r"\((\d+) parameters\)", open(f"{sys.argv[1]}/runs/O0-1.log").read()).group(1))
buckets = {int(l.split("|")[3]) for l in open(f"{sys.argv[1]}/model.md") if l.startswith("| O0 |")}
assert buckets == {math.ceil(4 * nparam / (0.01 * 2**20))}, (buckets, nparam)
print(f"ok: a resumed run's steps are its last start's (30), time splits add up; {buckets.pop()} buckets of 0.01 MiB")
P
finish
