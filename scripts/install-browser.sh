#!/usr/bin/env bash
# Installs what the dashboard's browser test (tests/dashboard_browser.rs) needs:
# - Debian's chromium (/usr/bin/chromium), from the Debian archive the machine is set up with;
#   Debian keeps one current build per release, so the version is printed, not pinned;
# - playwright-core, pinned to an exact version with its sha512 in tests/browser/package-lock.json,
#   by `npm ci` into the git-ignored tests/browser/node_modules.
# Idempotent and quick when both are there. Fails (non-zero) when either cannot be installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CHROMIUM="${CHROMIUM:-/usr/bin/chromium}"

if [ ! -x "$CHROMIUM" ]; then
  echo "install-browser: installing Debian's chromium"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
fi
"$CHROMIUM" --version 2>/dev/null

want="$(node -p "require('$ROOT/tests/browser/package-lock.json').packages['node_modules/playwright-core'].version")"
have="$(node -p "require('$ROOT/tests/browser/node_modules/playwright-core/package.json').version" 2>/dev/null || true)"
if [ "$have" != "$want" ]; then
  echo "install-browser: installing playwright-core $want"
  npm ci --prefix "$ROOT/tests/browser" --no-audit --no-fund --loglevel=error
fi
echo "install-browser: playwright-core $want in tests/browser/node_modules"
