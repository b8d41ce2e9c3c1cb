#!/usr/bin/env python3
"""The tables and goals of bench/gpu_step.sh, from its runs (raw.csv). Needs no GPU and no torch.

Usage: bench/gpu_step_report.py RAW OUTDIR [HEADER]
  RAW     one row per run: model,batch,row,round,status,images_per_s,step_ms,device_ms,
          device_peak_bytes,device_used_peak_bytes,host_peak_bytes,input_wait_s,skipped_steps,
          flops_per_image,log, optionally loader_fill_ms (the loader's mean time to build a
          batch on one thread)   (row: O0, O0+TF32, O1, O2, O2-bf16, O3, O2+flash, O2-bf16+flash,
          PyTorch-fp32, PyTorch-amp, PyTorch-amp-bf16, PyTorch-amp-compile; a failed run has
          status "failed: WHY" and no numbers; for gpt and gpt2-small images are sequences)
  OUTDIR  gets table.txt (printed too), table.csv and goals.txt
  HEADER  the first line of both tables (GPU, driver, date, commit, steps)
Exit: 1 when a run failed or a goal is missed, 2 on a usage error, else 0.

Each row of the table is one configuration over the rounds: the median of its runs and, for
images/s, the range [min, max]. vs_PyT is the median over the rounds of the row's images/s over
its reference's in the same round (the runs of a round are side by side): O0 and O0+TF32 against
PyTorch-fp32 (TF32 off), O1-O3 against the fastest of PyTorch-amp, PyTorch-amp-bf16 and
PyTorch-amp-compile (the one with the higher median; named under the table). x_O0 and mem_O0: the
same against mpdist O0.
Memory: dev_MiB is the device allocations the program counted (mpdist: device_peak_bytes, the
engine's counters of what its backend allocated on the device; PyTorch:
torch.cuda.max_memory_allocated()), used_MiB the device's whole use at its highest
(cudaMemGetInfo's total - free: context and allocator reserve included), host_MiB the host side
(mpdist: its counted host bytes, the dataset and pinned loader slots among them; PyTorch: the
process's peak resident set, which also holds the Python interpreter and libraries).

Goals, judged on the medians: issue 7's (O2 fp16 >= 3x O0 images/s; O2 fp16 device memory <=
0.55x O0's; at batch 128, O2 fp16 >= 1.2x PyTorch amp's images/s with no more device memory) and
issue 48's (O2 fp16 >= 1.2x the best PyTorch amp's images/s at <= 1.0x its device memory, every
batch; O0 >= 1.0x PyTorch fp32) for the convolutional models; issue 49's for gpt and gpt2-small
(O2 fp16 and O2 bf16, each where it ran, >= 1.2x the best PyTorch amp's sequences/s, which is
its tokens/s, at <= 1.0x its device memory). A ratio goal that fails on the median but whose
rounds' range reaches the line says so.
"""
import csv
import os
import statistics
import sys

ROWS = ("O0", "O0+TF32", "O1", "O2", "O2-bf16", "O3", "O2+flash", "O2-bf16+flash",
        "PyTorch-fp32", "PyTorch-amp", "PyTorch-amp-bf16", "PyTorch-amp-compile")
AMPS = ("PyTorch-amp", "PyTorch-amp-bf16", "PyTorch-amp-compile")
TEXT = ("gpt", "gpt2-small")
NUM = ("images_per_s", "step_ms", "device_ms", "device_peak_bytes", "device_used_peak_bytes",
       "host_peak_bytes", "input_wait_s", "skipped_steps", "flops_per_image")
OPTIONAL = ("loader_fill_ms",)  # raw files from before 2026-12-03 lack it
MIB = 1048576.0


def fval(s):
    try:
        return float(s)
    except (TypeError, ValueError):
        return None


class Config:
    """One model, batch and row over the rounds."""

    def __init__(self, model, batch, row):
        self.model, self.batch, self.row = model, batch, row
        self.runs = {}  # round -> dict of numbers, or the failure
        self.failed = []

    def add(self, r):
        rnd = int(r["round"])
        if r["status"] == "ok":
            self.runs[rnd] = {k: fval(r.get(k)) for k in NUM + OPTIONAL}
        else:
            self.failed.append((rnd, r["status"], r.get("log", "")))

    def values(self, key):
        return [v[key] for v in self.runs.values() if v.get(key) is not None and v[key] >= 0]

    def med(self, key):
        v = self.values(key)
        return statistics.median(v) if v else None

    def rate(self, rnd):
        v = self.runs.get(rnd)
        return v and v["images_per_s"]


