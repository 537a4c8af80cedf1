#!/usr/bin/env bash
# Installs schemathesis (the OpenAPI fuzzer that tests/api_fuzz.rs runs against a live
# `cairn serve`) from PyPI into the git-ignored virtualenv .deps/schemathesis. Every package of
# its dependency closure is pinned by version and sha256 in scripts/schemathesis-requirements.txt
# and installed with pip --require-hashes --no-deps, so nothing unpinned is ever fetched. The test
# finds the binary at .deps/schemathesis/bin/schemathesis (override with CAIRN_SCHEMATHESIS_BIN).
#
# Idempotent and fast when already installed: it only checks the pinned version. Fails
# (non-zero) when anything cannot be installed or does not match its checksum.
set -euo pipefail

SCHEMATHESIS_VERSION="4.32.5"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.deps/schemathesis"
LOCK="$ROOT/scripts/schemathesis-requirements.txt"
PYTHON="${PYTHON:-python3}"

say() { echo "install-schemathesis: $*"; }

installed_version() {
  [ -x "$VENV/bin/python" ] || return 1
  "$VENV/bin/python" - <<'PY' 2>/dev/null
from importlib.metadata import version
print(version("schemathesis"))
PY
}

if [ "$(installed_version || true)" = "$SCHEMATHESIS_VERSION" ] && [ -x "$VENV/bin/schemathesis" ]; then
  say "schemathesis $SCHEMATHESIS_VERSION already installed in $VENV"
  exit 0
fi

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  say "$PYTHON not found; install Python 3.11+ first" >&2
  exit 1
fi
if ! grep -q "^schemathesis==$SCHEMATHESIS_VERSION " "$LOCK"; then
  say "FATAL: $LOCK does not pin schemathesis==$SCHEMATHESIS_VERSION" >&2
  exit 1
fi

say "installing schemathesis $SCHEMATHESIS_VERSION into $VENV"
rm -rf "$VENV"
mkdir -p "$ROOT/.deps"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps \
  --only-binary=:all: --require-hashes -r "$LOCK"
"$VENV/bin/python" -m pip check --disable-pip-version-check
"$VENV/bin/schemathesis" --version
