#!/usr/bin/env bash
# The client the MCP conformance suite drives (@modelcontextprotocol/conformance, `client`
# mode): it appends the test server's URL and names the scenario in MCP_CONFORMANCE_SCENARIO;
# this maps each scenario a tools-only client takes part in to `cairn mcp`. CAIRN_BIN is the
# cairn binary (tests/mcp_conformance.rs sets it).
set -euo pipefail
url="${*: -1}"
case "${MCP_CONFORMANCE_SCENARIO:-}" in
  initialize) exec "$CAIRN_BIN" mcp tools "$url" ;;
  tools_call) exec "$CAIRN_BIN" mcp call "$url" --tool add_numbers --args '{"a": 5, "b": 3}' ;;
  sse-retry) exec "$CAIRN_BIN" mcp call "$url" --tool test_reconnection ;;
  auth/client-credentials-basic)
    context="${MCP_CONFORMANCE_CONTEXT:-{\}}"
    exec "$CAIRN_BIN" mcp tools "$url" \
      --client-id "$(node -p "JSON.parse(process.argv[1]).client_id || ''" "$context")" \
      --client-secret "$(node -p "JSON.parse(process.argv[1]).client_secret || ''" "$context")" ;;
  *) echo "conformance-client: scenario ${MCP_CONFORMANCE_SCENARIO:-?} is not one cairn takes part in" >&2; exit 2 ;;
esac
