#!/usr/bin/env python3
"""Joins the per-rank timelines of a run (log.trace = "DIR": DIR/rank-<R>.json, Chrome
trace-event JSON on rank 0's clock) into DIR/trace.json, which Perfetto (ui.perfetto.dev: Open
trace file) and chrome://tracing open: one process per rank, a track for its model (forward,
backward per layer, the step's parts) and one for its collectives. A rank file cut short (a rank
that crashed) is read up to its last whole event. Prints what it joined.

Usage: bench/trace_merge.py DIR [--out FILE]"""
import argparse
import glob
import json
import os
import re
import sys


def read_rank(path):
    """The events of one rank's file; a file without its closing bracket is read up to its
    last whole event."""
    text = open(path, encoding="utf-8").read()
    try:
        return json.loads(text), False
    except json.JSONDecodeError:
        lines = text.rstrip().splitlines()
        while lines:
            try:
                return json.loads("\n".join(lines).rstrip().rstrip(",") + "\n]"), True
            except json.JSONDecodeError:
                lines.pop()
        raise


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", help="the log.trace directory")
    ap.add_argument("--out", help="the joined file (default DIR/trace.json)")
    a = ap.parse_args()
    files = sorted(glob.glob(os.path.join(a.dir, "rank-*.json")),
                   key=lambda f: int(re.findall(r"rank-(\d+)\.json$", f)[0]))
    if not files:
        sys.exit(f"trace_merge: no rank-*.json in {a.dir} (log.trace of a run)")
    events, cut = [], []
    for f in files:
        try:
            ev, short = read_rank(f)
        except (OSError, json.JSONDecodeError) as e:
            sys.exit(f"trace_merge: {f}: not a trace file ({e})")
        events += ev
        if short:
            cut.append(os.path.basename(f))
    out = a.out or os.path.join(a.dir, "trace.json")
    with open(out, "w", encoding="utf-8") as o:
        json.dump({"traceEvents": events, "displayTimeUnit": "ms"}, o)
    steps = sum(1 for e in events if e.get("name") == "step")
    print(f"trace_merge: {len(files)} ranks, {len(events)} events ({steps} steps) -> {out}"
          + (f"; cut short: {', '.join(cut)}" if cut else ""))


if __name__ == "__main__":
    main()
