// A real MCP client for the end-to-end tests: the official TypeScript SDK's Client and
// StdioClientTransport spawn `gflow mcp serve` (or any server command), initialize,
// list the tools and call the ones asked for, then print one JSON object on stdout:
//   {"server": serverVersion, "tools": [{name, ...}], "results": [CallToolResult...]}
// Usage: node client.mjs CALLS_JSON COMMAND [ARGS...]
//   CALLS_JSON: [["tool_name", {arguments}], ...]
// The SDK validates every message against the protocol's schemas (a malformed answer
// throws), so the test checks the server against the SDK, not against our own reading.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const [calls_json, command, ...args] = process.argv.slice(2);
if (!command) {
  console.error("usage: node client.mjs CALLS_JSON COMMAND [ARGS...]");
  process.exit(2);
}
const calls = JSON.parse(calls_json);
const transport = new StdioClientTransport({
  command,
  args,
  env: process.env,
  stderr: "inherit",
});
const client = new Client({ name: "gflow-e2e", version: "1.0.0" });
await client.connect(transport);
const { tools } = await client.listTools();
const results = [];
for (const [name, argsOf] of calls) {
  results.push(await client.callTool({ name, arguments: argsOf }));
}
const out = {
  server: client.getServerVersion(),
  protocol: transport.protocolVersion ?? null,
  tools,
  results,
};
await client.close();
process.stdout.write(JSON.stringify(out) + "\n");
