#!/usr/bin/env python3
"""A person signs off a task's plan and calls on the real local model (docs/api.md, "Approvals").

    scripts/install-model.sh 1.5b && cargo build --release
    scripts/live-approve.py [1.5b|0.5b]

Starts the model server, `cairn sim` serving the tools of scenarios/service_directory.json and
`cairn serve` on a fresh SQLite file, as scripts/live-steer.py does. Submits the two-owner goal
of tests/live_model.rs (case c, strategy v2) twice:

- `approval: plan`: the first plan is sent back to revise ("only the owner of service A gets a
  note"); the next request is approved, and every later one until the task ends;
- `approval: steps`: every call request is shown and approved until the task ends.

Prints, per task, each request (kind, what it asked, the decision), the plan versions and the
notes written, as one JSON object; logs and the database stay under target/tmp/live-approve/.
`CAIRN_BIN` picks the binary (default target/release/cairn).
"""

import importlib.util
import json
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SPEC = importlib.util.spec_from_file_location("live_steer", ROOT / "scripts/live-steer.py")
steer = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(steer)

REVISE = "Do not write to the owner of service B: only the owner of service A gets a note."


def pending(api, task_id):
    """The task's pending request once it waits, or None once it ended."""
    while True:
        time.sleep(1)
        _, task = steer.call("GET", f"{api}/v1/tasks/{task_id}")
        if task["status"] in ("succeeded", "failed", "budget_exhausted", "cancelled"):
            return None, task
        if task["status"] == "awaiting_approval":
            _, listed = steer.call("GET", f"{api}/v1/tasks/{task_id}/approvals")
            return listed["items"][-1], task


def asked(request):
    if request["kind"] == "plan":
        return [[m["id"], m["title"], m["tools"]] for m in request["request"]["milestones"]]
    return [[c["tool"], c["args"]] for c in request["request"]["calls"]]


def run(api, approval):
    status, task = steer.call("POST", f"{api}/v1/tasks", {
        "goal": steer.GOAL, "strategy": "v2", "approval": approval,
        "budget": {"tokens": 60000, "tool_calls": 12, "wall_ms": 900000}})
    assert status == 202, task
    task_id, requests, revised = task["id"], [], False
    while True:
        request, task = pending(api, task_id)
        if request is None:
            break
        body = {"decision": "approve", "digest": request["digest"]}
        if approval == "plan" and not revised:
            body = {"decision": "revise", "digest": request["digest"], "comment": REVISE}
            revised = True
        status, decided = steer.call(
            "POST", f"{api}/v1/tasks/{task_id}/approvals/{request['id']}", body)
        assert status == 200, decided
        requests.append({"id": request["id"], "kind": request["kind"],
                         "asked": asked(request), "decision": decided["state"]})
    _, plans = steer.call("GET", f"{api}/v1/tasks/{task_id}/plans")
    notes = [e["data"]["args"] for e in steer.events(api, task_id)
             if e["kind"] == "step.finished" and e["data"].get("tool") == "write_note"
             and e["data"].get("ok")]
    result = task.get("result") or {}
    return {
        "task": task_id, "approval": approval, "status": task["status"],
        "verified": result.get("verified"), "reason": result.get("reason"),
        "wall_ms_spent": (result.get("spend") or {}).get("wall_ms"),
        "requests": requests,
        "plans": [{"version": p["version"], "reason": p["reason"],
                   "milestones": [[m["id"], m["title"], m["status"]]
                                  for m in p["plan"]["milestones"]]}
                  for p in plans.get("items", [])],
        "notes_written": notes,
    }


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "1.5b"
    out = ROOT / "target/tmp/live-approve"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    procs = steer.start(out, which)
    api = f"http://127.0.0.1:{steer.API_PORT}"
    try:
        print(json.dumps([run(api, "plan"), run(api, "steps")], indent=1))
    finally:
        for proc in procs:
            proc.terminate()


if __name__ == "__main__":
    main()
