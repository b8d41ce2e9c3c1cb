#!/usr/bin/env python3
"""The scaling model (cluster/step_model.py) against data-parallel scaling results that others
measured on real clusters (docs/scaling.md): for each, the published throughput at every GPU count,
the setup as its source states it (cluster/clusters/*.cluster: the links), the model's gradients
(cluster/architectures.py) and its bucket rule, and the per-GPU compute time that the baseline
row implies (the published step at the smallest count, less the communication the model puts
there). Prints the Markdown tables: published and predicted efficiency at every count.

  cluster/published.py [--out FILE] [--check PP]

--check PP: exit 1 when a point misses by more than PP percentage points (the issue's bound: 10)
without an explanation (its result's misses), or when an explained point is within PP (a stale
explanation); an explained miss beyond PP passes.
Efficiency: throughput per GPU over the baseline row's. Throughput from the model: samples per
step (micro-batch x accumulation x GPUs) over the predicted step.
"""
import argparse, math, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import architectures as arch  # noqa: E402
import step_model as sm  # noqa: E402

DLE = "github:NVIDIA/DeepLearningExamples"
RESULTS = [
    dict(title="ResNet-50 v1.5, FP32, NGC PyTorch 20.03 (DALI, apex DDP), V100 nodes with one 100 Gb/s IB NIC",
         source="OneFlow DLPerf v1.0 (Oct 2020), github:Oneflow-Inc/DLPerf @c89430ba "
                "reports/dlperf_benchmark_test_report_v1.md, \"ResNet50 V1.5 throughput (img/s), FP32, batch size = 128\", "
                "column NGC PyTorch; median of about 7 runs, 100 steps each after 20",
         cluster="dlperf-v100-1xedr.cluster", model=arch.resnet50, grad_bytes=4, micro=128, unit="img/s",
         bucket_mb=10e6 * 4 / 2**20, first_bucket_mb=10e6 * 4 / 2**20,
         points=[(1, 1, 367.29), (8, 1, 2887.65), (16, 1, 5716.79), (32, 1, 10917.09)],
         assume="apex.parallel.DistributedDataParallel's default buckets (message_size 10M elements, no "
                "small first bucket), overlapped with backward; FP32 gradients"),
    dict(title="ResNet-50 v1.5, mixed precision, NGC PyTorch 20.03 (DALI, apex), the same nodes",
         source="the same report, \"AMP, batch size = 256\", column NGC PyTorch",
         cluster="dlperf-v100-1xedr.cluster", model=arch.resnet50, grad_bytes=2, micro=256, unit="img/s",
         bucket_mb=10e6 * 2 / 2**20, first_bucket_mb=10e6 * 2 / 2**20,
         points=[(1, 1, 802.9), (8, 1, 6154.66), (16, 1, 11991.94), (32, 1, 22551.16)],
         assume="as above, FP16 gradients (the report does not say which apex opt level)",
         misses={32: "the model hides the 51 MB all-reduce behind backward (1.7 ms exposed); the "
                     "published runs lose 4.2% already on 8 GPUs of one node, where the model has "
                     "nothing to lose, and 12.2% on 32. Even one 100 Gb/s NIC run at 1.5 GB/s "
                     "(sockets over IPoIB, say) would cost the model 3.5%, not 12%. What the report "
                     "does not say: NCCL's transport (IB verbs with GPUDirect RDMA, or sockets), "
                     "version and algorithm; the spread of step times over the GPUs (each step waits "
                     "for the slowest of 32); whether DALI decoded on the 2 x 12-core Xeon 5118 or "
                     "the GPUs; the spread over its runs (it gives their median). The model describes "
                     "communication only"}),
    dict(title="BERT-large pre-training, mixed precision, sequence 128, NGC PyTorch 21.11, DGX A100 80GB nodes",
         source=f"{DLE} @729963dd PyTorch/LanguageModeling/BERT/README.md, \"Pre-training NVIDIA DGX A100 "
                "(8x A100 80GB) Multi-node Scaling\", global batch 65536 at every count (strong scaling by "
                "accumulation)",
         cluster="dgx-a100-hdr200.cluster", model=arch.bert, grad_bytes=2, micro=256, unit="seq/s",
         bucket_mb=1e9, first_bucket_mb=1e9,
         points=[(8, 32, 4553), (16, 16, 9191), (32, 8, 18119), (64, 4, 35774), (128, 2, 70555), (256, 1, 138294)],
         assume="one FP16 all-reduce of all 336M gradients after the last micro-batch's backward (DDP "
                "with one bucket, no_sync on the others; the README's code), no overlap; the LAMB step "
                "and the MLM head's cost counted in the micro-batch's time; the 4-node accumulation "
                "printed as \"16 and 18\" taken as 8"),
    dict(title="BERT-large pre-training, mixed precision, sequence 512, the same nodes",
         source=f"the same table, sequence length 512, global batch 32768",
         cluster="dgx-a100-hdr200.cluster", model=arch.bert, grad_bytes=2, micro=32, unit="seq/s",
         bucket_mb=1e9, first_bucket_mb=1e9,
         points=[(8, 128, 1648), (16, 64, 3291), (32, 32, 6464), (64, 16, 13005), (128, 8, 25570), (256, 4, 49663)],
         assume="as above"),
    dict(title="Transformer-XL large, mixed precision (apex O2), NGC PyTorch 20.06, DGX-2H nodes",
         source=f"{DLE} @729963dd PyTorch/LanguageModeling/Transformer-XL/README.md, \"Training performance: "
                "8x NVIDIA DGX-2H (16x V100 32GB)\", large model, LOCAL_BATCH_SIZE=4 (4 x 384 tokens a GPU), "
                "500 iterations averaged",
         cluster="dgx2h-edr.cluster", model=arch.transformer_xl, grad_bytes=2, micro=4 * 384, unit="tok/s",
         bucket_mb=25, first_bucket_mb=1,
         points=[(16, 1, 154950), (32, 1, 307520), (64, 1, 605530), (128, 1, 1189700)],
         assume="torch DistributedDataParallel's default buckets (25 MB, the first 1 MB), overlapped with "
                "backward; FP16 gradients (apex O2); 285M parameters by our count of the configuration "
                "(the paper gives 257M), tied embeddings complete at the end of backward"),
    dict(title="Transformer-XL large, FP32, the same runs",
         source="the same table, FP32 column",
         cluster="dgx2h-edr.cluster", model=arch.transformer_xl, grad_bytes=4, micro=4 * 384, unit="tok/s",
         bucket_mb=25, first_bucket_mb=1,
         points=[(16, 1, 69070), (32, 1, 136960), (64, 1, 270120), (128, 1, 514500)],
         assume="as above, FP32 gradients"),
]


