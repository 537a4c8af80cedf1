#!/usr/bin/env python3
"""CPU per step of one orchestration bench run: the bench process's own (user + system) and the
whole local Postgres cluster's (every live `postgres` process plus the postmaster's reaped
backends, read from /proc), each divided by the run's TASKS x STEPS steps.

usage: scripts/bench-cpu.py BENCH_BINARY TASKS STEPS CONCURRENCY SHAPE

Prints the bench's own line, then `cpu_ms_per_step cairn=X postgres=Y`. Postgres must run on
this host; its figure covers the bench database's creation and drop too, and any other client's
work during the run (run it on a quiet machine)."""
import os
import resource
import subprocess
import sys

TICK = os.sysconf("SC_CLK_TCK")


def postgres_ticks():
    live, reaped = 0, 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)
            with open(f"/proc/{pid}/comm") as f:
                comm = f.read().strip()
        except OSError:
            continue
        if comm != "postgres":
            continue
        rest = fields[1].split()
        # rest[0] is the state (field 3): utime, stime, cutime, cstime are fields 14-17.
        live += int(rest[11]) + int(rest[12])
        if rest[1] == "1" or not is_postgres(rest[1]):
            reaped += int(rest[13]) + int(rest[14])
    return live + reaped


def is_postgres(pid):
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip() == "postgres"
    except OSError:
        return False


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    binary, tasks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    before_pg = postgres_ticks()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([binary, *sys.argv[2:]], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    after_pg = postgres_ticks()
    n = tasks * steps
    own = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000 / n
    pg = (after_pg - before_pg) * 1000 / TICK / n
    print(f"cpu_ms_per_step cairn={own:.3f} postgres={pg:.3f}")


if __name__ == "__main__":
    main()
