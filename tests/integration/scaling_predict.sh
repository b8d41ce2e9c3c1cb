#!/usr/bin/env bash
# The scaling model (docs/scaling.md): cluster/step_model.py on made-up profiles and clusters whose
# answers are known by hand (tests/util/test_step_model.py); the engine's "backward" record with
# log.profile on 2 ranks (CNN with BatchNorm at O2: two gradient groups, small buckets): the
# engine's buckets are the ones the model plans from the record's gradients, ready times rise
# through backward, and training is bitwise what it is without the profile (the recorder passes
# every call on to the buckets); cluster/make_profile.py on it; `cluster/scaling.sh --predict`
# (its table, CSV and plot, in an --out directory whose name holds both quotes; without --out,
# runs/scaling-predict of the current directory; its bad inputs: exit 2, one line); every
# shipped cluster file loads with its sources; cluster/published.py within 10 points of every
# published point or with the miss explained, and --check's exit as its --help says; the box
# study's committed runs recomputed through the model (23 of 24 on 2026-11-28, 24 of 24 on
# 2026-11-29).
source "$(dirname "$0")/common.bash"
cd "$SRC"
expect_ok "the model's hand-worked cases" python3 tests/util/test_step_model.py

train() { # NAME PROFILE: 2 ranks, 12 steps
  timeout 300 mpirun -np 2 "$MPDIST" configs/fashion-mnist-cnn-bn.cfg --set amp.opt_level=O2 \
    --set comm.bucket_mb=0.02 --set comm.first_bucket_mb=0.004 --set train.max_steps=12 \
    --set data.train_limit=2048 --set data.test_limit=200 --set log.every=1 --set log.progress=none \
    --set log.profile="$2" --set "log.metrics=\"$TMP/$1.jsonl\"" >"$TMP/$1.log" 2>&1 ||
    { cat "$TMP/$1.log"; echo "FAIL: training $1"; exit 1; }
}
train profiled true
train plain false
python3 - "$TMP" <<'P' || failures=$((failures + 1))
import json, sys
sys.path.insert(0, "cluster")
import step_model as sm
tmp = sys.argv[1]
recs = {n: [json.loads(l) for l in open(f"{tmp}/{n}.jsonl")] for n in ("profiled", "plain")}
losses = {n: [(r["step"], r["loss"]) for r in rs if r["type"] == "step"] for n, rs in recs.items()}
assert losses["profiled"] == losses["plain"] and len(losses["plain"]) == 12, losses
hidden = [r["comm_hidden"] for r in recs["profiled"] if r["type"] == "step"][1:]
assert max(hidden) > 0, ("buckets started during backward under the recorder", hidden)
b = [r for r in recs["profiled"] if r["type"] == "backward"]
assert len(b) == 1 and not [r for r in recs["plain"] if r["type"] == "backward"], b
b = b[0]
# the sizes as the engine rounds them up to whole bytes
assert b["steps"] == 11 and abs(b["bucket_mb"] - 0.02) < 1e-5 and abs(b["first_bucket_mb"] - 0.004) < 1e-5, b
ps = b["params"]
assert [p["group"] for p in ps].count("norm") >= 2 and ps[-1]["name"] == "conv1.weight", ps
ready = [p["ready_ms"] for p in ps]
assert ready == sorted(ready) and ready[0] > 0, ready
mine = sm.plan_buckets(ps, b["bucket_mb"] * 2**20, b["first_bucket_mb"] * 2**20)
theirs = [(q["bytes"], q["ready_ms"]) for q in b["buckets"]]
assert mine == theirs and len(theirs) >= 4, (mine, theirs)
norm = sum(p["bytes"] for p in ps if p["group"] == "norm")  # FP32 norm gradients in a bucket of their own
assert norm in [q["bytes"] for q in b["buckets"]], (norm, b["buckets"])
assert sum(p["bytes"] for p in ps) == sum(q["bytes"] for q in b["buckets"])
print(f"ok: {len(theirs)} buckets planned as the engine planned them, ready times rise, training bitwise unchanged")
P
expect_ok "make_profile.py writes a profile the model loads" sh -c "
  python3 cluster/make_profile.py '$TMP/profiled.jsonl' -o '$TMP/p.json' --source test &&
  python3 -c 'import sys; sys.path.insert(0, \"cluster\"); import step_model as sm
