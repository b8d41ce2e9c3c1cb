#!/usr/bin/env python3
"""The scaling study on the cluster box (cluster/scaling.sh --box): the alpha-beta model of a ring
all-reduce, calibrated on the same links by `mpdist bench-comm`, beside the all-reduce time that
training measured.

For each link setting L and host count n (one rank per host), runs/bench-L-n.csv and
runs/bench-L-n-after.csv hold the bench-comm --blocking sweeps before and after the training
(all-reduce, communicator time per size and dtype: the median of single all-reduces, each as the
last rank to start saw it; the fit takes each size's mean of the sweeps) and runs/L-OPT-n.jsonl
the training metrics; with --rounds R > 1 the training and the sweep after it were repeated,
round k's in runs/L-OPT-n-rk.jsonl and runs/bench-L-n-after-rk.csv (k = 2 .. R), so that both
sides sample the same stretch of a VM whose speed drifts; runs/OPT-1.jsonl is the single-rank
baseline; runs/ompi-btl-tcp.txt holds `ompi_info --parsable --param btl tcp --level 9`. For the
dtype of the gradients, a weighted least-squares line t(s) = A + B s through the sweep's sizes
from half to twice the gradients' bytes (TCP over a shaped link is far from linear over a wider
range; weights 1/t^2: relative errors count; A >= 0, else the line through the origin) gives the
ring's
    alpha = A / (2 (n - 1)),   beta = B n / (2 (n - 1)),
so that k buckets of G gradient bytes take
    t(n) = 2 (n - 1) k alpha + 2 (n - 1) / n * G beta.
The line takes only the sizes sent by the same protocol as the gradients: the ring sends an
all-reduce of c elements as blocks of at most ceil(c/n), and Open MPI's TCP transport (ob1)
sends a message at once (eager) where it fits in btl_tcp_eager_limit bytes with ob1's header,
and a larger one after a handshake (rendezvous), with a jump in time between them that no line
through both describes.
The measured all-reduce time is the median over the step records of every round (each round's
first left out) of comm_last_ms: the time from the first bucket's start to all summed as the
last rank to start saw it (the least over the ranks), which leaves out the wait for ranks still
computing that the model does not describe. That wait is reported beside it: comm_skew_ms (the
most over the ranks less the least) and rank 0's comm_ms (first start to all summed, wait
included). The prediction of the weak-scaling efficiency is t1 / (t1 + t(n)), with t1 the
baseline's compute and input time per step (no overlap with backward assumed); the measured step
time, exposed communication and efficiency are the median over the rounds of each round's
summary. Beside the model, bench_ms is bench-comm's own time (the sweeps' mean) at the sweep's
size nearest the gradients' bytes: where the model misses, it tells a line that missed its own
calibration from a training all-reduce that differs from bench-comm's. Writes box.csv and box.md
(with the points where the model misses by more than 15%).
"""
import argparse, csv, json, math, os, re, statistics, sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import step_model as sm  # noqa: E402  (the scaling model's code path: docs/scaling.md)
import config_value  # noqa: E402

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
for a in ("--runs", "--opts", "--hosts", "--links", "--out", "--config"):
    p.add_argument(a, required=True)
p.add_argument("--rounds", type=int, default=1, help="training rounds per point (default 1)")
p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
               help="a --set the runs were given (the comm bucket sizes override the config's)")
a = p.parse_args()
if not 1 <= a.rounds <= 10:
    raise SystemExit(f"scaling: --rounds must be 1 to 10 (got {a.rounds})")
# a round's file suffix: none for the first, -rK for round K
rsuffix = lambda k: "" if k == 1 else f"-r{k}"
opts, hosts, links = a.opts.split(), sorted(int(n) for n in a.hosts.split()), a.links.split()
if not (opts and hosts and links) or min(hosts) < 2:
    raise SystemExit("scaling: --opts, --links and --hosts (2 or more each) must not be empty")
GRAD = {"fp32": (4, "float"), "fp16": (2, "half"), "bf16": (2, "bfloat16")}


def records(path):
    if not os.path.exists(path):
        raise SystemExit(f"scaling: {path} is missing")
    return [json.loads(l) for l in open(path)]


def summary(path):
    s = [r for r in records(path) if r["type"] == "summary"]
    if not s:
        raise SystemExit(f"scaling: no summary record in {path}")
    return s[-1]


def log_info(path):
    log = open(path).read()
    m, g = re.search(r"\((\d+) parameters\)", log), re.search(r"global batch (\d+)", log)
    if not (m and g):
        raise SystemExit(f"scaling: no parameter count or global batch in {path}")
    return int(m.group(1)), int(g.group(1))


def buckets(g):
    """The bytes of the buckets g gradient bytes fill: comm.first_bucket_mb, then comm.bucket_mb
    each (the runs' --set, else the config's values, else the defaults; bucket edges fall between
    parameters, so roughly)."""
    mb = lambda key, default: config_value.number(a.config, a.set, "comm." + key, default)
    first, rest = mb("first_bucket_mb", 1.0) * 2**20, mb("bucket_mb", 25.0) * 2**20
    if g <= first:
        return [g]
    k = math.ceil((g - first) / rest)
    return [first] + [rest] * (k - 1) + [g - first - rest * (k - 1)]


