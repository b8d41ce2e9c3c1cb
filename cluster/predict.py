#!/usr/bin/env python3
"""cluster/scaling.sh --predict: the step, exposed communication and weak-scaling efficiency of
measured step profiles on described clusters, 1 to 1,024 GPUs (docs/scaling.md; the model is
cluster/step_model.py).

  cluster/scaling.sh --predict --profile P.json [--profile ...] --cluster C.cluster [--cluster ...]
      [--gpus "1 2 4 ..."] [--bucket-mb "25 100"] [--first-bucket-mb 1] [--accum K] [--no-overlap]
      [--out DIR]

--gpus defaults to 1, 2, 4, ... up to a node, then whole nodes doubling up to 1,024 GPUs (a count
that does not fill whole nodes is an error). Writes DIR/predict.csv, predict.md (efficiency per
GPU count, one row per profile, cluster and bucket size) and, with gnuplot, predict.png; prints
the table. DIR defaults to runs/scaling-predict under the current directory (the committed
predictions for the presets are in bench/results/scaling-predict). --accum K: K micro-batches a
step (train.accum_steps), the buckets sent by the last.
Exit 2 with one line for a bad option, cluster file or profile, or an output it cannot write.
"""
import argparse, csv, os, subprocess, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_model as sm  # noqa: E402


def counts(cluster, limit=1024):
    """1, 2, 4, ... within a node, the node itself, then whole nodes doubling, up to limit."""
    g = cluster.gpus_per_node
    inside = [2**i for i in range(11) if 2**i < g]
    return [n for n in inside + [g * 2**i for i in range(11)] if n <= limit]