def ratios(a, b, key="images_per_s"):
    """[a/b] over the rounds both ran."""
    if a is None or b is None:
        return []
    out = []
    for rnd, va in a.runs.items():
        vb = b.runs.get(rnd)
        if vb and va.get(key) and vb.get(key):
            out.append(va[key] / vb[key])
    return out


def med(v):
    return statistics.median(v) if v else None


def fmt(v, spec):
    return "-" if v is None else spec % v


def reference(cfgs, model, batch, row):
    """The PyTorch configuration the row is compared with."""
    if row.startswith("O0"):
        return cfgs.get((model, batch, "PyTorch-fp32"))
    if row.startswith("PyTorch"):
        return None
    amps = [cfgs.get((model, batch, r)) for r in AMPS]
    amps = [c for c in amps if c is not None and c.med("images_per_s") is not None]
    return max(amps, key=lambda c: c.med("images_per_s")) if amps else None


def goal_line(text, q, want, at_least=True):
    """PASS/FAIL on the median of the ratios q, saying when the range reaches the line."""
    if not q:
        return "FAIL %s: not measured (a run failed)" % text
    m, lo, hi = med(q), min(q), max(q)
    ok = m >= want if at_least else m <= want
    line = "%s %s (%.2fx" % ("PASS" if ok else "FAIL", text, m)
    if len(q) > 1:
        line += ", rounds %.2f-%.2f" % (lo, hi)
    line += ")"
    if not ok and ((at_least and hi >= want) or (not at_least and lo <= want)):
        line += ": fails on the median only, inside the rounds' range"
    return line


