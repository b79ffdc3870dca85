// The operator API names the field of every FIELD_UNKNOWN, FIELD_MISSING and VALUE_INVALID
// answer, on every endpoint that reads a body or a query parameter: {"error":CODE,"field":NAME}
// and nothing else (no value, no message).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDeskOnFixture, type TestDesk } from "./desk-harness.ts";

let fx: UpstreamFixture;
let t: TestDesk;
let org: string;
let keyId: string;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1000, upstreamCostMc: 0 });
  const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
  org = k.orgId;
  keyId = k.keyId;
  // 1,000 mc spent: a budget below it is a bad budget_mc.
  expect((await t.call(k.secret, "fx__echo", { text: "spend" })).status).toBe(200);
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

type Case = [method: string, path: () => string, body: () => unknown, code: string, field: string];

const key = (extra: Record<string, unknown> = {}) => ({ org_id: org, budget_mc: 1, reset: "none", allow: [], ...extra });
const without = (o: Record<string, unknown>, field: string) => Object.fromEntries(Object.entries(o).filter(([k]) => k !== field));

const CASES: Case[] = [
  // POST /admin/orgs {name}
  ["POST", () => "/admin/orgs", () => ({ name: "x", colour: "red" }), "FIELD_UNKNOWN", "colour"],
  ["POST", () => "/admin/orgs", () => ({}), "FIELD_MISSING", "name"],
  ["POST", () => "/admin/orgs", () => ({ name: "" }), "VALUE_INVALID", "name"],
  // POST /admin/upstreams {name, url, headers?}
  ["POST", () => "/admin/upstreams", () => ({ name: "up", url: "http://127.0.0.1:9/mcp", token: "x" }), "FIELD_UNKNOWN", "token"],
  ["POST", () => "/admin/upstreams", () => ({ url: "http://127.0.0.1:9/mcp" }), "FIELD_MISSING", "name"],
  ["POST", () => "/admin/upstreams", () => ({ name: "up" }), "FIELD_MISSING", "url"],
  ["POST", () => "/admin/upstreams", () => ({ name: "Up", url: "http://127.0.0.1:9/mcp" }), "VALUE_INVALID", "name"],
  ["POST", () => "/admin/upstreams", () => ({ name: "up", url: "ftp://127.0.0.1/" }), "VALUE_INVALID", "url"],
  ["POST", () => "/admin/upstreams", () => ({ name: "up", url: "http://127.0.0.1:9/mcp", headers: { host: "x" } }), "VALUE_INVALID", "headers"],
  // PUT /admin/tools/{tool} {price_mc, upstream_cost_mc}
  ["PUT", () => "/admin/tools/fx__echo", () => ({ price_mc: 1, upstream_cost_mc: 0, margin: 1 }), "FIELD_UNKNOWN", "margin"],
  ["PUT", () => "/admin/tools/fx__echo", () => ({ upstream_cost_mc: 0 }), "FIELD_MISSING", "price_mc"],
  ["PUT", () => "/admin/tools/fx__echo", () => ({ price_mc: 1 }), "FIELD_MISSING", "upstream_cost_mc"],
  ["PUT", () => "/admin/tools/fx__echo", () => ({ price_mc: -1, upstream_cost_mc: 0 }), "VALUE_INVALID", "price_mc"],
  ["PUT", () => "/admin/tools/fx__echo", () => ({ price_mc: 1, upstream_cost_mc: 0.5 }), "VALUE_INVALID", "upstream_cost_mc"],
  // POST /admin/keys {org_id, name?, budget_mc, reset, allow, prices?, expires_at?}
  ["POST", () => "/admin/keys", () => key({ period: "daily" }), "FIELD_UNKNOWN", "period"],
  ...(["org_id", "budget_mc", "reset", "allow"] as const).map((f): Case => ["POST", () => "/admin/keys", () => without(key(), f), "FIELD_MISSING", f]),
  ["POST", () => "/admin/keys", () => key({ org_id: "" }), "VALUE_INVALID", "org_id"],
  ["POST", () => "/admin/keys", () => key({ name: "x".repeat(201) }), "VALUE_INVALID", "name"],
  ["POST", () => "/admin/keys", () => key({ budget_mc: 2 ** 53 }), "VALUE_INVALID", "budget_mc"],
  ["POST", () => "/admin/keys", () => key({ reset: "weekly" }), "VALUE_INVALID", "reset"],
  ["POST", () => "/admin/keys", () => key({ allow: "fx__echo" }), "VALUE_INVALID", "allow"],
  ["POST", () => "/admin/keys", () => key({ prices: { fx__echo: -5 } }), "VALUE_INVALID", "prices"],
  ["POST", () => "/admin/keys", () => key({ expires_at: "tomorrow" }), "VALUE_INVALID", "expires_at"],
  // PATCH /admin/keys/{id}: every field optional, so no FIELD_MISSING.
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ reset: "daily" }), "FIELD_UNKNOWN", "reset"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ name: "" }), "VALUE_INVALID", "name"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ budget_mc: "5000" }), "VALUE_INVALID", "budget_mc"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ budget_mc: 999 }), "VALUE_INVALID", "budget_mc"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ allow: [1] }), "VALUE_INVALID", "allow"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ prices: [] }), "VALUE_INVALID", "prices"],
  ["PATCH", () => `/admin/keys/${keyId}`, () => ({ expires_at: 5 }), "VALUE_INVALID", "expires_at"],
  // PUT /admin/sandbox {tools, budget_mc?, ttl_s?, keys_per_day?}
  ["PUT", () => "/admin/sandbox", () => ({ tools: ["fx__echo"], open: true }), "FIELD_UNKNOWN", "open"],
  ["PUT", () => "/admin/sandbox", () => ({ budget_mc: 5 }), "FIELD_MISSING", "tools"],
  ["PUT", () => "/admin/sandbox", () => ({ tools: [] }), "VALUE_INVALID", "tools"],
  ["PUT", () => "/admin/sandbox", () => ({ tools: ["fx__echo"], budget_mc: 100_001 }), "VALUE_INVALID", "budget_mc"],
  ["PUT", () => "/admin/sandbox", () => ({ tools: ["fx__echo"], ttl_s: 59 }), "VALUE_INVALID", "ttl_s"],
  ["PUT", () => "/admin/sandbox", () => ({ tools: ["fx__echo"], keys_per_day: 0 }), "VALUE_INVALID", "keys_per_day"],
  // Query parameters are fields too.
  ["GET", () => "/admin/audit?limit=0", () => undefined, "VALUE_INVALID", "limit"],
  ["GET", () => "/admin/audit?since=yesterday", () => undefined, "VALUE_INVALID", "since"],
  ["GET", () => "/admin/receipts?since=2026-13-01T00:00:00Z", () => undefined, "VALUE_INVALID", "since"],
];

describe("field errors name the field", () => {
  for (const [method, path, body, code, field] of CASES) {
    test(`${method} ${path().replace(/key_[0-9a-z]+|undefined/, "{id}")} → ${code} ${field}`, async () => {
      const r = await t.admin(method, path(), body());
      expect([r.status, await r.json()]).toEqual([400, { error: code, field }]);
    });
  }

  test("the first unknown field is the one named; a field with an odd name is named as sent", async () => {
    const r = await t.admin("POST", "/admin/orgs", { name: "x", "a/b~c": 1, second: 2 });
    expect(await r.json()).toEqual({ error: "FIELD_UNKNOWN", field: "a/b~c" });
  });

  test("other refusals stay the code alone", async () => {
    expect(await (await t.admin("POST", "/admin/keys", key({ org_id: "org_nope" }))).json()).toEqual({ error: "ORG_UNKNOWN" });
    expect(await (await t.admin("POST", "/admin/orgs", ["name"])).json()).toEqual({ error: "BODY_INVALID" });
  });
});
