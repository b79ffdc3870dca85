// Opens MCP upstreams for the desk: the connector of the "mcp" kind (core/desk/ports.ts).
import type { Upstream, UpstreamConnector } from "../../core/desk/ports.ts";
import { UpstreamClient } from "./client.ts";

export const mcpConnector: UpstreamConnector = {
  open: (target): Upstream => new UpstreamClient(target.name, target.url, target.credential, target.timeoutMs),
};
