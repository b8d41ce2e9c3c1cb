#!/usr/bin/env python3
"""Tables for cluster/scaling.sh, and its scaling model.

Reads the summary record of each run (runs/OPT-N.jsonl, or runs/OPT-N.slurm/metrics.jsonl for
submitted runs) and writes scaling.csv and scaling.md (throughput from the time spent in
training steps, speedup and efficiency against the smallest rank count, and the time per step
split into compute, exposed communication and input wait). A requeued job's summary times only
its last start: scaling.csv's steps are the steps of that start, the ones step_s (their seconds)
and the per-step columns cover.

The model: a data-parallel step on n ranks takes the single-rank compute and input time plus
the ring all-reduce of the gradients that backward does not hide. For G gradient bytes in
k buckets over links of bandwidth B and latency L, a ring all-reduce takes
    t(n) = 2 (n - 1) k L + 2 (n - 1) / n * G / B,
and with no overlap assumed (the worst case; mpdist hides part of it behind backward) weak
scaling has efficiency t1 / (t1 + t(n)), and strong scaling divides t1 by n first. model.md
gives the predictions at 8, 64 and 512 ranks for the link given (--link-gbs, --link-us), and,
to check the model where it can be checked, its predictions for the measured rank counts with
the link fitted to the measured exposed communication of the largest run (here: shared memory).
"""
import argparse, json, math, os, re, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_model as sm  # noqa: E402  (the ring's time: docs/scaling.md)
import config_value  # noqa: E402

p = argparse.ArgumentParser()
for a in ("--runs", "--opts", "--ranks", "--mode", "--out", "--config"):
    p.add_argument(a, required=True)
p.add_argument("--link-gbs", type=float, default=25.0)
p.add_argument("--link-us", type=float, default=5.0)
p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
               help="a --set the runs were given (comm.bucket_mb overrides the config's)")
a = p.parse_args()
opts, ranks = a.opts.split(), sorted(int(n) for n in a.ranks.split())
GRAD_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2}


def summary(o, n):
    for path in (f"{a.runs}/{o}-{n}.jsonl", f"{a.runs}/{o}-{n}.slurm/metrics.jsonl"):
        if os.path.exists(path):
            recs = [json.loads(l) for l in open(path) if '"summary"' in l]
            if recs:
                return recs[-1]
    raise SystemExit(f"scaling: no summary record for {o} on {n} rank(s) in {a.runs}")


def params(o, n):
    """The parameters, the global batch and the step the run's last start resumed from (0)."""
    log = open(f"{a.runs}/{o}-{n}.log").read()
    m = re.search(r"\((\d+) parameters\)", log)
    g = re.search(r"global batch (\d+)", log)
    r = re.findall(r"^resumed from .*: step (\d+),", log, re.M)
    return int(m.group(1)), int(g.group(1)), int(r[-1]) if r else 0


def bucket_mb():
    """comm.bucket_mb as the runs had it: their --set, else the config file's, else 25."""
    return config_value.number(a.config, a.set, "comm.bucket_mb", 25.0)


def allreduce_s(n, grad_bytes, buckets, bw, lat):
    """k equal buckets one after another over one-GPU nodes on a link of latency lat (s) a step
    and bandwidth bw (bytes/s): 2 (n-1) k lat + 2 (n-1)/n G / bw."""
    return sm.in_turn_s(sm.fitted_link("link", lat, 1 / bw), [grad_bytes / buckets] * buckets, n)


rows = []
for o in opts:
    base = None
    for n in ranks:
        s = summary(o, n)
        nparam, gb, start = params(o, n)
        t = s["time_s"]
        ran = s["steps"] - start  # the summary's times are its last start's (a requeued job)
        if ran <= 0:
            raise SystemExit(f"scaling: {o} on {n} rank(s) took no step after resuming at "
                             f"step {start} (an earlier study's checkpoints? remove {a.runs})")
        thr = ran * gb / t["steps"]
        base = base or (n, thr)
        ms = lambda v, ran=ran: 1e3 * v / ran
        rows.append(dict(mode=a.mode, opt=o, ranks=n, batch=gb // n, global_batch=gb,
                         steps=ran, step_s=t["steps"], thr=thr, speedup=thr / base[1],
                         eff=thr / base[1] * base[0] / n, compute=ms(t["compute"]),
                         comm=ms(t["comm_exposed"]), wait=ms(t["input_wait"]),
                         acc=s["accuracy"], mem=s["peak_mem_bytes"], ideal=base[1] * n / base[0],
                         nparam=nparam, grads=s["amp"]["grads"]))

