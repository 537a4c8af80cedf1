#!/usr/bin/env bash
# Runs cairn against a real local model, with simulated tools: the llama.cpp server (from
# scripts/install-model.sh), `cairn sim` serving the tools of a scenario file, and `cairn serve`
# pointed at both. Everything listens on 127.0.0.1. Ctrl-C stops all three.
#
#   scripts/install-model.sh 1.5b && scripts/run-local.sh 1.5b
#
# Environment: SCENARIO (the simulated tools; default scenarios/service_directory.json),
# MODEL_PORT (8091), TOOLS_PORT (8092), CAIRN_LISTEN_ADDR (127.0.0.1:8080).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
WHICH="${1:-0.5b}"
case "$WHICH" in
  0.5b) MODEL=".deps/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf" ;;
  1.5b) MODEL=".deps/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf" ;;
  *) echo "run-local: unknown model '$WHICH' (0.5b or 1.5b)" >&2; exit 2 ;;
esac
if [ ! -f "$MODEL" ] || [ ! -x .deps/llama/bin/python ]; then
  echo "run-local: $MODEL is not installed; run scripts/install-model.sh $WHICH first" >&2
  exit 1
fi
SCENARIO="${SCENARIO:-scenarios/service_directory.json}"
MODEL_PORT="${MODEL_PORT:-8091}"
TOOLS_PORT="${TOOLS_PORT:-8092}"
TOOLS_FILE="$(mktemp -t cairn-tools.XXXXXX.json)"

cargo build --release --quiet
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -f "$TOOLS_FILE"' EXIT INT TERM

.deps/llama/bin/python scripts/model_server.py --model "$MODEL" --port "$MODEL_PORT" &
pids+=($!)
./target/release/cairn sim --scenario "$SCENARIO" --port "$TOOLS_PORT" &
pids+=($!)
for _ in $(seq 1 240); do
  curl -sf "http://127.0.0.1:$MODEL_PORT/health" >/dev/null 2>&1 &&
    curl -sf "http://127.0.0.1:$TOOLS_PORT/sim/registry.json" -o "$TOOLS_FILE" 2>/dev/null && break
  sleep 0.5
done
[ -s "$TOOLS_FILE" ] || { echo "run-local: the model or the tools did not start" >&2; exit 1; }

CAIRN_LLM_DEFAULT_BASE_URL="http://127.0.0.1:$MODEL_PORT" \
CAIRN_LLM_DEFAULT_MODEL="qwen2.5-coder-$WHICH" \
CAIRN_TOOLS_FILE="$TOOLS_FILE" \
  ./target/release/cairn serve &
pids+=($!)
wait "${pids[-1]}"