def main(argv):
    if len(argv) not in (3, 4) or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) == 2 else 2
    raw, outdir = argv[1], argv[2]
    header = argv[3] if len(argv) == 4 else "# GPU: unknown"
    try:
        with open(raw, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print("gpu_step_report: %s: %s" % (raw, e.strerror), file=sys.stderr)
        return 2
    missing = [k for k in ("model", "batch", "row", "round", "status") + NUM
               if rows and k not in rows[0]]
    if missing:
        print("gpu_step_report: %s: no column %s" % (raw, ", ".join(missing)), file=sys.stderr)
        return 2
    cfgs, order = {}, []
    for r in rows:
        if r["row"] not in ROWS:
            print("gpu_step_report: %s: unknown row %r" % (raw, r["row"]), file=sys.stderr)
            return 2
        key = (r["model"], int(r["batch"]), r["row"])
        if key not in cfgs:
            cfgs[key] = Config(*key)
            order.append(key)
    for r in rows:
        cfgs[(r["model"], int(r["batch"]), r["row"])].add(r)
    first_m = [m for m, _, _ in order]
    first_b = [b for _, b, _ in order]
    order.sort(key=lambda k: (first_m.index(k[0]), first_b.index(k[1]), ROWS.index(k[2])))
    rounds = max([int(r["round"]) for r in rows] + [0])
    os.makedirs(outdir, exist_ok=True)
    lines = [header,
             "%-8s %5s %-19s %9s %-15s %8s %7s %8s %8s %8s %7s %6s %-11s %5s %7s  %s" % (
                 "model", "batch", "row", "images/s", "[min, max]", "step_ms", "dev_ms",
                 "dev_MiB", "used_MiB", "host_MiB", "TFLOP/s", "vs_PyT", "[min, max]",
                 "x_O0", "mem_O0", "status")]
    table = [["model", "batch", "row", "runs", "images_per_s", "images_per_s_min",
              "images_per_s_max", "step_ms", "device_ms", "device_peak_bytes",
              "device_used_peak_bytes", "host_peak_bytes", "tflops", "reference", "vs_pytorch",
              "vs_pytorch_min", "vs_pytorch_max", "speedup_vs_O0", "device_mem_vs_O0",
              "input_wait_s", "loader_fill_ms", "skipped_steps", "failed_runs"]]
    refs_named = []
    for key in order:
        c = cfgs[key]
        m, b, row = key
        flops = None
        for pr in ("PyTorch-fp32",) + AMPS:
            flops = flops or (cfgs.get((m, b, pr)) and cfgs[(m, b, pr)].med("flops_per_image"))
        ips = c.med("images_per_s")
        ref = reference(cfgs, m, b, row)
        q = ratios(c, ref)
        o0 = cfgs.get((m, b, "O0"))
        x0 = med(ratios(c, o0)) if o0 is not None and row != "O0" else (1.0 if row == "O0" else None)
        mem0 = (c.med("device_peak_bytes") / o0.med("device_peak_bytes")
                if o0 is not None and c.med("device_peak_bytes") and o0.med("device_peak_bytes") else None)
        tf = flops * ips / 1e12 if flops and ips else None
        status = "ok" if not c.failed else "%d of %d runs failed: %s" % (
            len(c.failed), len(c.failed) + len(c.runs), c.failed[0][1].replace("failed: ", "", 1))
        if ref is not None and row in ("O1", "O2") and (m, b, ref.row) not in refs_named:
            refs_named.append((m, b, ref.row))
        vals = c.values("images_per_s")
        mib = lambda k: None if c.med(k) is None else c.med(k) / MIB
        lines.append("%-8s %5d %-19s %9s %-15s %8s %7s %8s %8s %8s %7s %6s %-11s %5s %7s  %s" % (
            m, b, row, fmt(ips, "%.0f"),
            "[%.0f, %.0f]" % (min(vals), max(vals)) if vals else "-",
            fmt(c.med("step_ms"), "%.2f"), fmt(c.med("device_ms"), "%.2f"),
            fmt(mib("device_peak_bytes"), "%.1f"), fmt(mib("device_used_peak_bytes"), "%.0f"),
            fmt(mib("host_peak_bytes"), "%.0f"), fmt(tf, "%.1f"), fmt(med(q), "%.2f"),
            "[%.2f, %.2f]" % (min(q), max(q)) if q else "-", fmt(x0, "%.2f"),
            fmt(mem0, "%.2f"), status))
        table.append([m, b, row, len(c.runs), fmt(ips, "%.6g"),
                      fmt(min(vals) if vals else None, "%.6g"), fmt(max(vals) if vals else None, "%.6g"),
                      fmt(c.med("step_ms"), "%.6g"), fmt(c.med("device_ms"), "%.6g"),
                      fmt(c.med("device_peak_bytes"), "%.0f"),
                      fmt(c.med("device_used_peak_bytes"), "%.0f"),
                      fmt(c.med("host_peak_bytes"), "%.0f"), fmt(tf, "%.4g"),
                      ref.row if ref is not None else "", fmt(med(q), "%.4g"),
                      fmt(min(q) if q else None, "%.4g"), fmt(max(q) if q else None, "%.4g"),
                      fmt(x0, "%.4g"), fmt(mem0, "%.4g"), fmt(c.med("input_wait_s"), "%.4g"),
                      fmt(c.med("loader_fill_ms"), "%.4g"), fmt(c.med("skipped_steps"), "%.0f"),
                      len(c.failed)])
    goals = []
    pairs = []
    for m, b, _ in order:
        if (m, b) not in pairs:
            pairs.append((m, b))
    for m, b in pairs:
        o0, o2 = cfgs.get((m, b, "O0")), cfgs.get((m, b, "O2"))
        amp = cfgs.get((m, b, "PyTorch-amp"))
        best = reference(cfgs, m, b, "O2")
        fp32 = cfgs.get((m, b, "PyTorch-fp32"))
        mem = lambda a, z: ([a.med("device_peak_bytes") / z.med("device_peak_bytes")]
                            if a and z and a.med("device_peak_bytes") and z.med("device_peak_bytes") else [])
        where = "%s batch %d" % (m, b)
        name = best.row if best is not None else "PyTorch amp"
        if m in TEXT:
            for row in ("O2", "O2-bf16", "O2+flash", "O2-bf16+flash"):
                c = cfgs.get((m, b, row))
                if c is None:
                    continue
                goals.append(goal_line("%s: %s >= 1.2x the best PyTorch amp (%s) tokens/s (issue 49)"
                                       % (where, row, name), ratios(c, best), 1.2))
                goals.append(goal_line("%s: %s device memory <= %s's (issue 49)" % (where, row, name),
                                       mem(c, best), 1.0, at_least=False))
            continue
        goals.append(goal_line("%s: O2 fp16 >= 3x O0 images/s (issue 7)" % where, ratios(o2, o0), 3.0))
        goals.append(goal_line("%s: O2 fp16 device memory <= 0.55x O0's (issue 7)" % where,
                               mem(o2, o0), 0.55, at_least=False))
        if b == 128:
            goals.append(goal_line("%s: O2 fp16 >= 1.2x PyTorch amp images/s (issue 7)" % where,
                                   ratios(o2, amp), 1.2))
            goals.append(goal_line("%s: O2 fp16 device memory <= PyTorch amp's (issue 7)" % where,
                                   mem(o2, amp), 1.0, at_least=False))
        goals.append(goal_line("%s: O2 fp16 >= 1.2x the best PyTorch amp (%s) images/s (issue 48)"
                               % (where, name), ratios(o2, best), 1.2))
        goals.append(goal_line("%s: O2 fp16 device memory <= %s's (issue 48)" % (where, name),
                               mem(o2, best), 1.0, at_least=False))
        goals.append(goal_line("%s: O0 >= 1.0x PyTorch fp32 images/s (issue 48)" % where,
                               ratios(o0, fp32), 1.0))
    notes = [
        "%d rounds, alternating mpdist and PyTorch; a row is the median of its runs (images/s "
        "also [min, max])." % rounds,
        "images/s, step_ms: host wall time over the timed steps (mpdist: its step records' "
        "windows after the first; PyTorch: after its warm-up); dev_ms: device time per step "
        "from CUDA events (mpdist: clock marks at the windows' ends; PyTorch: events around "
        "the timed steps).",
        "dev_MiB: device allocations counted by the program (mpdist: device_peak_bytes; "
        "PyTorch: torch.cuda.max_memory_allocated()); used_MiB: cudaMemGetInfo's total - free "
        "at its highest (context and allocator reserve included); host_MiB: mpdist's counted "
        "host bytes (dataset, pinned loader slots), PyTorch's peak resident set.",
        "vs_PyT: median of the rounds' ratios to PyTorch-fp32 (O0 rows; TF32 off) or to the "
        "faster PyTorch amp (O1-O3); x_O0: the same against mpdist O0; mem_O0: dev_MiB over "
        "O0's.",
    ]
    if any(m in TEXT for m, _, _ in order):
        notes.append("gpt, gpt2-small: images/s are sequences/s (their context 128 and 1024 "
                     "tokens each); PyTorch's input is random bytes, mpdist's the text.")
    for m, b, r in refs_named:
        notes.append("%s batch %d: the faster PyTorch amp is %s." % (m, b, r))
    for key in order:
        why = [w for _, w, _ in cfgs[key].failed if "torch.compile failed" in w]
        if key[2] == "PyTorch-amp-compile" and why:
            notes.append("%s batch %d: torch.compile did not work on this machine in %d of %d "
                         "rounds: %s" % (key[0], key[1], len(why), len(cfgs[key].failed) +
                                         len(cfgs[key].runs), why[0].split("failed: ", 2)[-1]))
    text = "\n".join(lines) + "\n\n" + "\n".join(goals) + "\n\n" + "\n".join(notes) + "\n"
    with open(os.path.join(outdir, "table.txt"), "w") as f:
        f.write(text)
    with open(os.path.join(outdir, "table.csv"), "w", newline="") as f:
        f.write(header + "\n")
        csv.writer(f, lineterminator="\n").writerows(table)
    with open(os.path.join(outdir, "goals.txt"), "w") as f:
        f.write("\n".join(goals) + "\n")
    sys.stdout.write(text)
    bad = sum(len(c.failed) for c in cfgs.values())
    missed = sum(g.startswith("FAIL") for g in goals)
    if bad or missed:
        print("gpu_step: %d runs failed, %d goals missed" % (bad, missed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
