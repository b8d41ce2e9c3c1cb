#!/usr/bin/env python3
"""Writes a step profile for the scaling model (cluster/step_model.py) from a run with
log.profile = true: its metrics' "backward" record (each gradient's bytes on the wire and when
backward completed it) and the summary's profile_ms (forward, backward and step phases).

  cluster/make_profile.py METRICS.jsonl -o PROFILE.json [--name NAME] [--source TEXT]
      [--phases PROFILE.txt] [--step-ms MS]

--phases takes the phase split from another run's per-op table instead (the table rank 0 prints
with log.profile, e.g. a GPU run's), keeping the gradients and the ready times as fractions of
backward from METRICS: for a GPU profile whose run wrote no backward record. --step-ms scales
every time so that the step takes MS (a run without log.profile: the profile synchronises the
device around every op, which lengthens a GPU step). The phases: forward and backward are the
sums of their ops; optimizer_ms the step phase's ops (loss, unscale and check, agreement,
optimizer, scaler, statistics) less the input ("data") and the waits; other_ms what is left of
the step (input, time between ops). With train.accum_steps = k (the record's micro_batches)
forward, backward and other are a micro-batch's (the step's over k), and the ready times the last
micro-batch's; the profile's "accum" says k (cluster/scaling.sh --predict --accum). Exit 2 with
one line for a bad input.
"""
import argparse, json, math, re, sys

NOT_OPTIMIZER = ("data", "gradient sync wait", "host point", "(between ops)")


def fail(msg):
    print(f"make_profile: {msg}", file=sys.stderr)
    sys.exit(2)


def phases_from_metrics(summary):
    prof = summary.get("profile_ms")
    if not prof:
        fail("the summary has no profile_ms: run with --set log.profile=true")
    return prof["step"], {k: v for k, v in prof.items() if k != "step"}


def phases_from_table(path):
    """(step ms, {"op phase": ms}) from a per-op table as mpdist prints it."""
    try:
        text = open(path, encoding="utf-8").read()
    except OSError as e:
        fail(f"{path}: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"{path}: not a per-op table: not UTF-8 text")
    step = re.search(r"^profile \(rank \d+(?:, \w+ clock)?\): \d+ steps after the first, ([0-9.]+) ms a step", text, re.M)
    rows = re.findall(r"^(\S.*?)\s+(forward|backward|step)\s+([0-9.]+)\s+[0-9.]+%", text, re.M)
    if not step or not rows:
        fail(f"{path}: no per-op profile table (the lines mpdist prints with log.profile)")
    return float(step.group(1)), {f"{op} {phase}": float(ms) for op, phase, ms in rows}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("metrics")
    p.add_argument("-o", "--out", required=True)
    p.add_argument("--name")
    p.add_argument("--source", default="")
    p.add_argument("--phases")
    p.add_argument("--step-ms", type=float)
    a = p.parse_args()
    if a.step_ms is not None and not (a.step_ms > 0 and math.isfinite(a.step_ms)):
        fail(f"--step-ms {a.step_ms}: give the unprofiled step's milliseconds, above 0")
    try:
        recs = [json.loads(line) for line in open(a.metrics, encoding="utf-8") if line.strip()]
    except OSError as e:
        fail(f"{a.metrics}: {e.strerror}")
    except UnicodeDecodeError:
        fail(f"{a.metrics}: not JSON Lines: not UTF-8 text")
    except json.JSONDecodeError as e:
        fail(f"{a.metrics}: not JSON Lines: {e.msg}")
    recs = [r for r in recs if isinstance(r, dict)]
    back = [r for r in recs if r.get("type") == "backward"]
    summ = [r for r in recs if r.get("type") == "summary"]
    if not back or not summ:
        fail(f"{a.metrics}: no backward and summary records: run with --set log.profile=true")
    try:
        out = profile(back[-1], summ[-1], a)
    except (KeyError, TypeError, ValueError, ZeroDivisionError) as e:
        fail(f"{a.metrics}: a backward or summary record not as mpdist writes it ({type(e).__name__}: {e})")
    try:
        with open(a.out, "w") as f:
            json.dump(out, f, indent=1)
            f.write("\n")
    except OSError as e:
        fail(f"-o {a.out}: {e.strerror}")


def profile(back, summ, a):
    """The profile (a dict) from the run's last backward and summary records."""
    own_step, own = phases_from_metrics(summ)
    step, ops = phases_from_table(a.phases) if a.phases else (own_step, own)
    total = lambda phase: sum(v for k, v in ops.items() if k.endswith(" " + phase))
    fwd, bwd = total("forward"), total("backward")
    opt = sum(v for k, v in ops.items() if k.endswith(" step") and k[:-5] not in NOT_OPTIMIZER)
    micro = int(back.get("micro_batches", 1))
    # the ready times as fractions of this run's own (last micro-batch's) backward, onto the
    # chosen backward
    own_bwd = max([sum(v for k, v in own.items() if k.endswith(" backward")) / micro] +
                  [q["ready_ms"] for q in back["params"]])
    if not (step > 0 and bwd > 0 and own_bwd > 0 and micro >= 1):
        fail(f"{a.metrics}: the profile has no step or backward time to scale (step {step} ms, "
             f"backward {bwd} ms)")
    k = (a.step_ms / step) if a.step_ms else 1.0
    b = k * bwd / micro
    params = [{"name": q["name"], "group": q["group"], "bytes": int(q["bytes"]),
               "ready_ms": round(b * min(1.0, q["ready_ms"] / own_bwd), 6)} for q in back["params"]]
    return {"name": a.name or f"{summ.get('model')} {summ.get('opt_level')} ({summ.get('backend')})",
            "source": a.source, "model": summ.get("model"), "opt_level": summ.get("opt_level"),
            "grads": summ.get("amp", {}).get("grads"), "accum": micro,
            "step_ms": round(k * step, 6), "forward_ms": round(k * fwd / micro, 6), "backward_ms": round(b, 6),
            "optimizer_ms": round(k * opt, 6),
            "other_ms": round(k * max(0.0, step - fwd - bwd - opt) / micro, 6), "params": params}


if __name__ == "__main__":
    main()
