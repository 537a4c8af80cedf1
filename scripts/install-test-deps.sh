#!/usr/bin/env bash
# Installs the test-only dependencies into the git-ignored .deps/:
# - the third-party OpenAI-compatible mock server that tests/llm_third_party.rs runs the LLM
#   client against (fakellm, from PyPI), in a virtualenv at .deps/fakellm; the test finds it at
#   .deps/fakellm/bin/fakellm (override with CAIRN_FAKELLM_BIN);
# - schemathesis, the OpenAPI fuzzer tests/api_fuzz.rs runs against a live `cairn serve`, by
#   scripts/install-schemathesis.sh, into .deps/schemathesis (every package pinned by sha256;
#   override with CAIRN_SCHEMATHESIS_BIN);
# - the real local models of tests/live_model.rs (Qwen2.5-Coder-0.5B-Instruct and -1.5B-Instruct
#   Q4_K_M, and the xllamacpp server), by scripts/install-model.sh, into .deps/llama and
#   .deps/models (override with CAIRN_LIVE_PYTHON and CAIRN_LIVE_MODEL);
# - chromium and playwright-core for tests/dashboard_browser.rs, by scripts/install-browser.sh;
# - the MCP servers of tests/mcp_tools.rs (npm, pinned), by scripts/install-mcp-servers.sh.
#
# Idempotent and fast when already installed: it only checks the pinned versions and the
# model's sha256. Fails (non-zero) when anything cannot be installed.
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

install_fakellm() {
  if [ "$(installed_version || true)" = "$FAKELLM_VERSION" ] && [ -x "$VENV/bin/fakellm" ]; then
    echo "install-test-deps: fakellm $FAKELLM_VERSION already installed in $VENV"
    return 0
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
}

install_fakellm
# The API fuzz test's schemathesis.
"$ROOT/scripts/install-schemathesis.sh"
# The live-model test's models and server (0.5B for every case; 1.5B for the strict case
# scripts/test.sh runs last).
"$ROOT/scripts/install-model.sh" 0.5b
"$ROOT/scripts/install-model.sh" 1.5b

# The dashboard's browser test: Debian's chromium and playwright-core (scripts/install-browser.sh).
"$ROOT/scripts/install-browser.sh"
# The MCP tests' third-party servers and the conformance suite (scripts/install-mcp-servers.sh).
"$ROOT/scripts/install-mcp-servers.sh"
