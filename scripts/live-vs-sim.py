#!/usr/bin/env python3
"""Live beside simulated, task by task (docs/evaluation.md, "Calibrating the slips").

    scripts/live-vs-sim.py SIM/report.json LIVE/runs.jsonl [--markdown]

Reads the simulated report's records and the live run log (or a live report.json), keeps the
tasks both hold, and prints per task and strategy the verified share of each side, then per
category the strategies ordered by verified share on each side and whether the orders agree,
and the mean absolute difference between the two sides' verified shares over every (task,
strategy) cell both hold: one number to compare two calibrations of the world against the
same live runs (lower is closer).
Only tasks the live log holds are compared, and a category's orders only over the tasks every
strategy has run live, so a partial live run compares like with like.
"""

import json
import sys
from collections import defaultdict


def records(path):
    if path.endswith(".jsonl"):
        with open(path) as f:
            return [json.loads(line) for line in f if line.strip()]
    with open(path) as f:
        return json.load(f)["records"]


def tally(recs):
    """(task, strategy) -> [verified, runs], task -> category."""
    counts = defaultdict(lambda: [0, 0])
    category = {}
    for r in recs:
        cell = counts[(r["task"], r["strategy"])]
        cell[0] += 1 if r["verified"] else 0
        cell[1] += 1
        category[r["task"]] = r["category"]
    return counts, category


def order(shares):
    """Strategies from best to worst; ties share a rank, written `a = b`."""
    ranked = sorted(shares.items(), key=lambda kv: -kv[1])
    out, last = [], None
    for name, share in ranked:
        if last is not None and abs(share - last) < 1e-9:
            out[-1] += f" = {name}"
        else:
            out.append(name)
        last = share
    return " > ".join(out)


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    sim, sim_cat = tally(records(argv[1]))
    live, live_cat = tally(records(argv[2]))
    strategies = sorted({s for _, s in live} & {s for _, s in sim},
                        key=["one_shot", "reactive", "v1", "v2", "auto"].index)
    tasks = [t for t in live_cat if t in sim_cat]
    print("| task | category | " + " | ".join(f"{s} sim / live" for s in strategies) + " |")
    print("|---|---|" + "---|" * len(strategies))
    for task in tasks:
        cells = []
        for s in strategies:
            a, b = sim.get((task, s)), live.get((task, s))
            if not b:
                cells.append("-")
                continue
            cells.append(f"{a[0]}/{a[1]} / {b[0]}/{b[1]}")
        print(f"| {task} | {live_cat[task]} | " + " | ".join(cells) + " |")
    print()
    print("| category | tasks compared | simulated order | live order | agree |")
    print("|---|---|---|---|---|")
    for cat in ["simple", "medium", "uncertain"]:
        # Only tasks every strategy has run live: each order compares the same tasks.
        in_cat = [t for t in tasks if live_cat[t] == cat
                  and all((t, s) in live for s in strategies)]
        if not in_cat:
            continue
        shares = {}
        for side, counts in (("sim", sim), ("live", live)):
            per = {}
            for s in strategies:
                v = sum(counts[(t, s)][0] for t in in_cat if (t, s) in live)
                n = sum(counts[(t, s)][1] for t in in_cat if (t, s) in live)
                if n:
                    per[s] = v / n
            shares[side] = per
        a, b = order(shares["sim"]), order(shares["live"])
        print(f"| {cat} | {len(in_cat)} | {a} | {b} | {'yes' if a == b else 'no'} |")
    cells = [k for k in live if k in sim]
    if cells:
        gap = sum(abs(sim[k][0] / sim[k][1] - live[k][0] / live[k][1]) for k in cells)
        print()
        print(f"Mean absolute difference of the verified share, simulated against live, over "
              f"the {len(cells)} (task, strategy) cells both hold: {gap / len(cells):.3f}.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
