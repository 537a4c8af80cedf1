#!/usr/bin/env python3
"""Regenerates a live block of docs/evaluation.md from a live evaluation's output.

    scripts/live-block.py NAME LIVE_DIR [SIM_REPORT_JSON] [DOC]

Replaces what stands between `<!-- NAME: start ... -->` and `<!-- NAME: end -->` in DOC
(default docs/evaluation.md) with: the live report's completeness line and per-strategy table
(LIVE_DIR/report.md, as `cairn eval --live --resume --max-runs 0` writes it), then
scripts/live-vs-sim.py's task-by-task comparison against SIM_REPORT_JSON (default
suites/default/report/report.json). Prints nothing on success; exits 1 when a marker is missing.
"""

import os
import subprocess
import sys


def section(report, title):
    lines = report.splitlines()
    start = lines.index(title) + 1
    out = []
    for line in lines[start:]:
        if line.startswith("## "):
            break
        out.append(line)
    return "\n".join(out).strip("\n")


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    name, live = argv[1], argv[2]
    sim = argv[3] if len(argv) > 3 else "suites/default/report/report.json"
    doc = argv[4] if len(argv) > 4 else "docs/evaluation.md"
    report = open(os.path.join(live, "report.md")).read()
    incomplete = [line for line in report.splitlines() if line.startswith("**Incomplete**")]
    here = os.path.dirname(os.path.abspath(__file__))
    compare = subprocess.run(
        [sys.executable, os.path.join(here, "live-vs-sim.py"), sim,
         os.path.join(live, "runs.jsonl"), "--markdown"],
        check=True, capture_output=True, text=True).stdout.strip("\n")
    body = "\n\n".join(incomplete + [section(report, "## Per strategy"), compare])
    text = open(doc).read()
    begin = f"<!-- {name}: start"
    end = f"<!-- {name}: end -->"
    if begin not in text or end not in text:
        print(f"live-block: no {name} markers in {doc}", file=sys.stderr)
        return 1
    head, rest = text.split(begin, 1)
    marker_line, _ = rest.split("\n", 1)
    _, tail = rest.split(end, 1)
    with open(doc, "w") as f:
        f.write(f"{head}{begin}{marker_line}\n{body}\n{end}{tail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
