// The outsider's upstream: a tool server built on the MCP SDK's own McpServer and its Streamable
// HTTP transport (stateless, JSON answers), on Node's http server. Nothing of ask-only runs here.
// Prints its URL on the first line of stdout.
import { createServer } from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

function server() {
  const mcp = new McpServer({ name: "outside-upstream", version: "1.0.0" });
  mcp.registerTool("echo", { description: "Echoes its text.", inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text }],
  }));
  mcp.registerTool("shout", { description: "Echoes its text in capitals.", inputSchema: { text: z.string() } }, async ({ text }) => ({
    content: [{ type: "text", text: text.toUpperCase() }],
  }));
  return mcp;
}

const http = createServer(async (req, res) => {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  const body = chunks.length === 0 ? undefined : JSON.parse(Buffer.concat(chunks).toString("utf8"));
  // Stateless: a server and a transport per request, as the SDK's own stateless example does.
  const mcp = server();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    mcp.close();
  });
  await mcp.connect(transport);
  await transport.handleRequest(req, res, body);
});
http.keepAliveTimeout = 60_000;
http.listen(0, "127.0.0.1", () => console.log(`http://127.0.0.1:${http.address().port}/mcp`));
