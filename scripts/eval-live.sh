#!/usr/bin/env bash
# A live evaluation on the local model, resumable: starts the llama.cpp server (from
# scripts/install-model.sh) on 127.0.0.1 and runs `cairn eval --live --resume` against it, so a
# second call with the same OUT goes on where the first stopped (docs/evaluation.md, "Long
# evaluations in sittings").
#
#   scripts/eval-live.sh 1.5b suites/default out-live-default [MAX_RUNS]
#
# Environment: STRATEGIES (one_shot,reactive,v1,v2,auto), TASKS (comma-separated task ids;
# default: every task of the suite), REPEAT (2), RUN_WALL_S (900), CONFIG (a config file, as
# `cairn serve --config` reads it, e.g. for `[engine]` settings; the CAIRN_* variables set here win),
# MODEL_PORT (8091), THREADS (2), WORKERS (1), LLM_TIMEOUT_MS (900000: a 1,536-token list from
# a two-slot server on two cores takes over 300 s, and a timed-out call is asked again from
# the start), CAIRN_BIN (default: a release build of this
# checkout). The server has WORKERS slots of 8192 tokens each and the evaluation runs WORKERS
# tasks at once; each task runs one milestone at a time (CAIRN_ENGINE_MAX_PARALLEL=1), so no
# call of a task waits behind another call of the same task.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WHICH="${1:?usage: eval-live.sh 0.5b|1.5b SUITE OUT [MAX_RUNS]}"
SUITE="${2:?usage: eval-live.sh 0.5b|1.5b SUITE OUT [MAX_RUNS]}"
OUT="${3:?usage: eval-live.sh 0.5b|1.5b SUITE OUT [MAX_RUNS]}"
MAX_RUNS="${4:-}"
case "$WHICH" in
  0.5b | 1.5b) MODEL=".deps/models/qwen2.5-coder-$WHICH-instruct-q4_k_m.gguf" ;;
  *) echo "eval-live: unknown model '$WHICH' (0.5b or 1.5b)" >&2; exit 2 ;;
esac
if [ ! -f "$MODEL" ] || [ ! -x .deps/llama/bin/python ]; then
  echo "eval-live: $MODEL is not installed; run scripts/install-model.sh $WHICH first" >&2
  exit 1
fi
MODEL_PORT="${MODEL_PORT:-8091}"
WORKERS="${WORKERS:-1}"
mkdir -p "$OUT"

if [ -z "${CAIRN_BIN:-}" ]; then
  cargo build --release --quiet
  CAIRN_BIN=./target/release/cairn
fi
.deps/llama/bin/python scripts/model_server.py --model "$MODEL" --port "$MODEL_PORT" \
  --threads "${THREADS:-2}" \
  --parallel "$WORKERS" --ctx "$((8192 * WORKERS))" >"$OUT/model_server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$MODEL_PORT/health" >/dev/null 2>&1 && break
  sleep 0.5
done
curl -sf "http://127.0.0.1:$MODEL_PORT/health" >/dev/null ||
  { echo "eval-live: the model server did not start (see $OUT/model_server.log)" >&2; exit 1; }

args=(eval --live --resume --suite "$SUITE" --out "$OUT"
  --strategies "${STRATEGIES:-one_shot,reactive,v1,v2,auto}" --repeat "${REPEAT:-2}"
  --run-wall-s "${RUN_WALL_S:-900}" --workers "$WORKERS")
[ -n "$MAX_RUNS" ] && args+=(--max-runs "$MAX_RUNS")
[ -n "${TASKS:-}" ] && args+=(--tasks "$TASKS")
[ -n "${CONFIG:-}" ] && args+=(--config "$CONFIG")
CAIRN_ENGINE_MAX_PARALLEL=1 CAIRN_LLM_TIMEOUT_MS="${LLM_TIMEOUT_MS:-900000}" \
CAIRN_LLM_DEFAULT_BASE_URL="http://127.0.0.1:$MODEL_PORT" \
CAIRN_LLM_DEFAULT_MODEL="qwen2.5-coder-$WHICH" \
  "$CAIRN_BIN" "${args[@]}"
