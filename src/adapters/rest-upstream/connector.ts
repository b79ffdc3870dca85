// Opens REST upstreams for the desk: the connector of the "rest" kind (core/desk/ports.ts). A
// REST upstream serves the tools stored at its registration, each called from its stored
// operation: nothing is read from the upstream to open it, and no OpenAPI document is parsed.
import type { RestConnector, Upstream } from "../../core/desk/ports.ts";
import type { RestTool } from "../../core/rest/tools.ts";
import { RestUpstreamClient } from "./client.ts";
import { fetchDocument } from "./document-fetch.ts";

export const restConnector: RestConnector = {
  open: (target): Upstream => {
    const tools = target.tools.flatMap((t): RestTool[] => {
      if (t.operation === null) return [];
      const output = t.listing.outputSchema as Record<string, unknown> | undefined;
      return [
        { name: t.upstreamTool, description: t.description, inputSchema: t.inputSchema, ...(output ? { outputSchema: output } : {}), operation: t.operation },
      ];
    });
    return new RestUpstreamClient({ name: target.name, baseUrl: target.url, tools, credential: target.credential, timeoutMs: target.timeoutMs });
  },
  fetchDocument,
};
