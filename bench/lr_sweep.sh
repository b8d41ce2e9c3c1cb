#!/usr/bin/env bash
# Issue 16's sweep: does every opt level train wherever O0 trains? Trains each preset at each
# learning rate at O0, O1 (fp16), O2 (fp16 and bf16) and O3 (fp16) for a few hundred steps with
# the shipped MLP config's optimizer (SGD, Nesterov momentum 0.9, weight decay 5e-4, cosine over
# the run) on Fashion-MNIST, for several seeds, and prints each level's training loss (the mean
# of the last 50 steps, averaged over the seeds) next to O0's, with a verdict:
#   within  |level - O0| <= margin, margin = max(0.05, 2 standard errors of the difference of
#           the two means over the seeds): the seeds' own spread decides what "the same" is;
#   worse / better  outside it.
# At lr 0.1 without warm-up a network with BatchNorm goes through a loss spike in its first
# steps, and which way a run then goes depends on rounding in the last bit: single runs of the
# same level differ by more than levels do, hence several seeds (see
# docs/mixed-precision.md).
# Usage: bench/lr_sweep.sh [PRESET...] [-- extra mpdist args]   (PRESET: mlp, cnn, cnn_bn, ...)
# Environment: MPDIST_SWEEP_SEEDS ("42 1 2"), MPDIST_SWEEP_LRS ("0.02 0.05 0.1"),
# MPDIST_SWEEP_STEPS (300), MPDIST_SWEEP_BATCH (128, per rank), MPDIST_SWEEP_RANKS (1),
# MPDIST_SWEEP_JOBS (runs at once; default: cores / ranks), MPDIST_SWEEP_RESUME=1 (keep the runs
# of an earlier sweep in the same folder that ended with exit 0). Output: runs/bench-sweep/
# (sweep.csv: one row per run; table.txt, table.csv: the table).
# Packages are checked, not installed (launch/deps.sh --check: exit 2 and the command to run).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
# the settings first: a bad one is refused before anything is checked or built
read -r -a seeds <<<"${MPDIST_SWEEP_SEEDS:-42 1 2}"
read -r -a lrs <<<"${MPDIST_SWEEP_LRS:-0.02 0.05 0.1}"
steps=${MPDIST_SWEEP_STEPS:-300}
batch=${MPDIST_SWEEP_BATCH:-128}
np=${MPDIST_SWEEP_RANKS:-1}
bad() { echo "lr_sweep: $1 (got '${2:0:100}')" >&2; exit 2; }
[[ $np =~ ^[1-9][0-9]{0,5}$ ]] || bad "MPDIST_SWEEP_RANKS must be a whole number >= 1" "$np"
[[ $steps =~ ^[1-9][0-9]{0,8}$ ]] || bad "MPDIST_SWEEP_STEPS must be a whole number >= 1" "$steps"
[[ $batch =~ ^[1-9][0-9]{0,8}$ ]] || bad "MPDIST_SWEEP_BATCH must be a whole number >= 1" "$batch"
[ ${#seeds[@]} -gt 0 ] || bad "MPDIST_SWEEP_SEEDS must list at least one seed" "${MPDIST_SWEEP_SEEDS:-}"
for v in "${seeds[@]}"; do [[ $v =~ ^[0-9]{1,18}$ ]] || bad "MPDIST_SWEEP_SEEDS: a seed is a whole number below 10^18" "$v"; done
[ ${#lrs[@]} -gt 0 ] || bad "MPDIST_SWEEP_LRS must list at least one learning rate" "${MPDIST_SWEEP_LRS:-}"
for v in "${lrs[@]}"; do
  [[ $v =~ ^[0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?$ ]] && awk -v v="$v" 'BEGIN { exit !(v > 0) }' ||
    bad "MPDIST_SWEEP_LRS: a learning rate is a number > 0" "$v"
done
jobs=${MPDIST_SWEEP_JOBS:-$(( $(nproc) / np > 0 ? $(nproc) / np : 1 ))}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "lr_sweep: MPDIST_SWEEP_JOBS must be a whole number >= 1 (got '$jobs')" >&2; exit 2; }
bash launch/deps.sh --check
source bench/common.bash # bench_build: MPDIST_BENCH_BUILD, or build made by launch/build.sh
bench_build
source launch/env.sh
presets=(); while [ $# -gt 0 ] && [ "$1" != -- ]; do presets+=("$1"); shift; done
[ "${1:-}" = -- ] && shift
[ ${#presets[@]} -gt 0 ] || presets=(mlp cnn cnn_bn)
out=runs/bench-sweep
mkdir -p "$out"
levels=("O0 fp16" "O1 fp16" "O2 fp16" "O2 bf16" "O3 fp16")
list=$out/runs.txt
: >"$list"
for p in "${presets[@]}"; do for lr in "${lrs[@]}"; do for s in "${seeds[@]}"; do
  for l in "${levels[@]}"; do echo "$p $lr $s $l" >>"$list"; done
done; done; done
echo "bench: $(wc -l <"$list") runs of $steps steps, $jobs at a time, in $out"
export np batch steps out build
: >"$out/extra.args"
[ $# -eq 0 ] || printf '%s\0' "$@" >"$out/extra.args"
run_one() {
  set -- $1
  local tag="$1-lr$2-s$3-$4-$5" rc=0
  [ "${MPDIST_SWEEP_RESUME:-0}" != 1 ] || [ "$(cat "$out/$tag.rc" 2>/dev/null)" != 0 ] || return 0
  local extra=(); while IFS= read -r -d '' a; do extra+=("$a"); done <"$out/extra.args"
  mpirun -np "$np" "$build/mpdist" configs/fashion-mnist-mlp.cfg --set "model.preset=$1" \
    --set "optim.lr=$2" --set "train.seed=$3" --set "amp.opt_level=$4" --set "amp.half=$5" \
    --set "data.batch_size=$batch" --set "train.max_steps=$steps" --set log.every=1 \
    --set train.eval_every=0 --set log.progress=none --set "log.metrics=\"$out/$tag.jsonl\"" \
    "${extra[@]}" >"$out/$tag.log" 2>&1 || rc=$?
  echo "$rc" >"$out/$tag.rc"
}
export -f run_one
tr '\n' '\0' <"$list" | xargs -0 -P "$jobs" -I{} bash -c 'run_one "$1"' _ {}
python3 - "$out" "$list" <<'EOF'
import json, math, os, sys
out, lst = sys.argv[1], sys.argv[2]
rows = []
for line in open(lst):
    p, lr, s, lvl, half = line.split()
    tag = f"{p}-lr{lr}-s{s}-{lvl}-{half}"
    rc = open(f"{out}/{tag}.rc").read().strip()
    steps, summ = [], {}
    if os.path.exists(f"{out}/{tag}.jsonl"):
        for l in open(f"{out}/{tag}.jsonl"):
            r = json.loads(l)
            if r["type"] == "step": steps.append(r)
            elif r["type"] == "summary": summ = r
    last = steps[-50:]
    finite = last and rc == "0" and all(isinstance(r["loss"], (int, float)) for r in last)
    loss = sum(r["loss"] for r in last) / len(last) if finite else float("nan")  # null: NaN/inf
    rows.append(dict(preset=p, lr=lr, seed=s, level=lvl, half=half, rc=rc, loss=loss,
                     loss_end=steps[-1]["loss"] if steps else float("nan"),
                     skipped=sum(r["skipped"] for r in steps),
                     accuracy=summ.get("accuracy", float("nan")),
                     scale=steps[-1]["loss_scale"] if steps else float("nan")))
with open(f"{out}/sweep.csv", "w") as f:
    keys = list(rows[0])
    f.write(",".join(keys) + "\n")
    for r in rows: f.write(",".join(str(r[k]) for k in keys) + "\n")
def stats(v):
    n = len(v); m = sum(v) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (n - 1)) if n > 1 else 0.0
    return m, sd, n
groups = {}
for r in rows: groups.setdefault((r["preset"], r["lr"], r["level"], r["half"]), []).append(r)
hdr = ("preset", "lr", "level", "loss", "O0", "diff", "margin", "min", "max", "skipped", "accuracy", "verdict")
lines = [hdr]
for (p, lr, lvl, half), rs in groups.items():
    ok = [r for r in rs if r["rc"] == "0" and not math.isnan(r["loss"])]
    base = [r["loss"] for r in groups[(p, lr, "O0", "fp16")]
            if r["rc"] == "0" and not math.isnan(r["loss"])]
    name = lvl if lvl == "O0" else f"{lvl} {half}"
    if len(ok) < len(rs) or not base:
        bad = ([r for r in rs if r not in ok] or groups[(p, lr, "O0", "fp16")])[0]
        why = f"exit {bad['rc']}" if bad["rc"] != "0" else "loss not finite"
        whose = ", O0" if len(ok) == len(rs) else ""
        lines.append((p, lr, name, "-", "-", "-", "-", "-", "-", "-", "-",
                      f"{why} (seed {bad['seed']}{whose})"))
        continue
    m, sd, n = stats([r["loss"] for r in ok]); bm, bsd, bn = stats(base)
    margin = max(0.05, 2 * math.sqrt(sd * sd / n + bsd * bsd / bn))
    d = m - bm
    verdict = "-" if lvl == "O0" else "within" if abs(d) <= margin else "worse" if d > 0 else "better"
    acc = sum(r["accuracy"] for r in ok) / n
    lines.append((p, lr, name, f"{m:.3f}", f"{bm:.3f}", f"{d:+.3f}", f"{margin:.3f}",
                  f"{min(r['loss'] for r in ok):.3f}", f"{max(r['loss'] for r in ok):.3f}",
                  str(sum(r["skipped"] for r in ok)), f"{acc:.4f}", verdict))
with open(f"{out}/table.csv", "w") as f:
    for l in lines: f.write(",".join(l) + "\n")
w = [max(len(l[i]) for l in lines) for i in range(len(hdr))]
with open(f"{out}/table.txt", "w") as f:
    for l in lines: f.write("  ".join(c.ljust(w[i]) for i, c in enumerate(l)).rstrip() + "\n")
print(open(f"{out}/table.txt").read(), end="")
EOF
echo "(loss: mean of the last 50 steps' training loss, averaged over seeds ${seeds[*]}; min/max over the seeds; skipped: steps over all seeds; accuracy: test accuracy after the last step, mean over seeds)"
ok=0 # this sweep's runs only (the folder may hold an earlier one's)
while read -r p lr s lvl half; do
  [ "$(cat "$out/$p-lr$lr-s$s-$lvl-$half.rc" 2>/dev/null)" != 0 ] || ok=1
done <"$list"
[ "$ok" = 1 ] || { echo "lr_sweep: every run failed (their logs: $out/*.log)" >&2; exit 1; }
