#!/usr/bin/env python3
"""What the real model's v2 plans grant, judged against the suite's ground truth
(docs/evaluation.md, "Plans, read from the store").

    scripts/live-plans.py OUT/eval.db SUITE/suite.toml [PLANS.jsonl]

Reads every strategic proposal of a live evaluation's store (`cairn eval --live` keeps it in
OUT/eval.db): the accepted plan versions and the proposals refused (`plan.refused`). For each,
against the task's ground-truth steps: how many milestones, how many of the task's steps have
their tool granted by some milestone (v2 gives a milestone's tactical call only the tools its
milestone names, so a step whose tool no milestone grants cannot be taken under that plan),
and the tools granted that no step uses. Writes one JSON line per proposal to PLANS.jsonl
(default: stdout) and a summary on stderr. The store is opened read-only; a running
evaluation may keep writing it.
"""

import json
import sqlite3
import sys
import tomllib
from collections import Counter


def load_suite(path):
    with open(path, "rb") as f:
        suite = tomllib.load(f)
    return {t["goal"]: t for t in suite["tasks"]}


def leaves(check):
    """The leaves of an acceptance check (`all` flattened)."""
    if not isinstance(check, dict):
        return []
    if check.get("type") == "all":
        return [leaf for inner in check.get("checks") or [] for leaf in leaves(inner)]
    return [check]


def named(leaf):
    """The artifact an artifact or schema leaf names (None for other leaves)."""
    return leaf.get("name") if leaf.get("type") == "artifact" else leaf.get("artifact")


def check_of(milestone, steps):
    """Whether a milestone's check can pass in the world. The world names a step's artifact
    by the step's id and, under `[world] declare_artifacts`, by its tool's name too (the
    artifact a tool declares; none of the plans read before that setting named one), and
    no world tool answers with an exit code, so: an artifact or schema leaf passes only if it
    names some step or a step's tool (`names_step`), and, stricter, one whose tool this
    milestone is granted (`reachable`: a milestone's check reads its own artifacts only); a
    command leaf never passes; a verifier leaf is left to the verifier model."""
    tools = set(milestone.get("tools") or [])
    ids = {s["id"]: s["tool"] for s in steps}
    ids.update({s["tool"]: s["tool"] for s in steps})
    found = leaves(milestone.get("accept"))

    def passes(leaf, strict):
        kind = leaf.get("type")
        if kind in ("artifact", "schema"):
            name = named(leaf)
            return name in ids and (not strict or ids[name] in tools)
        return kind == "verifier"

    return {
        "names_step": bool(found) and all(passes(leaf, False) for leaf in found),
        "reachable": bool(found) and all(passes(leaf, True) for leaf in found),
        "types": sorted({leaf.get("type") for leaf in found}),
    }


def judge(task, plan, strategy, kind, attempt):
    milestones = plan.get("milestones") or []
    granted = set()
    for m in milestones:
        granted.update(m.get("tools") or [])
    steps = task.get("steps") or []
    used = {s["tool"] for s in steps}
    checks = [check_of(m, steps) for m in milestones]
    return {
        "task": task["id"],
        "category": task["category"],
        "strategy": strategy,
        "kind": kind,
        "attempt": attempt,
        "milestones": len(milestones),
        "phases": len({s.get("phase", s["id"]) for s in steps}),
        "steps": len(steps),
        "steps_granted": sum(1 for s in steps if s["tool"] in granted),
        "step_tools": len(used),
        "step_tools_granted": len(used & granted),
        "checks_naming_a_step": sum(1 for c in checks if c["names_step"]),
        "checks_reachable": sum(1 for c in checks if c["reachable"]),
        "tools_granted": sorted(granted),
        "tools_unused": sorted(granted - used),
        "plan": [
            {"id": m.get("id"), "tools": m.get("tools"), "accept": m.get("accept"), **c}
            for m, c in zip(milestones, checks)
        ],
    }


def proposals(db, tasks):
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    goals = {tid: (goal, strategy) for tid, goal, strategy in con.execute(
        "select id, goal, strategy from tasks")}
    out = []
    for tid, version, reason, plan in con.execute(
            "select task_id, version, reason, plan from plan_versions order by task_id, version"):
        goal, strategy = goals[tid]
        if goal in tasks:
            out.append(judge(tasks[goal], json.loads(plan), strategy, reason, version))
    for tid, data in con.execute(
            "select task_id, data from events where kind = 'plan.refused' order by task_id, seq"):
        goal, strategy = goals[tid]
        event = json.loads(data)
        proposal = event.get("proposal")
        if goal in tasks and isinstance(proposal, dict):
            out.append(judge(tasks[goal], proposal, strategy, "refused", event.get("attempt")))
    return out


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    rows = proposals(sys.argv[1], load_suite(sys.argv[2]))
    sink = open(sys.argv[3], "w") if len(sys.argv) > 3 else sys.stdout
    for row in rows:
        sink.write(json.dumps(row) + "\n")
    # One plan per task: at temperature 0 the first plan of a task is the same for every
    # repeat and for v2 and `auto` alike (the strategic prompt's input is the same).
    first = {}
    for r in rows:
        if r["kind"] == "initial" and r["steps"]:
            first.setdefault(r["task"], r)
    first = list(first.values())
    total = lambda key: sum(r[key] for r in first)
    by_cat = Counter(r["category"] for r in first)
    print(f"first plans of tasks with steps: {len(first)} ({dict(by_cat)}); step tools "
          f"granted by no milestone: {total('step_tools') - total('step_tools_granted')} of "
          f"{total('step_tools')} (plan_tool_miss); milestones whose check cannot pass in the "
          f"world: {total('milestones') - total('checks_naming_a_step')} of "
          f"{total('milestones')} (plan_accept_miss); checks reachable in their own milestone: "
          f"{total('checks_reachable')} of {total('milestones')}; proposals read: {len(rows)}",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
