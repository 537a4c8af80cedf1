#!/usr/bin/env python3
"""What cairn's commit statement costs Postgres per transaction, by variant, with pgbench.

usage: scripts/pgbench-commit.py [TRANSACTIONS_PER_CLIENT] [CLIENTS] [ROUNDS]   (defaults 300 8 5)

Creates a scratch database (`cairn_pgbench_commit`, dropped at the end), applies
migrations/postgres/*.sql, inserts 64 running tasks and a 2.8 KB JSON checkpoint, then runs
each variant with `pgbench -n -M prepared -c CLIENTS -j 2 -t N` and prints the local Postgres
cluster's CPU per transaction (every `postgres` process, as scripts/bench-cpu.py counts it) and
pgbench's tps, medians of ROUNDS alternating rounds with their ranges. The commit statement is read from crates/cairn/src/store/postgres/commit.rs and given literal
arrays: K tasks per transaction, each with two events, a ledger entry and an artifact, as a step
of the orchestration bench's one_milestone shape writes. Run it on a quiet machine; read the
variants against each other, alternating rounds if in doubt. Docs: docs/benchmarks.md."""
import importlib.util
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DB = "cairn_pgbench_commit"
TICK = os.sysconf("SC_CLK_TCK")
spec = importlib.util.spec_from_file_location("bench_cpu", os.path.join(ROOT, "scripts", "bench-cpu.py"))
bench_cpu = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench_cpu)

EVENT_DATA = ["'{\"milestone\": \"m1\",\"unit\": \"tool_calls\",\"amount\": 1}'",
              "'{\"step\": 3,\"tool\": \"lookup\",\"output\": {\"ok\": true,\"value\": \"abc\"}}'"]


def commit_statement():
    with open(os.path.join(ROOT, "crates", "cairn", "src", "store", "postgres", "commit.rs")) as f:
        source = f.read()
    text = re.search(r'const COMMIT: &str = "(.*?)";', source, re.S).group(1)
    return re.sub(r"\s+", " ", text.replace("\\\n", "").replace("\\", ""))


def array(items, kind):
    return "ARRAY[" + ",".join(items) + "]::" + kind


def with_tasks(k):
    """The commit statement for k tasks per transaction (pgbench's :client_id picks them)."""
    ids = [f"md5((:client_id*{k}+{j}+1)::text)::uuid" for j in range(k)]
    params = {
        1: array(ids, "uuid[]"), 2: array(["'w'"] * k, "text[]"), 3: array(["1"] * k, "bigint[]"),
        4: array(["'running'"] * k, "text[]"), 5: array(["2"] * k, "bigint[]"),
        6: array(["now()"] * k, "timestamptz[]"), 7: array(["false"] * k, "boolean[]"),
        8: array(["true"] * k, "boolean[]"), 9: array(["NULL"] * k, "jsonb[]"),
        10: array(["(SELECT s FROM blob)"] * k, "text[]"), 11: array(["NULL"] * k, "integer[]"),
        12: array([i for i in ids for _ in range(2)], "uuid[]"), 13: array(["1", "2"] * k, "bigint[]"),
        14: array(["'ledger.charge'", "'step.finished'"] * k, "text[]"),
        15: array(EVENT_DATA * k, "text[]"),
        16: "ARRAY[]::uuid[]", 17: "ARRAY[]::integer[]", 18: "ARRAY[]::text[]",
        19: "ARRAY[]::bigint[]", 20: "ARRAY[]::jsonb[]",
        21: array(ids, "uuid[]"), 22: array(["'m1'"] * k, "text[]"), 23: array(["'spend'"] * k, "text[]"),
        24: array(["'tool_calls'"] * k, "text[]"), 25: array(["1"] * k, "bigint[]"),
        26: array(ids, "uuid[]"), 27: array(["'m1'"] * k, "text[]"), 28: array(["'result'"] * k, "text[]"),
        29: array(["'{\"ok\": true}'"] * k, "jsonb[]"),
    }
    return re.sub(r"\$(\d+)", lambda m: params[int(m.group(1))], commit_statement())


def without(statement, first, up_to):
    """The statement without its CTE parts from `first` up to (not including) `up_to`."""
    return re.sub(rf"{first} AS \(.*?\), {up_to}", up_to, statement)