p = sm.load_profile(\"$TMP/p.json\")
parts = p[\"forward_ms\"] + p[\"backward_ms\"] + p[\"optimizer_ms\"] + p[\"other_ms\"]
last = p[\"params\"][-1][\"ready_ms\"]
assert abs(parts - p[\"step_ms\"]) < 1e-3 * p[\"step_ms\"] and 0.8 * p[\"backward_ms\"] < last <= p[\"backward_ms\"], p'"
# train.accum_steps = 2: the record says so, the profile's phases are a micro-batch's
timeout 300 mpirun -np 1 "$MPDIST" configs/fashion-mnist-cnn-bn.cfg --set train.accum_steps=2 \
  --set train.max_steps=6 --set data.train_limit=1024 --set data.test_limit=100 --set log.progress=none \
  --set log.profile=true --set "log.metrics=\"$TMP/accum.jsonl\"" >"$TMP/accum.log" 2>&1 ||
  { cat "$TMP/accum.log"; failures=$((failures + 1)); }
expect_ok "accumulation: micro_batches 2, the profile a micro-batch's" sh -c "
  python3 cluster/make_profile.py '$TMP/accum.jsonl' -o '$TMP/accum.json' &&
  python3 -c 'import json; p = json.load(open(\"$TMP/accum.json\"))
b = [json.loads(l) for l in open(\"$TMP/accum.jsonl\") if \"backward\" in l and \"params\" in l][0]
assert b[\"micro_batches\"] == 2 and p[\"accum\"] == 2, (b[\"micro_batches\"], p[\"accum\"])
parts = 2 * (p[\"forward_ms\"] + p[\"backward_ms\"] + p[\"other_ms\"]) + p[\"optimizer_ms\"]
assert abs(parts - p[\"step_ms\"]) < 1e-3 * p[\"step_ms\"], p'"
pred="$TMP/it's \"pred\"" # both quotes, which the plot's gnuplot script must quote
bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster cluster/clusters/dgx-h100-ndr400.cluster \
  --cluster cluster/clusters/pcie8-100gbe.cluster --bucket-mb "1 25" --out "$pred" >"$TMP/pred.log" 2>&1 ||
  { cat "$TMP/pred.log"; failures=$((failures + 1)); }
expect_ok "--predict: 44 rows (2 clusters x 2 bucket sizes x 11 GPU counts)" \
  test "$(tail -n +2 "$pred/predict.csv" | wc -l)" = 44
expect_ok "--predict: the table printed, 1 GPU at efficiency 1.00" \
  grep -q '| 25 | 1.00 | 1.00 |' "$TMP/pred.log"
expect_ok "--predict: a plot, nothing from gnuplot on stderr" test "$(stat -c %s "$pred/predict.png")" -gt 5000 -a \
  "$(grep -c gnuplot "$TMP/pred.log")" = 0
# Without --out: runs/scaling-predict in the current directory (bench/results/scaling-predict
# holds the committed predictions).
mkdir -p "$TMP/cwd"
(cd "$TMP/cwd" && bash "$SRC/cluster/scaling.sh" --predict --profile "$TMP/p.json" --cluster "$SRC/cluster/clusters/dgx-a100-hdr200.cluster" >/dev/null) ||
  failures=$((failures + 1))
expect_ok "--predict: the default --out is runs/scaling-predict" test -s "$TMP/cwd/runs/scaling-predict/predict.csv"
# expect_fail CODE REGEX CMD...: one "scaling:" (or "make_profile:", "published:") line matching REGEX, exit CODE
expect_fail() {
  local want=$1 regex=$2 rc=0
  shift 2
  "$@" >"$TMP/out" 2>&1 || rc=$?
  if [ "$rc" = "$want" ] && [ "$(grep -c . "$TMP/out")" = 1 ] && grep -Eq "^(scaling|make_profile|published): .*$regex" "$TMP/out"; then
    echo "ok: exit $rc: $(cat "$TMP/out")"
  else
    echo "FAIL: $* -> exit $rc (want $want, /$regex/):"; sed 's/^/    /' "$TMP/out"; failures=$((failures + 1))
  fi
}
good=cluster/clusters/dgx-a100-hdr200.cluster
expect_fail 2 "cannot read the profile" bash cluster/scaling.sh --predict --profile "$TMP/none.json" --cluster $good
printf '{"forward_ms": 1}' >"$TMP/bad.json"
expect_fail 2 "backward_ms" bash cluster/scaling.sh --predict --profile "$TMP/bad.json" --cluster $good
sed 's/^nic_gbs.*/nic_gbs = 0/' $good >"$TMP/bad.cluster"
expect_fail 2 "nic_gbs = 0: must be above 0" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster "$TMP/bad.cluster"
expect_fail 2 "12 GPUs do not fill nodes of 8" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --gpus "1 12"
expect_fail 2 "--bucket-mb" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --bucket-mb "0"
expect_fail 2 "--bucket-mb 'nan': give one or more numbers above 0" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --bucket-mb nan
expect_fail 2 "--first-bucket-mb 'inf'" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --first-bucket-mb inf
expect_fail 2 "--accum '99999999999999999999': give one or more numbers above 0, at most 1e6" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --accum 99999999999999999999
expect_fail 2 "--check nan: give percentage points" python3 cluster/published.py --check nan
expect_fail 2 "--accum '10{400}': give one or more numbers" \
  bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --accum "1$(printf '0%.0s' $(seq 400))"
expect_fail 2 "--accum '2 3': give one count" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --accum "2 3"
expect_fail 2 "two profiles are named" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --profile "$TMP/p.json" --cluster $good
expect_fail 2 "--out /proc/nope" bash cluster/scaling.sh --predict --profile "$TMP/p.json" --cluster $good --out /proc/nope
expect_fail 2 "--step-ms -1" python3 cluster/make_profile.py "$TMP/profiled.jsonl" -o "$TMP/q.json" --step-ms -1
expect_fail 2 "no backward and summary records" python3 cluster/make_profile.py "$TMP/plain.jsonl" -o "$TMP/q.json"
for f in cluster/clusters/*.cluster; do
  expect_ok "$f loads and names its sources" python3 -c "import sys; sys.path.insert(0, 'cluster'); import step_model as sm
c = sm.load_cluster('$f'); assert len(c.sources) >= 3, c.sources"
done
# The box study's committed runs through the model's code: the study's own prediction at each
# point again, and how many are within 15% of the measurement (protocol-fit, 2026-11-28; the
# runs after the host-side causes of the 2-host misses were removed, 2026-11-29).
box_runs() { # WANT DIR RUN...
  local want=$1 dir=$2
  shift 2
  expect_ok "$dir's runs through the model's code: $want within 15%" python3 -c "
import csv, sys
sys.path.insert(0, 'cluster')
import step_model as sm
good, n = 0, 0
for f in sys.argv[2:]:
    for r in csv.DictReader(open(f'{sys.argv[1]}/{f}.csv')):
        g, k = float(r['grad_mb']) * 1e6, int(r['buckets'])
        link = sm.fitted_link(r['link'], float(r['alpha_us']) * 1e-6, 1e-6 / float(r['beta_mbs']))
        pred = 1e3 * sm.in_turn_s(link, [g / k] * k, int(r['hosts']))
        assert abs(pred - float(r['pred_ms'])) < 0.01, (r, pred)  # the study's own prediction
        n, good = n + 1, good + (abs(pred / float(r['meas_ms']) - 1) <= 0.15)
assert f'{good} of {n}' == '$want', (good, n)" "bench/results/box-scaling/$dir" "$@"
}
box_runs "23 of 24" protocol-fit box run2 run3
box_runs "24 of 24" loader-nice-2026-11-29 fix1 fix2 fix3
expect_ok "published results within 10 points, or the miss explained" \
  sh -c "python3 cluster/published.py --check 10 >'$TMP/published.md'"
# --check exits as its --help says: an explained miss passes, an explanation within the bound fails
rc=0 && python3 cluster/published.py --check 12 >/dev/null 2>"$TMP/check12" || rc=$?
expect_ok "published.py --check 12: exit 1, the explained 11.7-point miss is within it" \
  test "$rc" = 1 -a "$(grep -c 'explained, but within the bound' "$TMP/check12")" = 1
expect_ok "published.py --help says an explained miss passes --check" \
  sh -c 'python3 cluster/published.py --help | tr -s " \n" " " | grep -q "an explained miss beyond PP passes"'
expect_ok "README.md holds published.py's tables as they are now" \
  python3 -c "import sys; t = open('README.md').read(); sys.exit(any(l not in t for l in open('$TMP/published.md') if l.startswith('|')))"
[ "$failures" = 0 ] || { echo "$failures check(s) failed"; exit 1; }
