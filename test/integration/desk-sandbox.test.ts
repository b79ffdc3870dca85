// The public sandbox: off until the operator turns it on; small keys, each in its own org, that
// expire by themselves (injected clock); at most 5 per network (IPv4 /24, IPv6 /64) per UTC day,
// atomically, also under 20 concurrent requests; the forwarded address only with --trust-proxy.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { createHandler, type Handler } from "../../src/commands/desk/http.ts";
import { sha256 } from "../../src/core/desk/secrets.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { ADMIN_TOKEN, makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";
import { rawMcp, serveDesk } from "./desk-mcp-harness.ts";

const clock = manualClock("2026-11-30T10:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo", "fx__add"], priceMc: 700, upstreamCostMc: 100 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

/** A peer as Bun.serve reports it (listening on 8787), so each test picks the caller's address. */
const from = (address: string) => ({ requestIP: () => ({ address }), port: 8787 });

function askKey(address: string, handler: Handler = t.handler, headers: Record<string, string> = {}): Promise<Response> {
  return handler(new Request("http://localhost:8787/v1/sandbox/keys", { method: "POST", headers: { host: "localhost:8787", ...headers } }), from(address));
}

type SandboxKey = { key_id: string; secret: string; expires_at: string; budget_mc: number; allow: string[] };

async function turnOn(body: Record<string, unknown> = { tools: ["fx__echo", "fx__add"] }) {
  const r = await t.admin("PUT", "/admin/sandbox", body);
  expect(r.status).toBe(200);
  return r.json();
}

describe("sandbox settings", () => {
  test("off by default: keys are refused with 404 SANDBOX_OFF and nothing is written", async () => {
    expect(await (await t.admin("GET", "/admin/sandbox")).json()).toEqual({ enabled: false });
    const orgs = (await t.ledger.orgs.list()).length;
    const r = await askKey("203.0.113.10");
    expect(r.status).toBe(404);
    expect(await r.json()).toEqual({ error: "SANDBOX_OFF" });
    expect((await t.ledger.orgs.list()).length).toBe(orgs);
  });

  test("PUT checks its body and needs the admin token; defaults are 2,000 mc and 3,600 s", async () => {
    const bad: [unknown, number, string, string?][] = [
      [{ tools: ["fx__echo", "fx__nope"] }, 404, "TOOL_UNKNOWN"],
      [{ tools: ["fx__echo", "fx__add", "fx__echo"] }, 400, "VALUE_INVALID", "tools"],
      [{ tools: [] }, 400, "VALUE_INVALID", "tools"],
      [{ tools: ["fx__echo"], budget_mc: 100_001 }, 400, "VALUE_INVALID", "budget_mc"],
      [{ tools: ["fx__echo"], ttl_s: 59 }, 400, "VALUE_INVALID", "ttl_s"],
      [{ tools: ["fx__echo"], keys_per_day: 0 }, 400, "VALUE_INVALID", "keys_per_day"],
      [{ tools: ["fx__echo"], keys_per_day: 1.5 }, 400, "VALUE_INVALID", "keys_per_day"],
      [{ tools: ["fx__echo"], ttl_s: 1.5 }, 400, "VALUE_INVALID", "ttl_s"],
      [{ tools: ["fx__echo"], extra: 1 }, 400, "FIELD_UNKNOWN", "extra"],
      [{ budget_mc: 5 }, 400, "FIELD_MISSING", "tools"],
    ];
    for (const [body, status, code, field] of bad) {
      const r = await t.admin("PUT", "/admin/sandbox", body);
      expect([r.status, await r.json()]).toEqual([status, field === undefined ? { error: code } : { error: code, field }]);
    }
    const noAdmin = await t.handler(
      new Request("http://desk.test/admin/sandbox", { method: "PUT", headers: { "content-type": "application/json" }, body: "{}" }),
    );
    expect(noAdmin.status).toBe(401);
    expect(await turnOn()).toEqual({
      enabled: true,
      tools: ["fx__echo", "fx__add"],
      budget_mc: 2000,
      ttl_s: 3600,
      keys_per_day: 200,
      updated_at: "2026-11-30T10:00:00.000Z",
    });
    expect(await (await t.admin("GET", "/admin/sandbox")).json()).toMatchObject({ enabled: true, budget_mc: 2000, ttl_s: 3600, keys_per_day: 200 });
    expect(await (await t.admin("DELETE", "/admin/sandbox")).json()).toEqual({ enabled: false });
    expect((await askKey("203.0.113.11")).status).toBe(404);
  });
});

