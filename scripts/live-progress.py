#!/usr/bin/env python3
"""How far runs get on the multi-step tasks, live beside simulated (docs/evaluation.md,
"Calibrating the slips").

    scripts/live-progress.py SIM/report.json LIVE/runs.jsonl [LIVE/trace.jsonl]

Per strategy, over the medium and uncertain tasks: runs, runs that performed at least one
step of the task, and how many of those ended verified, on each side. A world whose runs,
once started right, finish far more often than the live runs do is missing what stops a real
model after its first right step. With the live trace, also the verdicts on the first call of
every step list v2 and `auto` asked for a milestone with steps pending, per category (the
same verdicts as `slips.md`: next, later, wrong_args, repeat, other, stop).
"""

import importlib.util
import json
import os
import sys
from collections import Counter, defaultdict

BASELINES = {"one_shot", "reactive", "v1", "direct"}

# The run-log reader of scripts/live-vs-sim.py (a report.json or a runs.jsonl).
_spec = importlib.util.spec_from_file_location(
    "live_vs_sim", os.path.join(os.path.dirname(os.path.abspath(__file__)), "live-vs-sim.py")
)
_live_vs_sim = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_live_vs_sim)
records = _live_vs_sim.records


def progress(recs):
    """strategy -> [runs, runs with a step performed, of those verified]."""
    out = defaultdict(lambda: [0, 0, 0])
    for r in recs:
        if r["category"] == "simple":
            continue
        row = out[r["strategy"]]
        row[0] += 1
        if r.get("steps_performed", 0) > 0:
            row[1] += 1
            row[2] += 1 if r["verified"] else 0
    return out


def first_calls(trace_path):
    """category -> Counter of first-call verdicts of v2/auto milestone lists with steps pending."""
    out = defaultdict(Counter)
    with open(trace_path) as f:
        for line in f:
            r = json.loads(line)
            if r.get("purpose") != "tactical" or r.get("milestone") in BASELINES:
                continue
            if not r.get("milestone") or not r.get("pending"):
                continue
            out[r["task"].split("-", 1)[0]][r.get("first")] += 1
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sim, live = progress(records(sys.argv[1])), progress(records(sys.argv[2]))
    print("| strategy | simulated: runs, with a step, of those verified | live: runs, with a step, of those verified |")
    print("|---|---|---|")
    for strategy in sorted(set(sim) | set(live)):
        s, l = sim[strategy], live[strategy]
        print(f"| {strategy} | {s[0]}, {s[1]}, {s[2]} | {l[0]}, {l[1]}, {l[2]} |")
    if len(sys.argv) > 3:
        print()
        print("| category | lists | next | later | wrong_args | repeat | other | stop |")
        print("|---|---|---|---|---|---|---|---|")
        for category, verdicts in sorted(first_calls(sys.argv[3]).items()):
            kinds = ["next", "later", "wrong_args", "repeat", "other", "stop"]
            cells = " | ".join(str(verdicts[k]) for k in kinds)
            print(f"| {category} | {sum(verdicts.values())} | {cells} |")


if __name__ == "__main__":
    main()
