#!/usr/bin/env python3
"""Rule 9's fresh rates split by what a call can see of its work (docs/evaluation.md,
"Calibrating the slips").

    scripts/live-fresh.py TRACE.jsonl SUITE/suite.toml

Reads a live trace (`cairn eval --live` writes trace.jsonl: one judged call per line) and
counts, over the calls that choose what to do (step lists, act-loop rounds, v1's list) and
are fresh (not an act-loop round right after an invented one, as crates/cairn-eval/src/invent_fit.rs
counts them), how often the call invented (another tool, invented arguments, or a step
already done), split as the world's `Fresh` states are:

- `stated`: steps pending, nothing done yet, and every argument of the task's first step is
  written in the goal (the trace does not hold the call's input, so only calls made before any
  step was done can be classified; later calls are counted apart, unclassified);
- `pending`: steps pending, nothing done yet, and some argument is not in the goal;
- `done`: nothing pending, and the task has steps (its work is done);
- `idle`: nothing pending, and the task has no steps (a question answered from knowledge).

Prints one table row per state, with the runs behind it: calls of one run are not
independent, and at temperature 0 two repeats of a task behave alike.
"""

import json
import sys
import tomllib
from collections import defaultdict

INVENTED = ("other", "wrong_args", "repeat")


def chooses(row):
    purpose, milestone = row["purpose"], row["milestone"]
    if purpose == "tactical":
        return milestone != "one_shot"
    return purpose == "strategic" and milestone == "v1"


def state(row, task):
    steps = task.get("steps") or []
    if row["pending"] == 0:
        return "done" if steps else "idle"
    if row["pending"] != len(steps):
        return "later (unclassified)"
    args = (steps[0].get("args") or {}).values()
    return "stated" if all(str(v) in task["goal"] for v in args) else "pending"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    with open(sys.argv[2], "rb") as f:
        tasks = {t["id"]: t for t in tomllib.load(f)["tasks"]}
    counts = defaultdict(lambda: [0, 0, set()])
    last = {}
    with open(sys.argv[1]) as f:
        for line in f:
            row = json.loads(line)
            if not chooses(row) or row["task"] not in tasks:
                continue
            now = row["first"] in INVENTED
            run = (row["task"], row["repeat"])
            if row["milestone"] == "reactive":
                previous = last.get(run)
                last[run] = now
                if previous is True:
                    continue
            c = counts[state(row, tasks[row["task"]])]
            c[0] += 1
            c[1] += int(now)
            c[2].add((run, row["milestone"]))
    print("| state | invented / calls | rate | runs |")
    print("|---|---|---|---|")
    for name in ("idle", "done", "pending", "stated", "later (unclassified)"):
        calls, invented, runs = counts[name]
        rate = f"{invented / calls:.2f}" if calls else "-"
        print(f"| {name} | {invented} / {calls} | {rate} | {len(runs)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
