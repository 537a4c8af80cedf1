#!/usr/bin/env bash
# Runs every test: unit, property, store conformance (Postgres and SQLite), API, worker, crash,
# simulator and client tests. Needs PostgreSQL at 127.0.0.1:5432 (see README).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -x scripts/install-test-deps.sh ]; then
  ./scripts/install-test-deps.sh
fi
cargo test --locked "$@"
