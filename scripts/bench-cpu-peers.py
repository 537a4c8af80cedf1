#!/usr/bin/env python3
"""CPU per step of cairn and of the peers (LangGraph + PostgresSaver, DBOS), side by side.

usage: scripts/bench-cpu-peers.py CAIRN_BENCH_BINARY [ROUNDS] [TASKS] [STEPS] [CONCURRENCY]
       (defaults 3 200 8 8; env PEERS, PEER_PG, PEER_VENV as for the peers' run.sh, whose
       venv must exist: run scripts/bench-peers.sh once first)

Each system runs twice per round, with TASKS tasks and with TASKS/10, and what a step costs is
the difference divided by the difference in steps: so a process's fixed costs (Python's imports,
a checkpointer's set-up, cairn's migrations, creating the database) drop out. Counted per run:
the process's own CPU (user + system, with its children) and the whole local Postgres cluster's
(every `postgres` process, live or reaped, from /proc; run it on a quiet machine). Also printed:
each run's wall ms/step as the run itself reports it. Nothing here asserts a speed.

Why: on a machine where both are CPU-bound, the ratio of wall times cannot exceed the ratio of
the CPU each spends per step for long; this says what that ratio is."""
import importlib.util
import os
import re
import resource
import subprocess
import sys
import tempfile

TICK = os.sysconf("SC_CLK_TCK")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The whole local Postgres cluster's CPU, counted as scripts/bench-cpu.py counts it.
_spec = importlib.util.spec_from_file_location("bench_cpu", os.path.join(ROOT, "scripts", "bench-cpu.py"))
bench_cpu = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench_cpu)
postgres_ticks = bench_cpu.postgres_ticks


def measured(argv):
    """(own CPU s, Postgres CPU s, wall ms/step as printed) of one run of argv."""
    before_pg = postgres_ticks()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_pg = postgres_ticks()
    own = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    pg = (after_pg - before_pg) / TICK
    found = re.search(r"ms_per_step=([0-9.]+)", out)
    return own, pg, float(found.group(1)) if found else float("nan")


def fresh_db(pg, name):
    subprocess.run(
        ["psql", f"{pg}/postgres", "-qc", f"drop database if exists {name}", "-c",
         f"create database {name}"],
        check=True, capture_output=True,
        env={**os.environ, "PGOPTIONS": "-c client_min_messages=warning"})


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    args = [int(a) for a in sys.argv[2:6]]
    rounds, tasks, steps, conc = args + [3, 200, 8, 8][len(args):]
    small = max(1, tasks // 10)
    peers = os.environ.get("PEERS") or next(
        (p for p in (os.path.join(ROOT, "..", "shared", "bench", "peers"), "/work/shared/bench/peers")
         if os.path.exists(os.path.join(p, "run.sh"))), None)
    if peers is None:
        sys.exit("peers not found; set PEERS")
    pg = os.environ.get("PEER_PG", "postgresql://root@127.0.0.1")
    venv = os.environ.get("PEER_VENV", os.path.join(tempfile.gettempdir(), "cairn-peers-venv"))
    python = os.path.join(venv, "bin", "python")
    if not os.path.exists(python):
        sys.exit(f"no peers venv at {venv}: run scripts/bench-peers.sh once first")

    def cairn(shape):
        return lambda n: measured([binary, str(n), str(steps), str(conc), shape])

    def peer(script, db):
        def run(n):
            fresh_db(pg, db)
            return measured([python, os.path.join(peers, script), f"{pg}/{db}", str(n), str(steps), str(conc)])
        return run

    systems = [
        ("cairn one_milestone", cairn("one_milestone")),
        ("cairn milestones", cairn("milestones")),
        ("langgraph", peer("langgraph_plan_execute.py", "peer_langgraph")),
        ("dbos", peer("dbos_workflow.py", "peer_dbos")),
    ]
    print(f"{tasks} and {small} tasks x {steps} steps, concurrency {conc}; CPU ms per step "
          f"from the difference")
    for r in range(1, rounds + 1):
        for name, run in systems:
            big_own, big_pg, wall = run(tasks)
            small_own, small_pg, _ = run(small)
            n = (tasks - small) * steps
            own = (big_own - small_own) * 1000 / n
            pgc = (big_pg - small_pg) * 1000 / n
            load = open("/proc/loadavg").read().split()[0]
            print(f"round {r} {name:<20} wall {wall:6.3f} ms/step  cpu own {own:6.3f} "
                  f"postgres {pgc:6.3f} total {own + pgc:6.3f} ms/step  (load {load})", flush=True)


if __name__ == "__main__":
    main()
