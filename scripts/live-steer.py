#!/usr/bin/env python3
"""A person steers a running task on the real local model (docs/api.md, "Steering").

    scripts/install-model.sh 1.5b && cargo build --release
    scripts/live-steer.py [1.5b|0.5b]

Starts the model server (scripts/model_server.py), `cairn sim` serving the tools of
scenarios/service_directory.json and `cairn serve` on a fresh SQLite file, all on 127.0.0.1.
Submits the two-owner goal of tests/live_model.rs (case c, strategy v2); as soon as its first
milestone starts, sends the message that only service A's owner gets a note; waits for the end.
Prints the plan versions (reason, milestones), the notes written and how the task ended, as one
JSON object; logs and the database stay under target/tmp/live-steer/. `CAIRN_BIN` picks the
binary (default target/release/cairn).
"""

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = ("Look up who owns services A and B, then write a note to each owner saying their "
        "service will be restarted tonight")
SAID = "Do not write to the owner of service B: only the owner of service A gets a note."
MODEL_PORT, TOOLS_PORT, API_PORT = 8191, 8192, 8193


def call(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method,
                                     headers={"content-type": "application/json",
                                              "accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"null")


def wait_up(url, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2):
                return
        except (urllib.error.URLError, ConnectionError, OSError):
            time.sleep(0.5)
    sys.exit(f"live-steer: {url} did not answer in {seconds} s")


def events(api, task):
    status, page = call("GET", f"{api}/v1/tasks/{task}/events?after=0")
    items = []
    while status == 200 and page["items"]:
        items += page["items"]
        status, page = call("GET", f"{api}/v1/tasks/{task}/events?after={page['next_after']}")
    return items


def start(out, which):
    model = ROOT / f".deps/models/qwen2.5-coder-{which}-instruct-q4_k_m.gguf"
    binary = Path(os.environ.get("CAIRN_BIN", ROOT / "target/release/cairn"))
    if not model.is_file() or not binary.is_file():
        sys.exit(f"live-steer: need {model} (scripts/install-model.sh) and {binary}")
    log = lambda name: open(out / f"{name}.log", "w")
    procs = [subprocess.Popen([str(ROOT / ".deps/llama/bin/python"),
                               str(ROOT / "scripts/model_server.py"), "--model", str(model),
                               "--port", str(MODEL_PORT)], stdout=log("model"), stderr=subprocess.STDOUT),
             subprocess.Popen([str(binary), "sim", "--scenario",
                               str(ROOT / "scenarios/service_directory.json"),
                               "--port", str(TOOLS_PORT)], stdout=log("sim"), stderr=subprocess.STDOUT)]
    wait_up(f"http://127.0.0.1:{TOOLS_PORT}/sim/stats", 60)
    wait_up(f"http://127.0.0.1:{MODEL_PORT}/health", 240)
    tools = out / "tools.json"
    with urllib.request.urlopen(f"http://127.0.0.1:{TOOLS_PORT}/sim/registry.json") as response:
        tools.write_bytes(response.read())
    env = dict(os.environ, CAIRN_LLM_DEFAULT_BASE_URL=f"http://127.0.0.1:{MODEL_PORT}",
               CAIRN_LLM_DEFAULT_MODEL=f"qwen2.5-coder-{which}", CAIRN_TOOLS_FILE=str(tools),
               CAIRN_SQLITE_PATH=str(out / "cairn.db"), CAIRN_LISTEN_ADDR=f"127.0.0.1:{API_PORT}")
    for name in ("DATABASE_URL", "CAIRN_DATABASE_URL", "CAIRN_CONFIG"):
        env.pop(name, None)
    procs.append(subprocess.Popen([str(binary), "serve"], env=env, stdout=log("serve"),
                                  stderr=subprocess.STDOUT))
    wait_up(f"http://127.0.0.1:{API_PORT}/healthz", 60)
    return procs


def steer(api):
    status, task = call("POST", f"{api}/v1/tasks", {
        "goal": GOAL, "strategy": "v2",
        "budget": {"tokens": 60000, "tool_calls": 10, "wall_ms": 900000}})
    assert status == 202, task
    task_id, sent = task["id"], None
    while True:
        time.sleep(1)
        status, task = call("GET", f"{api}/v1/tasks/{task_id}")
        if task["status"] not in ("queued", "running"):
            break
        started = [e for e in events(api, task_id) if e["kind"] == "milestone.started"]
        if started and sent is None:
            status, sent = call("POST", f"{api}/v1/tasks/{task_id}/messages", {"text": SAID})
            assert status == 202, sent
    return task_id, task, sent


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "1.5b"
    out = ROOT / "target/tmp/live-steer"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    procs = start(out, which)
    api = f"http://127.0.0.1:{API_PORT}"
    try:
        task_id, task, sent = steer(api)
        _, plans = call("GET", f"{api}/v1/tasks/{task_id}/plans")
        notes = [e["data"]["args"] for e in events(api, task_id)
                 if e["kind"] == "step.finished" and e["data"].get("tool") == "write_note"
                 and e["data"].get("ok")]
        raised = [e["data"] for e in events(api, task_id) if e["kind"] == "plan.constraint_raised"]
        print(json.dumps({
            "task": task_id, "status": task["status"],
            "verified": (task.get("result") or {}).get("verified"),
            "reason": (task.get("result") or {}).get("reason"),
            "message": sent, "raised": raised,
            "plans": [{"version": p["version"], "reason": p["reason"],
                       "milestones": [[m["id"], m["title"], m["status"]]
                                      for m in p["plan"]["milestones"]]}
                      for p in plans["items"]],
            "notes_written": notes,
        }, indent=1))
    finally:
        for proc in procs:
            proc.terminate()


if __name__ == "__main__":
    main()