def profile(result, compute_ms):
    """A made-up profile of result's model: compute_ms of forward and backward a micro-batch,
    backward twice forward, the gradients complete at their share of backward."""
    b = compute_ms * 2 / 3
    return {"name": result["title"], "forward_ms": compute_ms / 3, "backward_ms": b, "optimizer_ms": 0.0,
            "params": [{"name": n, "group": "g", "bytes": e * result["grad_bytes"], "ready_ms": share * b}
                       for n, e, share in result["model"]()]}


def step(result, cluster, compute_ms, n, accum):
    return sm.predict_step(profile(result, compute_ms), cluster, n, result["bucket_mb"],
                           result["first_bucket_mb"], True, accum)


def calibrate(result, cluster):
    """The compute time a micro-batch for which the model's step at the baseline row is the
    published one."""
    n0, k0, thr0 = result["points"][0]
    want = 1e3 * result["micro"] * k0 * n0 / thr0
    c = want / k0
    for _ in range(50):
        c += (want - step(result, cluster, c, n0, k0).step_ms) / k0
    return c, want


def table(result):
    cluster = sm.load_cluster(os.path.join(HERE, "clusters", result["cluster"]))
    c, _ = calibrate(result, cluster)
    n0, k0, thr0 = result["points"][0]
    per0 = thr0 / n0
    rows, pred0 = [], None
    for n, k, thr in result["points"]:
        s = step(result, cluster, c, n, k)
        pthr = 1e3 * result["micro"] * k * n / s.step_ms
        pred0 = pred0 or pthr / n
        rows.append(dict(n=n, accum=k, thr=thr, eff=thr / n / per0, pred=pthr / n / pred0, step=s.step_ms,
                         exposed=s.exposed_ms, algos=", ".join(sorted(s.algorithms)) or "-",
                         why=result.get("misses", {}).get(n)))
    return cluster, c, rows


def markdown(result, cluster, c, rows):
    nparams = sum(e for _, e, _ in result["model"]())
    out = [f"**{result['title']}.** Source: {result['source']}. Links: {cluster.name} "
           f"(cluster/clusters/{result['cluster']}). Model: {nparams / 1e6:.1f}M parameters, "
           f"{nparams * result['grad_bytes'] / 1e6:.0f} MB of gradients, {result['assume']}. "
           f"Compute a micro-batch of {result['micro']} from the first row: {c:.1f} ms.\n\n",
           f"| GPUs | accumulation | published {result['unit']} | published efficiency | predicted | "
           "difference | predicted exposed ms | algorithm |\n|---:|---:|---:|---:|---:|---:|---:|---|\n"]
    for r in rows:
        out.append(f"| {r['n']} | {r['accum']} | {r['thr']:g} | {r['eff']:.3f} | {r['pred']:.3f} | "
                   f"{100 * (r['pred'] - r['eff']):+.1f} pp{' (a)' if r['why'] else ''} | {r['exposed']:.1f} | "
                   f"{r['algos']} |\n")
    out += [f"\n(a) {r['n']} GPUs, missed by more than 10 points: {r['why']}.\n" for r in rows if r["why"]]
    return "".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out")
    p.add_argument("--check", type=float)
    a = p.parse_args()
    if a.check is not None and not (math.isfinite(a.check) and a.check >= 0):
        print(f"published: --check {a.check:g}: give percentage points, a finite number >= 0",
              file=sys.stderr)
        sys.exit(2)
    text, worst, npts, within, unexplained = [], 0.0, 0, 0, []
    for r in RESULTS:
        cluster, c, rows = table(r)
        text.append(markdown(r, cluster, c, rows))
        for x in rows[1:]:
            d = abs(x["pred"] - x["eff"]) * 100
            worst, npts, within = max(worst, d), npts + 1, within + (d <= 10)
            # an explained miss must be a miss: a bound met needs no explanation
            if a.check is not None and (d > a.check) != bool(x["why"]):
                unexplained.append(f"{r['title']}, {x['n']} GPUs: {d:.1f} points"
                                   f"{' (explained, but within the bound)' if x['why'] else ''}")
    body = "\n".join(text) + (f"\n{within} of {npts} points beyond the baselines within 10 percentage "
                              f"points; largest difference {worst:.1f}.\n")
    print(body, end="")
    if a.out:
        with open(a.out, "w") as f:
            f.write(body)
    if unexplained:
        print(f"published: {'; '.join(unexplained)} (bound {a.check:g} points)", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