describe("sandbox keys", () => {
  test("a key: 201 with its secret once, its own new org, the sandbox's budget and tools; it pays, and only for those tools", async () => {
    clock.set("2026-11-30T10:00:00.000Z");
    await turnOn({ tools: ["fx__echo"], budget_mc: 1000, ttl_s: 600 });
    const r1 = await askKey("198.51.100.1");
    expect(r1.status).toBe(201);
    expect(r1.headers.get("cache-control")).toBe("no-store");
    const k1 = (await r1.json()) as SandboxKey;
    expect(Object.keys(k1).sort()).toEqual(["allow", "budget_mc", "expires_at", "key_id", "secret"]);
    expect(k1).toMatchObject({ budget_mc: 1000, allow: ["fx__echo"], expires_at: "2026-11-30T10:10:00.000Z" });
    expect(k1.secret).toMatch(/^cd_live_/);
    const k2 = (await (await askKey("198.51.100.2")).json()) as SandboxKey;
    const row1 = (await t.ledger.keys.get(k1.key_id))!;
    const row2 = (await t.ledger.keys.get(k2.key_id))!;
    expect(row1.orgId).not.toBe(row2.orgId);
    expect((await t.ledger.orgs.get(row1.orgId))!.name).toBe("sandbox");

    expect((await t.call(k1.secret, "fx__echo", { text: "try" })).status).toBe(200);
    expect((await t.call(k1.secret, "fx__add", { a: 1, b: 2 })).status).toBe(403);
    expect((await t.call(k1.secret, "fx__echo", { text: "again" })).status).toBe(402);
    expect((await t.ledger.keys.get(k1.key_id))!.spentMc).toBe(700);
  });

  test("expired keys stop at once (REST and MCP); their org, audit rows and receipts stay", async () => {
    clock.set("2026-11-30T11:00:00.000Z");
    await turnOn({ tools: ["fx__echo"], ttl_s: 60 });
    const k = (await (await askKey("192.0.2.77")).json()) as SandboxKey;
    const paid = (await (await t.call(k.secret, "fx__echo", { text: "before" })).json()) as { receipt: { receipt: { id: string } } };
    clock.advance(59_999);
    expect((await t.call(k.secret, "fx__echo", { text: "last ms" })).status).toBe(200);
    clock.advance(1);
    const r = await t.call(k.secret, "fx__echo", { text: "after" });
    expect([r.status, await r.json()]).toEqual([401, { error: "KEY_INVALID" }]);
    const key = await t.handler(new Request("http://desk.test/v1/key", { headers: { authorization: `Bearer ${k.secret}` } }));
    expect(key.status).toBe(401);
    await using s = serveDesk(t);
    const mcp = await rawMcp(s.url, { jsonrpc: "2.0", id: 1, method: "tools/list" }, { authorization: `Bearer ${k.secret}` });
    expect(mcp.status).toBe(401);
    const orgId = (await t.ledger.keys.get(k.key_id))!.orgId;
    expect(await t.ledger.orgs.get(orgId)).not.toBeNull();
    expect((await t.ledger.records.audit({ orgId, keyId: null, sinceMs: null, limit: 10 })).filter((a) => a.outcome === "charged")).toHaveLength(2);
    expect((await t.admin("GET", `/v1/receipts/${paid.receipt.receipt.id}`)).status).toBe(200);
  });

  test("5 keys per IPv4 /24 per UTC day; another /24 is counted apart; the next UTC day starts again", async () => {
    clock.set("2026-11-30T23:59:00.000Z");
    await turnOn();
    for (let i = 1; i <= 5; i++) expect((await askKey(`203.0.113.${i * 40}`)).status).toBe(201);
    const sixth = await askKey("203.0.113.250");
    expect([sixth.status, await sixth.json()]).toEqual([429, { error: "SANDBOX_LIMIT" }]);
    // Carried in IPv6 as IPv4-mapped, it is the same network.
    expect((await askKey("::ffff:203.0.113.9")).status).toBe(429);
    expect((await askKey("203.0.114.1")).status).toBe(201);
    expect(await t.ledger.sandbox.grants("2026-11-30", "203.0.113.0/24")).toBe(5);
    clock.set("2026-12-01T00:00:00.000Z");
    expect((await askKey("203.0.113.250")).status).toBe(201);
  });

  test("keys_per_day caps all networks together: many networks (an IPv6 /48 is 65,536 /64s) get no more; a refusal uses up no network's count", async () => {
    clock.set("2026-11-30T11:00:00.000Z");
    const day = "2026-11-30";
    const before = await t.ledger.sandbox.grants(day, "*");
    await turnOn({ tools: ["fx__echo"], keys_per_day: before + 7 });
    const statuses: number[] = [];
    for (let n = 0; n < 4; n++) for (let i = 1; i <= 3; i++) statuses.push((await askKey(`2001:db8:48:${n}::${i}`)).status);
    expect(statuses.filter((x) => x === 201)).toHaveLength(7);
    expect(statuses.slice(7)).toEqual([429, 429, 429, 429, 429]);
    expect(await t.ledger.sandbox.grants(day, "*")).toBe(before + 7);
    // The refused asks were rolled back whole: the last network's own count did not move.
    expect(await t.ledger.sandbox.grants(day, "2001:db8:48:3::/64")).toBe(0);
    expect(await t.ledger.sandbox.grants(day, "2001:db8:48:2::/64")).toBe(1);
    // Raising the cap lets the same networks in again, up to their own 5.
    await turnOn({ tools: ["fx__echo"], keys_per_day: 1000 });
    expect((await askKey("2001:db8:48:3::9")).status).toBe(201);
  });

  test("5 keys per IPv6 /64: the rest of the address does not make a new network", async () => {
    clock.set("2026-11-30T12:00:00.000Z");
    await turnOn();
    for (let i = 1; i <= 5; i++) expect((await askKey(`2001:db8:aa:bb::${i}`)).status).toBe(201);
    expect((await askKey("2001:db8:aa:bb:ffff:ffff:ffff:ffff")).status).toBe(429);
    expect((await askKey("2001:DB8:AA:BB:0:0:0:99")).status).toBe(429);
    expect((await askKey("2001:db8:aa:bc::1")).status).toBe(201);
  });

  test("20 concurrent requests from one network over real sockets: exactly 5 keys", async () => {
    clock.set("2026-11-30T13:00:00.000Z");
    await turnOn();
    await using s = serveDesk(t);
    const orgs = (await t.ledger.orgs.list()).length;
    const statuses = await Promise.all(Array.from({ length: 20 }, () => fetch(`${s.url}/v1/sandbox/keys`, { method: "POST" }).then((r) => r.status)));
    expect(statuses.filter((x) => x === 201)).toHaveLength(5);
    expect(statuses.filter((x) => x === 429)).toHaveLength(15);
    expect((await t.ledger.orgs.list()).length).toBe(orgs + 5);
    expect(await t.ledger.sandbox.grants("2026-11-30", "127.0.0.0/24")).toBe(5);
  });

  test("over a real IPv6 socket ([::1]) the peer address is counted as its /64", async () => {
    clock.set("2026-11-30T13:30:00.000Z");
    await turnOn();
    const server = Bun.serve({ hostname: "::1", port: 0, idleTimeout: 0, fetch: (req, srv) => t.handler(req, srv) });
    try {
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await fetch(`http://[::1]:${server.port}/v1/sandbox/keys`, { method: "POST" })).status);
      expect(statuses).toEqual([201, 201, 201, 201, 201, 429]);
      expect(await t.ledger.sandbox.grants("2026-11-30", "0:0:0:0::/64")).toBe(5);
    } finally {
      await server.stop(true);
    }
  });

  test("4 processes asking at once for 5 keys each on one desk.db: exactly 5 granted in all", async () => {
    const worker = join(import.meta.dir, "desk-sandbox-worker.ts");
    const procs = Array.from({ length: 4 }, () =>
      Bun.spawn([process.execPath, worker, t.dbPath, "100.100.100.0/24", "2026-11-30T16:00:00.000Z", "5"], { stdout: "pipe", stderr: "pipe" }),
    );
    const outs = await Promise.all(
      procs.map(async (p) => {
        const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
        expect({ code, err }).toEqual({ code: 0, err: "" });
        return JSON.parse(out) as { granted: number; refused: number };
      }),
    );
    expect(outs.reduce((n, o) => n + o.granted, 0)).toBe(5);
    expect(outs.reduce((n, o) => n + o.refused, 0)).toBe(15);
    expect(await t.ledger.sandbox.grants("2026-11-30", "100.100.100.0/24")).toBe(5);
  });

  test("X-Forwarded-For counts only with --trust-proxy, and then its rightmost entry (the one the proxy added)", async () => {
    clock.set("2026-11-30T14:00:00.000Z");
    await turnOn();
    // Without --trust-proxy a forged header changes nothing: the socket's network is counted.
    for (let i = 0; i < 5; i++) expect((await askKey("198.18.0.1", t.handler, { "x-forwarded-for": `10.${i}.0.1` })).status).toBe(201);
    expect((await askKey("198.18.0.1", t.handler, { "x-forwarded-for": "10.99.0.1" })).status).toBe(429);

    const proxied = createHandler(t.desk, { adminTokenSha256: sha256(ADMIN_TOKEN), trustProxy: true });
    const proxy = "127.0.0.1";
    for (let i = 0; i < 5; i++) {
      // The client may write anything to the left; the proxy appends the address it saw.
      expect((await askKey(proxy, proxied, { "x-forwarded-for": `${i}.${i}.${i}.${i}, 100.64.7.${i}` })).status).toBe(201);
    }
    expect((await askKey(proxy, proxied, { "x-forwarded-for": "9.9.9.9, 100.64.7.200" })).status).toBe(429);
    expect((await askKey(proxy, proxied, { "x-forwarded-for": "100.64.8.1" })).status).toBe(201);
    const missing = await askKey(proxy, proxied);
    expect([missing.status, await missing.json()]).toEqual([400, { error: "ADDRESS_UNKNOWN" }]);
    expect((await askKey(proxy, proxied, { "x-forwarded-for": "1.2.3.4, not-an-ip" })).status).toBe(400);
  });

  test("turning the sandbox off stops new keys; keys already handed out run until they expire", async () => {
    clock.set("2026-11-30T15:00:00.000Z");
    await turnOn({ tools: ["fx__echo"] });
    const k = (await (await askKey("192.0.2.200")).json()) as SandboxKey;
    expect((await t.admin("DELETE", "/admin/sandbox")).status).toBe(200);
    expect((await askKey("192.0.2.201")).status).toBe(404);
    expect((await t.call(k.secret, "fx__echo", { text: "still" })).status).toBe(200);
  });
});
