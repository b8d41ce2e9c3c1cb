#!/usr/bin/env python3
"""The sweep logic of bench/cpu_speed.sh: which settings go on, which one won, and the ratios of
the winners, from the runs in raw.csv. Needs no torch.

raw.csv has a header and one row per run:
  model,stage,round,framework,setting,status,samples_per_s,tokens_per_s,final_loss,test_loss,version,log
stage is "screen" (round 0: every setting of the grid once, and the fast paths tried on the
best of them) or "round" (rounds 1..R: the finalists of every framework, side by side). A run's
rate is tokens_per_s for gpt, samples_per_s otherwise; a failed run (status other than "ok")
has none.

The rules:
  best-screened  the screened setting with the highest rate (ties: the earlier run).
  finalists      the K screened settings with the highest rates, best first.
  best           the finalist with the highest median over the rounds (ties: the higher
                 screening rate); a finalist that failed in any round cannot win.
  ratio A/B      of two frameworks' bests: the median over the rounds of A's rate / B's rate
                 in the same round (the runs of a round are side by side).
  best PyTorch   of the peers in FP32 (frameworks named pytorch-*), the one whose best has the
                 higher median; the goals are checked against it.
  best PyTorch AMP  the same of the peers under autocast to bf16 (pytorch-*-amp-bf16, when
                 bf16 levels ran): each bf16 level's ratio to it is in the table (no goal).

Commands:
  best-screened RAW MODEL FRAMEWORK       prints that setting (exit 1: no good run)
  rate RAW MODEL FRAMEWORK SETTING        prints its screening rate (exit 1: none)
  finalists RAW MODEL FRAMEWORK K         prints them, one a line
  report RAW OUTDIR                       writes OUTDIR/table.md (printed too), OUTDIR/settings.csv
                                          (every setting's screening rate and its rounds' median,
                                          min and max) and OUTDIR/goals.txt; exit 1 when a goal
                                          is missed or a run failed
Goals (report): mlp, cnn_bn and resnet20: mpdist O0 >= 1.3x the best PyTorch (issue 21);
cnn_bn and resnet20: every half level >= 0.85x O0 (issue 21); gpt and vit: O0 >= 1.3x the best
PyTorch and O2 bf16 >= 1.0x O0 (issue 49).
"""
import csv
import os
import statistics
import sys

MODELS = ("mlp", "cnn_bn", "resnet20", "gpt", "vit")
HALF_GOAL = {"cnn_bn": 0.85, "resnet20": 0.85}
PEER_GOAL = {"mlp": 1.3, "cnn_bn": 1.3, "resnet20": 1.3, "gpt": 1.3, "vit": 1.3}


def fail(msg, code=2):
    print("cpu_sweep: " + msg, file=sys.stderr)
    sys.exit(code)


def read_runs(path):
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        fail("%s: %s" % (path, e.strerror))
    for r in rows:
        col = "tokens_per_s" if r["model"] == "gpt" else "samples_per_s"
        r["rate"] = float(r[col]) if r["status"] == "ok" and r[col] not in ("", None) else None
        r["round"] = int(r["round"])
    return rows


def screened(rows, model, fw):
    """[(setting, rate)] of the screening runs, in run order; failed runs have rate None."""
    return [(r["setting"], r["rate"]) for r in rows
            if r["model"] == model and r["framework"] == fw and r["stage"] == "screen"]


def finalists(rows, model, fw, k):
    good = [(s, v) for s, v in screened(rows, model, fw) if v is not None]
    order = sorted(range(len(good)), key=lambda i: (-good[i][1], i))
    out = []
    for i in order:
        if good[i][0] not in out:
            out.append(good[i][0])
    return out[:k]


def round_rates(rows, model, fw, setting):
    """{round: rate or None} of the setting's runs in the rounds."""
    return {r["round"]: r["rate"] for r in rows
            if r["model"] == model and r["framework"] == fw and r["setting"] == setting
            and r["stage"] == "round"}


