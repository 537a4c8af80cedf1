// An operator's wrapper: the stdio MCP server `@modelcontextprotocol/server-memory` served over
// streamable HTTP (stateless, JSON answers), as cairn takes MCP servers over HTTP only. It
// relays tools/list and tools/call to one child process and counts, per tool, the calls it
// relayed and the ones still in flight (GET /calls), so a test counts side effects on the
// server's side. DELAY_TOOL and DELAY_MS hold that tool's calls before they are relayed.
//
//   PORT=7301 MEMORY_FILE_PATH=/tmp/memory.jsonl node memory-http.mjs
import http from "node:http";
import { createRequire } from "node:module";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { CallToolRequestSchema, ListToolsRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const require = createRequire(import.meta.url);
const memory = require.resolve("@modelcontextprotocol/server-memory/dist/index.js");
const port = Number(process.env.PORT || 7301);
const delayTool = process.env.DELAY_TOOL || "";
const delayMs = Number(process.env.DELAY_MS || 0);

const child = new Client({ name: "memory-http", version: "1.0.0" });
await child.connect(new StdioClientTransport({ command: process.execPath, args: [memory], env: process.env }));

const relayed = {};
const inFlight = {};

function server() {
  const s = new Server({ name: "memory-http", version: "1.0.0" }, { capabilities: { tools: {} } });
  s.setRequestHandler(ListToolsRequestSchema, async () => child.listTools());
  s.setRequestHandler(CallToolRequestSchema, async (request) => {
    const name = request.params.name;
    inFlight[name] = (inFlight[name] || 0) + 1;
    try {
      if (name === delayTool && delayMs > 0) {
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      const result = await child.callTool({ name, arguments: request.params.arguments });
      relayed[name] = (relayed[name] || 0) + 1;
      return result;
    } finally {
      inFlight[name] -= 1;
    }
  });
  return s;
}

http
  .createServer(async (req, res) => {
    if (req.method === "GET" && req.url === "/calls") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify({ relayed, in_flight: inFlight }));
      return;
    }
    if (req.url !== "/mcp") {
      res.writeHead(404).end();
      return;
    }
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const text = Buffer.concat(chunks).toString("utf8");
    const body = text ? JSON.parse(text) : undefined;
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    const s = server();
    res.on("close", () => {
      transport.close();
      s.close();
    });
    await s.connect(transport);
    await transport.handleRequest(req, res, body);
  })
  .listen(port, "127.0.0.1", () => console.error(`memory-http listening on ${port}`));