with open(f"{a.out}/scaling.csv", "w") as f:
    f.write("mode,opt_level,ranks,batch_per_rank,global_batch,steps,step_s,images_per_s,speedup,"
            "efficiency,compute_ms,comm_exposed_ms,input_wait_ms,accuracy,peak_mem_bytes,"
            "ideal_images_per_s\n")
    for r in rows:
        f.write("{mode},{opt},{ranks},{batch},{global_batch},{steps},{step_s:.4f},{thr:.1f},"
                "{speedup:.3f},{eff:.3f},{compute:.3f},{comm:.3f},{wait:.3f},{acc:.4f},{mem},"
                "{ideal:.1f}\n".format(**r))
with open(f"{a.out}/scaling.md", "w") as f:
    f.write(f"{a.mode} scaling of {os.path.basename(a.config)}\n\n")
    f.write("| opt | ranks | batch/rank | images/s | speedup | efficiency | compute ms | "
            "exposed comm ms | input wait ms | accuracy |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write("| {opt} | {ranks} | {batch} | {thr:.0f} | {speedup:.2f} | {eff:.2f} | "
                "{compute:.2f} | {comm:.2f} | {wait:.2f} | {acc:.3f} |\n".format(**r))

buckets_mb = bucket_mb()
notes = []
with open(f"{a.out}/model.md", "w") as f:
    f.write("Alpha-beta model (ring all-reduce, no overlap with backward)\n\n")
    f.write("| opt | grad MB | buckets | t1 ms | link | ranks | predicted efficiency | measured |\n"
            "|---|---:|---:|---:|---|---:|---:|---:|\n")
    for o in opts:
        mine = [r for r in rows if r["opt"] == o]
        r1 = mine[0]
        g = r1["nparam"] * GRAD_BYTES.get(r1["grads"], 4)
        k = max(1, math.ceil(g / (buckets_mb * 2**20)))
        t1 = (r1["compute"] + r1["wait"]) / 1e3 * r1["ranks"] if a.mode == "strong" else \
             (r1["compute"] + r1["wait"]) / 1e3
        eff = lambda n, bw, lat: (t1 / n if a.mode == "strong" else t1) / \
            ((t1 / n if a.mode == "strong" else t1) + allreduce_s(n, g, k, bw, lat))
        big = mine[-1]
        if big["ranks"] > 1 and big["comm"] > 0:  # fit the bandwidth to the largest run, latency 0
            n = big["ranks"]
            bw_fit = 2 * (n - 1) / n * g / (big["comm"] / 1e3)
            n0 = r1["ranks"]  # measured efficiencies are relative to the smallest run: so these
            for r in mine:
                p = eff(r["ranks"], bw_fit, 0.0) / eff(n0, bw_fit, 0.0)
                f.write(f"| {o} | {g / 1e6:.2f} | {k} | {t1 * 1e3:.2f} | fitted {bw_fit / 1e9:.2f} GB/s "
                        f"| {r['ranks']} | {p:.2f} | {r['eff']:.2f} |\n")
            if n0 > 1:
                notes.append(f"{o}: the fitted rows' efficiencies, predicted and measured, are "
                             f"relative to {n0} ranks, the smallest run; the others to 1 rank.")
        grow = big["compute"] / r1["compute"] if r1["compute"] > 0 else 1.0
        if a.mode == "weak" and grow > 1.2:
            notes.append(f"{o}: compute per step grew {grow:.1f}x from {r1['ranks']} to "
                         f"{big['ranks']} ranks (ranks sharing cores or memory bandwidth); the "
                         "model keeps it constant, so it overestimates efficiency there.")
        for n in (8, 64, 512):
            f.write(f"| {o} | {g / 1e6:.2f} | {k} | {t1 * 1e3:.2f} | {a.link_gbs:g} GB/s, {a.link_us:g} us "
                    f"| {n} | {eff(n, a.link_gbs * 1e9, a.link_us * 1e-6):.2f} | |\n")
    for line in notes:
        f.write(f"\n{line}\n")