def positive_list(text, what, kind):
    try:
        vals = [kind(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise sm.ModelError(f"{what} '{text}': give numbers") from None
    if not vals or not all(0 < v <= 1e6 for v in vals):  # (nan and inf fail too)
        raise sm.ModelError(f"{what} '{text}': give one or more numbers above 0, at most 1e6")
    return vals


def run(a):
    profiles = [sm.load_profile(p) for p in a.profile]
    clusters = [sm.load_cluster(c) for c in a.cluster]
    for what, names in (("profile", [p["name"] for p in profiles]), ("cluster", [c.name for c in clusters])):
        twice = sorted({x for x in names if names.count(x) > 1})
        if twice:
            raise sm.ModelError(f"two {what}s are named '{twice[0]}': the table could not tell them apart")
    buckets = positive_list(a.bucket_mb, "--bucket-mb", float)
    first = positive_list(a.first_bucket_mb, "--first-bucket-mb", float)
    if len(first) != 1:
        raise sm.ModelError(f"--first-bucket-mb '{a.first_bucket_mb}': give one size")
    first = first[0]
    accum = positive_list(a.accum, "--accum", int)
    if len(accum) != 1:
        raise sm.ModelError(f"--accum '{a.accum}': give one count")
    accum = accum[0]
    rows = []
    for c in clusters:
        gpus = positive_list(a.gpus, "--gpus", int) if a.gpus else counts(c)
        for p in profiles:
            for b in buckets:
                base = sm.predict_step(p, c, 1, b, first, not a.no_overlap, accum)
                for n in gpus:
                    s = sm.predict_step(p, c, n, b, first, not a.no_overlap, accum)
                    rows.append(dict(profile=p["name"], cluster=c.name, bucket_mb=b, gpus=n,
                                     step_ms=s.step_ms, exposed_ms=s.exposed_ms, comm_ms=s.comm_ms,
                                     efficiency=base.step_ms / s.step_ms,
                                     algorithms=" ".join(f"{k}:{v}" for k, v in sorted(s.algorithms.items()))))
    try:
        write(rows, profiles, clusters, a)
    except OSError as e:
        raise sm.ModelError(f"--out {a.out}: {e.strerror}") from None


def write(rows, profiles, clusters, a):
    os.makedirs(a.out, exist_ok=True)
    with open(f"{a.out}/predict.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows({k: f"{v:.4f}" if isinstance(v, float) else v for k, v in r.items()} for r in rows)
    table = markdown(rows, profiles, clusters, a)
    with open(f"{a.out}/predict.md", "w") as f:
        f.write(table)
    print(table, end="")
    plot(rows, a.out)


def markdown(rows, profiles, clusters, a):
    out = [f"Predicted weak-scaling efficiency (cluster/scaling.sh --predict; overlap "
           f"{'off' if a.no_overlap else 'on'}, first bucket {a.first_bucket_mb} MiB)\n"]
    keys = []
    for r in rows:
        k = (r["profile"], r["cluster"], r["bucket_mb"])
        if k not in keys:
            keys.append(k)
    for c in clusters:
        mine = [k for k in keys if k[1] == c.name]
        gpus = sorted({r["gpus"] for r in rows if r["cluster"] == c.name})
        out.append(f"\n{c.name}: {c.gpus_per_node} GPU(s) a node, {c.intra.gbs:g} GB/s inside, "
                   f"{c.nics_per_node} x {c.inter.gbs:g} GB/s NICs, {' '.join(c.algorithms)}\n\n")
        out.append("| profile | step ms (1 GPU) | bucket MiB | " + " | ".join(str(g) for g in gpus) + " |\n")
        out.append("|---|---:|---:|" + "---:|" * len(gpus) + "\n")
        for k in mine:
            cells = {r["gpus"]: r for r in rows if (r["profile"], r["cluster"], r["bucket_mb"]) == k}
            one = [p for p in profiles if p["name"] == k[0]][0]
            step1 = sm.predict_step(one, c, 1, accum=int(a.accum)).step_ms
            out.append(f"| {k[0]} | {step1:.2f} | {k[2]:g} | " +
                       " | ".join(f"{cells[g]['efficiency']:.2f}" for g in gpus) + " |\n")
    return "".join(out)


def plot(rows, out):
    """predict.png: efficiency against GPUs, a panel per cluster, a line per profile and bucket
    size."""
    if subprocess.run(["sh", "-c", "command -v gnuplot"], capture_output=True).returncode:
        print("scaling: gnuplot not found: no predict.png (launch/deps.sh gnuplot-nox)", file=sys.stderr)
        return
    clusters = list(dict.fromkeys(r["cluster"] for r in rows))
    title = lambda s: s.replace("'", "").replace("_", "\\\\_")
    quoted = lambda path: "'" + path.replace("'", "''") + "'"  # gnuplot: a quote written twice
    panels, blocks = [], []
    for c in clusters:
        series = list(dict.fromkeys(f"{r['profile']}, {r['bucket_mb']:g} MiB" for r in rows if r["cluster"] == c))
        lines = []
        for sname in series:
            pts = [(r["gpus"], r["efficiency"]) for r in rows
                   if r["cluster"] == c and f"{r['profile']}, {r['bucket_mb']:g} MiB" == sname]
            lines.append(f"{quoted(out + '/predict.dat')} index {len(blocks)} with linespoints lw 2 title '{title(sname)}'")
            blocks.append("".join(f"{g} {e:.4f}\n" for g, e in pts))
        low = min(r["efficiency"] for r in rows if r["cluster"] == c)
        panels.append(f"set title '{title(c)}'; set yrange [{max(0.0, low - 0.03):.2f}:1.01]; "
                      f"plot {', '.join(lines)}")
    with open(f"{out}/predict.dat", "w") as f:
        f.write("\n\n".join(blocks))
    script = (f"set terminal pngcairo size 1000,{330 * len(clusters)} font ',9'; set output {quoted(out + '/predict.png')}; "
              f"set multiplot layout {len(clusters)},1 title 'Predicted weak-scaling efficiency'; "
              "set xlabel 'GPUs'; set ylabel 'efficiency'; set logscale x 2; set grid; "
              "set key outside right; " + "; ".join(panels) + "; unset multiplot")
    done = subprocess.run(["gnuplot", "-e", script], capture_output=True, text=True)
    os.unlink(f"{out}/predict.dat")
    if done.returncode:
        print(f"scaling: gnuplot failed, no predict.png: {(done.stderr.strip().splitlines() or ['?'])[-1]}",
              file=sys.stderr)


def main():
    p = argparse.ArgumentParser(prog="cluster/scaling.sh --predict", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--profile", action="append", required=True)
    p.add_argument("--cluster", action="append", required=True)
    p.add_argument("--gpus")
    p.add_argument("--bucket-mb", default="25")
    p.add_argument("--first-bucket-mb", default="1")
    p.add_argument("--accum", default="1")
    p.add_argument("--no-overlap", action="store_true")
    p.add_argument("--out", default="runs/scaling-predict")
    a = p.parse_args()
    try:
        run(a)
    except sm.ModelError as e:
        print(f"scaling: {e}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