class Best:
    """A framework's winning setting on one model, with its rounds' rates."""

    def __init__(self, fw, setting, rates, version, row):
        self.fw, self.setting, self.rates, self.version, self.row = fw, setting, rates, version, row
        good = [v for v in rates.values() if v is not None]
        self.median = statistics.median(good) if good else None
        self.lo = min(good) if good else None
        self.hi = max(good) if good else None


def best_of(rows, model, fw):
    """The framework's best (Best), or None when no setting ran every round."""
    runs = [r for r in rows if r["model"] == model and r["framework"] == fw and r["stage"] == "round"]
    settings = []
    for r in runs:
        if r["setting"] not in settings:
            settings.append(r["setting"])
    screen = dict((s, v) for s, v in screened(rows, model, fw) if v is not None)
    cands = []
    for s in settings:
        rates = round_rates(rows, model, fw, s)
        if rates and all(v is not None for v in rates.values()):
            cands.append((statistics.median(rates.values()), screen.get(s, 0.0), s, rates))
    if not cands:
        return None
    cands.sort(key=lambda c: (-c[0], -c[1]))
    _, _, s, rates = cands[0]
    last = [r for r in runs if r["setting"] == s and r["status"] == "ok"][-1]
    return Best(fw, s, rates, last.get("version", ""), last)


def ratio(a, b):
    """Median over the rounds both ran of a's rate / b's rate, or None."""
    if a is None or b is None:
        return None
    q = [a.rates[r] / b.rates[r] for r in a.rates
         if r in b.rates and a.rates[r] is not None and b.rates[r]]
    return statistics.median(q) if q else None


def fmt_rate(v):
    return "failed" if v is None else "%.0f" % v


def fmt_ratio(v):
    return "-" if v is None else "%.2f" % v


