#!/usr/bin/env bash
# cairn's orchestration bench and the peer baselines (LangGraph + PostgresSaver, DBOS) in
# alternating rounds on this machine's Postgres, both shapes, with the ratios of each round and
# the load average before each run. Benchmarks measure; nothing here asserts a speed.
#
# usage: scripts/bench-peers.sh [ROUNDS] [TASKS] [STEPS] [CONCURRENCY]   (defaults 3 200 8 8)
# env:   CAIRN_BENCH   the orchestration bench binary (default: built with
#                      `cargo bench --no-run --bench orchestration`, newest in target/release/deps)
#        PEERS         the peers' directory (default ../shared/bench/peers next to the repo's
#                      parent, or /work/shared/bench/peers); PEER_PG and PEER_VENV pass through
#        SHAPES        default "one_milestone milestones"
# Each round runs, per shape: cairn, then the peers (their run.sh: LangGraph, then DBOS), so a
# round's ratios come from runs seconds apart under the same load. The peers do the same work
# whatever the shape (one plan call, N steps), so cairn's two shapes are compared against the
# peer figures of the same round.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-3} tasks=${2:-200} steps=${3:-8} conc=${4:-8}
shapes=${SHAPES:-one_milestone milestones}
peers=${PEERS:-}
if [[ -z $peers ]]; then
  for candidate in "$root/../shared/bench/peers" /work/shared/bench/peers; do
    [[ -x $candidate/run.sh ]] && peers=$candidate && break
  done
fi
[[ -n $peers && -x $peers/run.sh ]] || { echo "peers not found; set PEERS" >&2; exit 2; }
bench=${CAIRN_BENCH:-$(ls -t "$root"/target/release/deps/orchestration-* 2>/dev/null | grep -v '\.d$' | head -1 || true)}
[[ -x $bench ]] || { echo "no bench binary; run: cargo bench --no-run --bench orchestration" >&2; exit 2; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
field() { sed -n "s/.*$1=\([0-9.]*\).*/\1/p" <<<"$2"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

echo "bench: $bench"
echo "peers: $peers"
summary=()
for round in $(seq 1 "$rounds"); do
  for shape in $shapes; do
    l1=$(load)
    cairn=$("$bench" "$tasks" "$steps" "$conc" "$shape" 2>/tmp/cairn-bench-peers.err | grep '^cairn')
    detail=$(grep 'write transactions per step' /tmp/cairn-bench-peers.err | sed 's/.*per step: //' || true)
    l2=$(load)
    out=$(bash "$peers/run.sh" "$tasks" "$steps" "$conc")
    lg=$(grep '^langgraph' <<<"$out")
    db=$(grep '^dbos' <<<"$out")
    c=$(field ms_per_step "$cairn") g=$(field ms_per_step "$lg") d=$(field ms_per_step "$db")
    line="round $round $shape: cairn $c ms/step (load $l1), langgraph $g, dbos $d (load $l2) -> langgraph/cairn $(ratio "$g" "$c")x, dbos/cairn $(ratio "$d" "$c")x; cairn write tx/step: ${detail%%,*}"
    echo "$cairn"
    echo "$lg"
    echo "$db"
    echo "$line"
    summary+=("$line")
  done
done
echo
echo "summary ($tasks tasks x $steps steps, concurrency $conc):"
printf '%s\n' "${summary[@]}"
