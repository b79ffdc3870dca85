// Input schemas the desk refuses (a pattern only a backtracking engine can run): at refresh the
// upstream is refused with the tool named and nothing changes; a schema stored by an earlier
// desk leaves its tool unserved at start-up instead of stopping the desk or being checked by a
// rule that could stall it.
import { expect, test } from "bun:test";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { Desk } from "../../src/core/desk/desk.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";
import { type SchemaTool, startSchemaUpstream } from "../fixtures/schema-upstream.ts";
import { makeDesk } from "./desk-harness.ts";

const PLAIN = { type: "object", properties: { s: { type: "string", pattern: "^[a-z]+$" } } };
const BACKREFERENCE = { type: "object", properties: { s: { type: "string", pattern: "^(a+)\\1$" } } };

test("refresh to a schema the desk refuses: 502 naming the tool; the stored tools stay as they were", async () => {
  const tools: SchemaTool[] = [{ name: "plain", inputSchema: PLAIN }];
  await using up = startSchemaUpstream(tools);
  await using t = await makeDesk();
  expect((await t.admin("POST", "/admin/upstreams", { name: "up", url: up.url })).status).toBe(201);
  tools.push({ name: "echoes", inputSchema: BACKREFERENCE });
  const r = await t.admin("POST", "/admin/upstreams/up/refresh");
  expect(r.status).toBe(502);
  expect(await r.json()).toEqual({ error: "UPSTREAM_SCHEMA_REFUSED", tool: "echoes", reason: "pattern" });
  expect(t.logs).toContain("upstream up: tool echoes: input schema refused: a pattern: a backreference needs a backtracking engine");
  expect(t.desk.allTools().map((e) => e.name)).toEqual(["up__plain"]);
  expect((await t.ledger.catalog.tools()).map((row) => row.name)).toEqual(["up__plain"]);
  // A schema that does not compile at all is the other reason.
  tools[1] = { name: "echoes", inputSchema: { type: "object", properties: { s: { type: "no-such-type" } } } };
  const r2 = await t.admin("POST", "/admin/upstreams/up/refresh");
  expect(await r2.json()).toEqual({ error: "UPSTREAM_SCHEMA_REFUSED", tool: "echoes", reason: "schema" });
});

test("a stored schema this desk refuses leaves its tool unserved at start-up, named in the log", async () => {
  await using up = startSchemaUpstream([
    { name: "plain", inputSchema: PLAIN },
    { name: "old", inputSchema: PLAIN },
  ]);
  await using t = await makeDesk();
  expect((await t.admin("POST", "/admin/upstreams", { name: "up", url: up.url })).status).toBe(201);
  // As an earlier desk, whose engine backtracked, could have stored it.
  t.ledger.testOnlyDatabase().query("UPDATE tools SET input_schema = ? WHERE name = 'up__old'").run(JSON.stringify(BACKREFERENCE));
  const logs: string[] = [];
  const again = await Desk.open({
    ledger: t.ledger,
    connectors: { mcp: mcpConnector, rest: restConnector },
    openCredential,
    signer: loadSigner(generateSigningKey().privatePem),
    sealingKey: await importSealingKey(new Uint8Array(32)),
    log: (line) => logs.push(line),
  });
  try {
    expect(again.tool("up__old")).toBeUndefined();
    expect(again.tool("up__plain")).toBeDefined();
    expect(logs).toContain(
      "tool up__old: not served: its schema is refused (a pattern: a backreference needs a backtracking engine); refresh its upstream once it changes",
    );
  } finally {
    await again.close();
  }
});
