#!/usr/bin/env python3
"""Prints the per-op table of an mpdist summary record (log.profile's "profile_ms") as markdown:
one row per op and phase, slowest first, with milliseconds per step and share of the step, the
time in no op, and the largest share of one op (forward and backward together) other than
GEMM/convolution (conv2d, linear).

Usage: python3 bench/profile_table.py [--largest | --beside OTHER [--names A B]] SUMMARY_JSON
  SUMMARY_JSON     the summary record's line
  --largest        print only that op and its share, "OP PERCENT" (e.g. "batchnorm 12.3"; spaces
                   in the op's name become "_"), or "- -" when the run has no profile
  --beside OTHER   another run's summary line: one row per op and phase of either, this run's
                   ms/step beside OTHER's and their ratio (OTHER / this), slowest first by this
                   run; --names labels the two columns (default "ms" and "other ms")
"""
import argparse
import json

GEMM = ("conv2d", "linear")


def largest(prof):
    """(ms, op) of the op other than GEMM/convolution with the most time, phases added."""
    kinds = {}
    for key, ms in prof.items():
        op = key.rsplit(" ", 1)[0]
        kinds[op] = kinds.get(op, 0.0) + ms
    return max(((ms, op) for op, ms in kinds.items() if op not in GEMM), default=(0.0, "none"))


def beside(prof, other, names):
    """Prints the two profiles' rows side by side (ms/step of each, other / this)."""
    def ratio(a, b):
        return "%.2f" % (b / a) if a > 0 else "-"
    print("| op | phase | %s | %s | ratio |" % tuple(names))
    print("|---|---|---:|---:|---:|")
    steps = (prof.pop("step", 0.0), other.pop("step", 0.0))
    for key in sorted(set(prof) | set(other), key=lambda k: (-prof.get(k, 0.0), k)):
        op, phase = key.rsplit(" ", 1)
        a, b = prof.get(key, 0.0), other.get(key, 0.0)
        print("| %s | %s | %.3f | %.3f | %s |" % (op, phase, a, b, ratio(a, b)))
    rest = (steps[0] - sum(prof.values()), steps[1] - sum(other.values()))
    print("| (between ops) | step | %.3f | %.3f | %s |" % (rest[0], rest[1], ratio(*rest)))
    print("| **step** | | %.3f | %.3f | %s |" % (steps[0], steps[1], ratio(*steps)))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--largest", action="store_true",
                   help="print only the largest op other than GEMM/convolution and its share")
    p.add_argument("--beside", metavar="OTHER", help="another run's summary record's JSON line")
    p.add_argument("--names", nargs=2, default=("ms", "other ms"), help="the two columns' labels")
    p.add_argument("summary", help="the summary record's JSON line")
    args = p.parse_args()
    prof = dict(json.loads(args.summary).get("profile_ms", {}))
    if args.beside is not None:
        beside(prof, dict(json.loads(args.beside).get("profile_ms", {})), args.names)
        return
    step = prof.pop("step", 0.0)
    if not step:
        print("- -" if args.largest else
              "(no profile: the run had log.profile off, or no step after the first)")
        return
    if args.largest:
        worst = largest(prof)
        print("%s %.1f" % (worst[1].replace(" ", "_"), 100 * worst[0] / step))
        return
    print("| op | phase | ms/step | share |")
    print("|---|---|---:|---:|")
    for key, ms in sorted(prof.items(), key=lambda kv: -kv[1]):
        op, phase = key.rsplit(" ", 1)
        print("| %s | %s | %.2f | %.1f%% |" % (op, phase, ms, 100 * ms / step))
    rest = step - sum(prof.values())
    print("| (between ops) | step | %.2f | %.1f%% |" % (rest, 100 * rest / step))
    worst = largest(prof)
    print()
    print("step %.2f ms; the largest op other than GEMM/convolution: %s at %.1f%%"
          % (step, worst[1], 100 * worst[0] / step))


if __name__ == "__main__":
    main()
