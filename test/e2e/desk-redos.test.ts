// One key's hostile arguments cannot stall the compiled desk: an upstream schema holds the
// catastrophic pattern ^(a+)+$ and 40 keys send "a"x32+"!" at once (on a backtracking engine,
// ~0.15 s of event loop each, 6 s in all); each call is refused at once and the JWKS keeps
// answering meanwhile. A pattern RE2 cannot run is refused at registration, the tool named.
// The full figure is `npm run bench:desk-redos`.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { startSchemaUpstream, type SchemaUpstream } from "../fixtures/schema-upstream.ts";
import { adminJson, callTool, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(60_000);

const tmp = tempDir("desk-redos-");
let upstream: SchemaUpstream;
let desk: DeskProcess;

beforeAll(async () => {
  upstream = startSchemaUpstream([
    { name: "match", inputSchema: { type: "object", properties: { s: { type: "string", pattern: "^(a+)+$" } }, required: ["s"] } },
  ]);
  desk = await startDeskProcess(join(tmp.path, "d"));
}, 30_000);

afterAll(async () => {
  await desk.stop();
  await upstream.stop();
  tmp[Symbol.dispose]();
});

test("40 concurrent hostile calls are each refused at once; the JWKS answers meanwhile", async () => {
  await adminJson(desk, "POST", "/admin/upstreams", { name: "hostile", url: upstream.url });
  const org = (await adminJson(desk, "POST", "/admin/orgs", { name: "redos" })).org_id;
  const secrets: string[] = [];
  for (let i = 0; i < 40; i++) {
    secrets.push((await adminJson(desk, "POST", "/admin/keys", { org_id: org, budget_mc: 10_000, reset: "none", allow: ["hostile__match"] })).secret as string);
  }
  const jwksMs: number[] = [];
  let over = false;
  const started = performance.now();
  const hostile = Promise.all(
    secrets.map(async (secret) => {
      const r = await callTool(desk.url, secret, "hostile__match", { s: `${"a".repeat(32)}!` });
      return { status: r.status, body: await r.json(), ms: performance.now() - started };
    }),
  ).finally(() => {
    over = true;
  });
  while (!over) {
    const t0 = performance.now();
    const r = await fetch(`${desk.url}/.well-known/receipt-signing-key.json`);
    expect(r.status).toBe(200);
    await r.arrayBuffer();
    jwksMs.push(performance.now() - t0);
  }
  const answers = await hostile;
  for (const a of answers) {
    expect(a.status).toBe(400);
    expect(a.body).toEqual({ error: "ARGS_INVALID", problems: [{ path: "/s", rule: "pattern" }] });
    expect(a.ms).toBeLessThan(3000);
  }
  expect(Math.max(...jwksMs)).toBeLessThan(1000);
  // A matching argument still passes the same pattern.
  expect((await callTool(desk.url, secrets[0]!, "hostile__match", { s: "aaaa" })).status).toBe(200);
  expect(upstream.calls()).toBe(1);
});

test("an upstream whose schema needs a backtracking engine is refused at registration, the tool named", async () => {
  await using refusing = startSchemaUpstream([
    { name: "plain", inputSchema: { type: "object", properties: { s: { type: "string", pattern: "^[a-z]+$" } } } },
    { name: "twice", inputSchema: { type: "object", properties: { s: { type: "string", pattern: "^(\\w+) \\1$" } } } },
  ]);
  const r = await desk.admin("POST", "/admin/upstreams", { name: "backtracking", url: refusing.url });
  expect(r.status).toBe(502);
  expect(await r.json()).toEqual({ error: "UPSTREAM_SCHEMA_REFUSED", tool: "twice", reason: "pattern" });
  expect(desk.stderr()).toContain("upstream backtracking: tool twice: input schema refused: a pattern: a backreference needs a backtracking engine");
  // Nothing was stored: not the upstream, not its other tool.
  const upstreams = (await (await desk.admin("GET", "/admin/upstreams")).json()) as { name: string }[];
  expect(upstreams.map((u) => u.name)).not.toContain("backtracking");
  const tools = (await (await desk.admin("GET", "/admin/tools")).json()) as { name: string }[];
  expect(tools.map((t) => t.name)).not.toContain("backtracking__plain");
});