def variants():
    one = with_tasks(1)
    no_plan = without(one, "planned", "charged")
    empty = re.sub(r"ARRAY\[[^\]]*\]::(\w+)\[\](?=[^)]*\) WITH ORDINALITY)", r"ARRAY[]::\1[]", no_plan)
    task = "md5((:client_id+1)::text)::uuid"
    return [
        ("SELECT 1", "SELECT 1"),
        ("one UPDATE of a task row with its checkpoint",
         f"UPDATE tasks SET last_seq = last_seq + 2, updated_at = now(), state = (SELECT s FROM blob) "
         f"WHERE id = {task} AND claimed_by = 'w' AND fence = 1 AND status = 'running'"),
        ("commit statement, 1 task", one),
        ("commit statement, 2 tasks", with_tasks(2)),
        ("commit statement, 4 tasks", with_tasks(4)),
        ("commit statement, 8 tasks", with_tasks(8)),
        ("1 task, no plan-version part", no_plan),
        ("1 task, ledger and artifact parts empty, no plan part", empty),
        ("1 task, task rows and events only", re.sub(r", planned AS \(.*?\) SELECT id", " SELECT id", one)),
    ]


def psql(*args, db="postgres", stdin=None):
    subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", "-d", db, *args], input=stdin, text=True,
                   check=True, stdout=subprocess.DEVNULL)


def setup():
    psql("-c", f"DROP DATABASE IF EXISTS {DB}", stdin="")
    psql("-c", f"CREATE DATABASE {DB}")
    migrations = os.path.join(ROOT, "migrations", "postgres")
    for name in sorted(os.listdir(migrations)):
        psql("-f", os.path.join(migrations, name), db=DB)
    psql(db=DB, stdin="""
INSERT INTO tasks (id, tenant_id, goal, strategy, budget_tokens, budget_tool_calls, budget_wall_ms,
    status, created_at, updated_at, claimed_by, lease_expires_at, fence)
SELECT md5(i::text)::uuid, 'default', 'goal ' || i, 'v2', 100000, 100, 600000, 'running', now(),
    now(), 'w', now() + interval '1 day', 1 FROM generate_series(1, 64) i;
CREATE TABLE blob (s text);
INSERT INTO blob SELECT json_agg(json_build_object('id', 'm' || i, 'title', 'milestone number ' || i
    || ' ' || md5(i::text), 'status', 'running', 'steps', json_build_array(json_build_object('tool',
    'lookup', 'args', json_build_object('q', md5((i * 7)::text)))), 'spent', i * 37))::text
FROM generate_series(1, 14) i;
""")


def run(sql, per_client, clients):
    with tempfile.NamedTemporaryFile("w", suffix=".sql", delete=False) as f:
        f.write(sql + ";\n")
    before = bench_cpu.postgres_ticks()
    out = subprocess.run(["pgbench", "-n", "-M", "prepared", "-c", str(clients), "-j", "2", "-t",
                          str(per_client), "-f", f.name, DB], capture_output=True, text=True)
    after = bench_cpu.postgres_ticks()
    os.unlink(f.name)
    if out.returncode != 0:
        sys.exit(out.stderr[-2000:])
    tps = re.search(r"tps = ([0-9.]+)", out.stdout).group(1)
    return (after - before) * 1000 / TICK / (clients * per_client), float(tps)


def main():
    per_client = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    clients = int(sys.argv[2]) if len(sys.argv) > 2 else 8
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    setup()
    cases = variants()
    figures = {label: [] for label, _ in cases}
    try:
        for _ in range(rounds):
            for label, sql in cases:
                figures[label].append(run(sql, per_client, clients))
    finally:
        psql("-c", f"DROP DATABASE IF EXISTS {DB}")
    print("| transaction | Postgres CPU ms per transaction, median (range) | tps, median |")
    print("|---|---|---|")
    for label, _ in cases:
        cpu = sorted(c for c, _ in figures[label])
        tps = sorted(t for _, t in figures[label])
        print(f"| {label} | {cpu[len(cpu) // 2]:.3f} ({cpu[0]:.3f}-{cpu[-1]:.3f}) | {tps[len(tps) // 2]:.0f} |")


if __name__ == "__main__":
    main()
