#!/usr/bin/env bash
# Installs the third-party OpenAI-compatible mock server that tests/llm_third_party.rs runs the
# LLM client against (fakellm, from PyPI), into a git-ignored virtualenv at .deps/fakellm.
#
# Idempotent and fast when already installed: it only checks the pinned version and exits.
# The test finds the server at .deps/fakellm/bin/fakellm (override with CAIRN_FAKELLM_BIN).
set -euo pipefail

FAKELLM_VERSION="0.3.5"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.deps/fakellm"
PYTHON="${PYTHON:-python3}"

installed_version() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - <<'PY' 2>/dev/null
from importlib.metadata import version
print(version("fakellm"))
PY
}

if [ "$(installed_version || true)" = "$FAKELLM_VERSION" ] && [ -x "$VENV/bin/fakellm" ]; then
  echo "install-test-deps: fakellm $FAKELLM_VERSION already installed in $VENV"
  exit 0
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "install-test-deps: $PYTHON not found; install Python 3.10+ first" >&2
  exit 1
fi

echo "install-test-deps: installing fakellm $FAKELLM_VERSION into $VENV"
rm -rf "$VENV"
mkdir -p "$ROOT/.deps"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
  "fakellm==$FAKELLM_VERSION"
"$VENV/bin/fakellm" --version