def eager_limit():
    """btl_tcp_eager_limit (bytes) from runs/ompi-btl-tcp.txt."""
    path = f"{a.runs}/ompi-btl-tcp.txt"
    m = re.search(r"^mca:btl:tcp:param:btl_tcp_eager_limit:value:(\d+)$",
                  open(path).read() if os.path.exists(path) else "", re.M)
    if not m:
        raise SystemExit(f"scaling: no btl_tcp_eager_limit in {path} (ompi_info --parsable --param btl tcp --level 9)")
    return int(m.group(1))


OB1_HDR = 56  # bytes: sizeof(mca_pml_ob1_hdr_t) in Open MPI 4.1 on x86-64, inside the eager limit


def eager(size, dsize, n, limit):
    """Whether the ring all-reduce of size bytes of dsize-byte elements over n ranks sends its
    blocks (ceil(count/n) elements at most) eagerly under btl_tcp_eager_limit `limit`."""
    return -(-(size // dsize) // n) * dsize <= limit - OB1_HDR


def sweep(path, dtype):
    """(size in bytes, seconds) of each all-reduce size of dtype: the mean of the sweep in path
    (bench-L-n.csv) and those after each round's training (bench-L-n-after.csv, then
    bench-L-n-after-rK.csv), which must all have the same sizes."""
    times = []
    for p in [path] + [path.replace(".csv", f"-after{rsuffix(k)}.csv") for k in range(1, a.rounds + 1)]:
        if not os.path.exists(p):
            raise SystemExit(f"scaling: {p} is missing")
        times.append({int(r["size_bytes"]): float(r["time_us"]) * 1e-6 for r in csv.DictReader(open(p))
                      if r["type"] == dtype and r["op"] == "allreduce"})
        if times[-1].keys() != times[0].keys():
            raise SystemExit(f"scaling: the {dtype} sizes of {path} and its sweep {os.path.basename(p)} differ")
    return [(s, statistics.fmean(t[s] for t in times)) for s in sorted(times[0])]


def fit(path, pts, dtype, dsize, g, n, limit):
    """A, B (s, s/byte) of t = A + B s through pts (sweep(path, dtype)) with sizes from g/2 to
    2g whose ring blocks go by the same protocol as g's (eager()), weights 1/t^2; the number of
    rows and the protocol's name."""
    proto = eager(g, dsize, n, limit)
    name = "eager" if proto else "rendezvous"
    rows = [(s, t) for s, t in pts
            if 0.45 * g <= s <= 2.2 * g and eager(s, dsize, n, limit) == proto]
    if len(rows) < 2:
        raise SystemExit(f"scaling: fewer than 2 {dtype} all-reduce rows of {g / 2:.0f}-{2 * g:.0f} bytes "
                         f"sent {'eagerly' if proto else 'by rendezvous'} (ring blocks "
                         f"{'within' if proto else 'over'} btl_tcp_eager_limit {limit} with ob1's "
                         f"{OB1_HDR}-byte header, {n} ranks) in {path}")
    w = [1 / t**2 for _, t in rows]
    sw = sum(w)
    mx = sum(wi * s for wi, (s, _) in zip(w, rows)) / sw
    mt = sum(wi * t for wi, (_, t) in zip(w, rows)) / sw
    b = sum(wi * (s - mx) * (t - mt) for wi, (s, t) in zip(w, rows)) / \
        sum(wi * (s - mx) ** 2 for wi, (s, _) in zip(w, rows))
    if mt - b * mx < 0:  # a latency is not negative: the best line through the origin
        b = sum(wi * s * t for wi, (s, t) in zip(w, rows)) / sum(wi * s * s for wi, (s, _) in zip(w, rows))
        return 0.0, b, len(rows), name
    if b <= 0:
        raise SystemExit(f"scaling: the {dtype} all-reduce in {path} does not take longer for more bytes "
                         "around the gradients' size; no beta to fit")
    return mt - b * mx, b, len(rows), name


def per_step(s, key):
    return 1e3 * s["time_s"][key] / s["steps"]


rows = []
limit = eager_limit()
for o in opts:
    base = summary(f"{a.runs}/{o}-1.jsonl")
    t1 = (base["time_s"]["compute"] + base["time_s"]["input_wait"]) / base["steps"]
    _, gb1 = log_info(f"{a.runs}/{o}-1.log")
    thr1 = base["steps"] * gb1 / base["time_s"]["steps"]
    for link in links:
        for n in hosts:
            run = f"{a.runs}/{link}-{o}-{n}"
            tries = [f"{run}{rsuffix(k)}" for k in range(1, a.rounds + 1)]
            sums = [summary(f"{t}.jsonl") for t in tries]
            s = sums[0]
            nparam, gb = log_info(f"{run}.log")
            gbytes, dtype = GRAD[s["amp"]["grads"]]
            g = nparam * gbytes
            sizes = buckets(g)
            k = len(sizes)
            path = f"{a.runs}/bench-{link}-{n}.csv"
            pts = sweep(path, dtype)
            A, B, npts, proto = fit(path, pts, dtype, gbytes, g, n, limit)
            bench_s = min(pts, key=lambda st: abs(st[0] - g))[1]  # at the size nearest g
            alpha, beta = A / (2 * (n - 1)), B * n / (2 * (n - 1))
            # the box as a cluster of one-GPU nodes on the fitted link, its ring all-reduce, the
            # buckets one after another: 2 (n-1) k alpha + 2 (n-1)/n g beta
            pred = sm.in_turn_s(sm.fitted_link(f"box {link}", alpha, beta), sizes, n)
            steps = []
            for t in tries:
                mine = [r for r in records(f"{t}.jsonl") if r["type"] == "step"][1:]
                if not mine or any(r.get("comm_last_ms") is None for r in mine):
                    raise SystemExit(f"scaling: {t}.jsonl has fewer than 2 step records, or one "
                                     "without comm_last_ms")
                steps += mine
            med = lambda key: statistics.median(r[key] for r in steps) / 1e3
            meas = med("comm_last_ms")
            # the rounds' median of a summary's figure
            over = lambda f: statistics.median(f(x) for x in sums)
            thr = over(lambda x: x["steps"] * gb / x["time_s"]["steps"])
            rows.append(dict(link=link, opt=o, hosts=n, grads=s["amp"]["grads"], grad_mb=g / 1e6,
                             buckets=k, alpha_us=alpha * 1e6, beta_mbs=1e-6 / beta if beta > 0 else 0,
                             step_ms=over(lambda x: per_step(x, "steps")),
                             exposed_ms=over(lambda x: per_step(x, "comm_exposed")),
                             meas_ms=meas * 1e3, pred_ms=pred * 1e3, err=pred / meas - 1,
                             bench_ms=bench_s * 1e3,
                             eff=thr / (n * thr1), pred_eff=t1 / (t1 + pred), t1_ms=t1 * 1e3,
                             first_ms=med("comm_ms") * 1e3, skew_ms=med("comm_skew_ms") * 1e3,
                             protocol=proto, fit_points=npts))

with open(f"{a.out}/box.csv", "w") as f:
    keys = list(rows[0])
    f.write(",".join(keys) + "\n")
    for r in rows:
        f.write(",".join(f"{r[k]:.4f}" if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")
with open(f"{a.out}/box.md", "w") as f:
    f.write(f"Weak scaling of {os.path.basename(a.config)} on the cluster box, one rank per host; "
            "model: ring all-reduce, alpha and beta fitted to `mpdist bench-comm --blocking` on "
            f"the same links{f', {a.rounds} rounds of training and calibration' if a.rounds > 1 else ''}\n\n")
    f.write("| link | opt | hosts | grads | fitted to | alpha us | beta MB/s | step ms | exposed comm ms | "
            "rank 0's all-reduce ms | arrival skew ms | all-reduce ms, the last rank to start | "
            "model | model error | bench-comm at the gradients' size | efficiency | model efficiency |\n"
            "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
    for r in rows:
        f.write("| {link} | {opt} | {hosts} | {grads} {grad_mb:.2f} MB | {fit_points} sizes, {protocol} | "
                "{alpha_us:.0f} | {beta_mbs:.1f} | "
                "{step_ms:.1f} | {exposed_ms:.1f} | {first_ms:.1f} | {skew_ms:.1f} | "
                "{meas_ms:.1f} | {pred_ms:.1f} | {err:+.1%} | {bench_ms:.1f} | {eff:.2f} | {pred_eff:.2f} |\n"
                .format(**r))
    bad = [r for r in rows if abs(r["err"]) > 0.15]
    f.write(f"\nThe model is within 15% of the all-reduce time the last rank to start saw at "
            f"{len(rows) - len(bad)} of {len(rows)} points.\n")
    for r in bad:
        f.write(f"\nMissed by {r['err']:+.0%}: {r['link']}, {r['opt']}, {r['hosts']} hosts.\n")
    t1s = ", ".join(f"{o} {next(r['t1_ms'] for r in rows if r['opt'] == o):.1f} ms" for o in opts)
    f.write(f"\nThe model's line is fitted to the sweep's sizes from half to twice the gradients' that "
            f"Open MPI sends by the same protocol as the gradients: eager where the ring's block "
            f"(size over hosts) and ob1's {OB1_HDR}-byte header fit in btl_tcp_eager_limit ({limit} bytes), "
            "else rendezvous.\n")
    f.write(f"\nBaseline (1 rank, no communication): {t1s} of compute and input per step. "
            "Efficiency: images/s over the host count times the baseline's; the model's: "
            "t1 / (t1 + all-reduce), with no overlap.\n")
