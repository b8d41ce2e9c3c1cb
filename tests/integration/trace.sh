#!/usr/bin/env bash
# The timeline (issue 51, log.trace): 2 ranks x 20 steps of the MLP with two gradient buckets
# write one valid trace-event JSON file per rank; on every rank each step holds its forward and
# backward spans of every layer and both buckets' all-reduces, from their start to their end,
# inside the step's span; the same step's spans of the two ranks overlap (one clock);
# bench/trace_merge.py joins the ranks into one file, and reads a rank file cut short (a crash)
# up to its last whole event; a later run with fewer ranks removes the extra ranks' files; a run
# without log.trace writes nothing; a log.trace that cannot be created exits 2 with one line, as
# does one whose rank file holds another program's file, and a log.metrics the trace would write.
source "$(dirname "$0")/common.bash"
cd "$TMP"
CFG=$SRC/configs/fashion-mnist-mlp.cfg
ARGS=(--set train.max_steps=20 --set data.train_limit=4096 --set data.test_limit=500
      --set log.progress='"none"' --set comm.bucket_mb=0.25 --set comm.first_bucket_mb=0.1)
timeout 120 mpirun -np 2 "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/tr\"" >out 2>&1 ||
  { echo "FAIL: the traced run"; cat out; exit 1; }
expect_ok "rank 0 says where the trace is" grep -q "^trace: $TMP/tr/rank-\*.json (clocks aligned" out
expect_ok "each rank's file, each step's spans, the buckets inside their steps" \
  /usr/bin/python3 - "$TMP/tr" <<'P'
import json, sys
d, ok = sys.argv[1], True
def fail(msg):
    global ok
    print("   ", msg)
    ok = False
steps_of = {}
for r in (0, 1):
    ev = json.load(open(f"{d}/rank-{r}.json"))  # a valid JSON array
    spans = [e for e in ev if e.get("ph") == "X"]
    if any(e["pid"] != r for e in ev):
        fail(f"rank {r}: an event of another pid")
    steps = sorted((e for e in spans if e["name"] == "step"), key=lambda e: e["ts"])
    if [e["args"]["step"] for e in steps] != list(range(20)):
        fail(f"rank {r}: steps {[e['args']['step'] for e in steps]}")
    steps_of[r] = steps
    inside = lambda e, s: s["ts"] - 1 <= e["ts"] and e["ts"] + e["dur"] <= s["ts"] + s["dur"] + 1
    for s in steps:
        held = [e for e in spans if e is not s and inside(e, s)]
        names = {(e["name"], e["cat"]) for e in held}
        want = {(f"{l} (linear)", ph) for l in ("fc1", "fc2", "fc3") for ph in ("forward", "backward")}
        want |= {("optimizer", "step"), ("data", "step"), ("gradient sync wait", "step")}
        if not want <= names:
            fail(f"rank {r} step {s['args']['step']}: missing {sorted(want - names)}")
        buckets = [e for e in held if e["cat"] == "collective" and "gradient bucket" in e["name"]
                   and e["tid"] == 1]
        if sorted(e["name"][:31] for e in buckets) != ["allreduce of gradient bucket 1/",
                                                      "allreduce of gradient bucket 2/"]:
            fail(f"rank {r} step {s['args']['step']}: buckets {[e['name'] for e in buckets]}")
    allb = [e for e in spans if e["cat"] == "collective" and "gradient bucket" in e["name"]]
    if len(allb) != 40:
        fail(f"rank {r}: {len(allb)} bucket collectives, not 2 per step")
for a, b in zip(steps_of[0], steps_of[1]):
    if a["ts"] > b["ts"] + b["dur"] or b["ts"] > a["ts"] + a["dur"]:
        fail(f"step {a['args']['step']}: the ranks' spans do not overlap ({a['ts']}, {b['ts']})")
sys.exit(not ok)
P
/usr/bin/python3 "$SRC/bench/trace_merge.py" "$TMP/tr" >merge.out 2>&1
expect_ok "trace_merge: 2 ranks joined ($(cat merge.out))" /usr/bin/python3 -c "
import json, sys
t = json.load(open('$TMP/tr/trace.json'))['traceEvents']
sys.exit(not ({e['pid'] for e in t} == {0, 1} and sum(e['name'] == 'step' for e in t) == 40))"
head -c -5000 "$TMP/tr/rank-1.json" >cut.json && mkdir cut && mv cut.json cut/rank-1.json
cp "$TMP/tr/rank-0.json" cut/
expect_ok "a rank file cut short is read up to its last whole event" bash -c \
  "/usr/bin/python3 '$SRC/bench/trace_merge.py' cut | grep -q 'cut short: rank-1.json'"

touch before-plain
timeout 120 mpirun -np 2 "$MPDIST" "$CFG" "${ARGS[@]}" >plain.out 2>&1
expect_ok "without log.trace: no trace line, nothing written" \
  bash -c "! grep -q '^trace:' plain.out && [ -z \"\$(find . -newer before-plain -name 'rank-*.json')\" ]"
# a 1-rank run into the 2-rank run's directory: rank-1.json goes (trace_merge would join it)
touch tr/rank-9.jsonx tr/rank-x.json tr/rank-05.json tr/rank-+5.json
timeout 120 "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/tr\"" >one.out 2>&1 ||
  { echo "FAIL: the 1-rank traced run"; cat one.out; exit 1; }
expect_ok "a 1-rank run removes the earlier run's rank-1.json and says so, other names left" \
  bash -c "grep -q '; removed 1 rank file(s) of an earlier run with more ranks$' one.out &&
           [ \"\$(cd tr && LC_ALL=C ls | paste -sd' ')\" = 'rank-+5.json rank-0.json rank-05.json rank-9.jsonx rank-x.json trace.json' ]"
touch notadir
expect_exit 2 "log.trace: cannot create directory $TMP/notadir" \
  "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/notadir/x\""
mkdir fifos && mkfifo fifos/rank-0.json # nobody reads it: refused at once (the open used to wait)
expect_exit 2 "log.trace: cannot create $TMP/fifos/rank-0.json \(a FIFO that no process reads \(start the reader first\)\)" \
  "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/fifos\""
# Nothing of another program's is written over or removed (before 2026-12-03 the trace replaced
# any rank-R.json, through a link too, and log.metrics named as a rank file was lost to it):
mkdir guard && echo precious >guard/precious.txt && ln -s precious.txt guard/rank-0.json
echo mine >guard/rank-1.json
expect_exit 2 "log.trace: $TMP/guard/rank-0.json holds something other than mpdist's trace and is left as it is" \
  "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/guard\""
rm guard/rank-0.json
timeout 120 "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/guard\"" >guard.out 2>&1 ||
  { echo "FAIL: the traced run beside a foreign rank-1.json"; cat guard.out; exit 1; }
expect_ok "a larger run's rank file that holds no trace is left" \
  bash -c "[ \"\$(cat guard/precious.txt guard/rank-1.json | paste -sd' ')\" = 'precious mine' ] && ! grep -q removed guard.out"
expect_exit 2 "log.metrics: $TMP/same/\.\./same/rank-0.json is a rank file's name in log.trace $TMP/same, which the trace writes" \
  "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/same\"" --set "log.metrics=\"$TMP/same/../same/rank-0.json\""
expect_exit 2 "log.metrics: $TMP/same2 is log.trace's directory: name a file outside it" \
  "$MPDIST" "$CFG" "${ARGS[@]}" --set "log.trace=\"$TMP/same2\"" --set "log.metrics=\"$TMP/same2\""
finish