def report(raw, outdir):
    rows = read_runs(raw)
    models = [m for m in MODELS if any(r["model"] == m for r in rows)]
    fws = []
    for r in rows:
        if r["framework"] not in fws:
            fws.append(r["framework"])
    levels = [f for f in fws if f.startswith("mpdist-")]
    amps = [f for f in fws if f.startswith("pytorch-") and f.endswith("-amp-bf16")]
    peers = [f for f in fws if f.startswith("pytorch-") and f not in amps]
    halves = [f for f in levels if f != "mpdist-O0"]
    bf16s = [h for h in halves if h.endswith("-bf16")] if amps else []
    lines, goals, settings_rows = [], [], []
    rounds = max([r["round"] for r in rows] + [0])
    lines.append("Each framework at its best setting: the best of the finalists (the top screened "
                 "settings), median over %d rounds, alternating; ratios of the bests are the "
                 "median of the rounds' ratios." % rounds)
    lines.append("")
    cols = ([f.replace("mpdist-", "") for f in levels] +
            ["PyTorch %s" % p.replace("pytorch-", "") for p in peers + amps] + ["O0/best PyTorch"] +
            ["%s/O0" % h.replace("mpdist-", "") for h in halves] +
            ["%s/best PyTorch AMP" % h.replace("mpdist-", "") for h in bf16s])
    lines.append("| model | unit | " + " | ".join(cols) + " |")
    lines.append("|---|---|" + "---:|" * len(cols))
    detail = []
    for m in models:
        unit = "tokens/s" if m == "gpt" else "images/s"
        bests = {f: best_of(rows, m, f) for f in fws}
        def fastest(names):
            done = [bests[p] for p in names if bests[p] is not None and bests[p].median is not None]
            return max(done, key=lambda b: b.median) if done else None
        top, top_amp = fastest(peers), fastest(amps)
        o0 = bests.get("mpdist-O0")
        r0 = ratio(o0, top)
        cells = ([fmt_rate(bests[f] and bests[f].median) for f in levels + peers + amps] +
                 [fmt_ratio(r0)] + [fmt_ratio(ratio(bests[h], o0)) for h in halves] +
                 [fmt_ratio(ratio(bests[h], top_amp)) for h in bf16s])
        lines.append("| %s | %s | " % (m, unit) + " | ".join(cells) + " |")
        detail.append("")
        detail.append("%s (%s): the winning setting of each framework, its median [min, max] "
                      "over the rounds, and its ratio to the best PyTorch (%s):" %
                      (m, unit, top.fw if top else "none ran"))
        detail.append("")
        detail.append("| framework | version | best setting | %s | range | vs best PyTorch | final (test) loss |" % unit)
        detail.append("|---|---|---|---:|---|---:|---|")
        for f in fws:
            b = bests[f]
            if b is None:
                detail.append("| %s | | no setting ran every round | failed | | - | |" % f)
                continue
            loss = "%.4f (%.4f)" % (float(b.row["final_loss"] or "nan"), float(b.row["test_loss"] or "nan"))
            detail.append("| %s | %s | %s | %s | [%s, %s] | %s | %s |" % (
                f, b.version, b.setting, fmt_rate(b.median), fmt_rate(b.lo), fmt_rate(b.hi),
                fmt_ratio(ratio(b, top)) if f != (top and top.fw) else "1.00", loss))
        for f in fws:
            seen = []
            for s, v in screened(rows, m, f):
                if s in seen:
                    continue
                seen.append(s)
                rr = [x for x in round_rates(rows, m, f, s).values() if x is not None]
                settings_rows.append([m, f, s, "" if v is None else "%.6g" % v,
                                      "%.6g" % statistics.median(rr) if rr else "",
                                      "%.6g" % min(rr) if rr else "", "%.6g" % max(rr) if rr else "",
                                      len(rr), int(bool(round_rates(rows, m, f, s))),
                                      int(bests[f] is not None and bests[f].setting == s)])
        # goals
        if m in PEER_GOAL:
            g = PEER_GOAL[m]
            goals.append(goal("%s: mpdist O0 >= %.1fx the best PyTorch's %s" % (m, g, unit), r0, g))
        for h in halves:
            if m in HALF_GOAL:
                goals.append(goal("%s: %s >= %.2fx O0" % (m, h.replace("mpdist-", ""), HALF_GOAL[m]),
                                  ratio(bests[h], o0), HALF_GOAL[m]))
            elif m in ("gpt", "vit") and h == "mpdist-O2-bf16":
                goals.append(goal("%s: O2-bf16 >= 1.0x O0" % m, ratio(bests[h], o0), 1.0))
    text = "\n".join(lines + detail) + "\n"
    os.makedirs(outdir, exist_ok=True)
    with open(os.path.join(outdir, "table.md"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "settings.csv"), "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["model", "framework", "setting", "screen_rate", "rounds_median", "rounds_min",
                    "rounds_max", "rounds", "finalist", "best"])
        w.writerows(settings_rows)
    with open(os.path.join(outdir, "goals.txt"), "w") as f:
        f.write("".join(g + "\n" for g in goals))
    sys.stdout.write(text)
    print()
    for g in goals:
        print(g)
    failed = [r for r in rows if r["status"] != "ok"]
    for r in failed:
        print("cpu_sweep: %s %s round %d %s [%s]: %s (%s)" % (r["model"], r["stage"], r["round"],
              r["framework"], r["setting"], r["status"], r["log"]), file=sys.stderr)
    return 1 if failed or any(g.startswith("FAIL") for g in goals) else 0


def goal(text, value, want):
    if value is None:
        return "FAIL %s: not measured (a run failed)" % text
    return "%s %s (%.2fx)" % ("PASS" if value >= want else "FAIL", text, value)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    cmd, args = argv[1], argv[2:]
    if cmd == "best-screened" and len(args) == 3:
        fin = finalists(read_runs(args[0]), args[1], args[2], 1)
        if not fin:
            return 1
        print(fin[0])
        return 0
    if cmd == "rate" and len(args) == 4:
        v = [x for s, x in screened(read_runs(args[0]), args[1], args[2]) if s == args[3] and x is not None]
        if not v:
            return 1
        print("%.6g" % max(v))
        return 0
    if cmd == "finalists" and len(args) == 4:
        for s in finalists(read_runs(args[0]), args[1], args[2], int(args[3])):
            print(s)
        return 0
    if cmd == "report" and len(args) == 2:
        return report(args[0], args[1])
    fail("usage: cpu_sweep.py best-screened|rate|finalists|report ... (--help)")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
