// The operator API and the desk's security properties through the fetch handler: admin token,
// strict bodies, key changes that apply to the very next call, organization isolation of
// receipts, sealed upstream credentials, signing-key rotation, and request-shape limits.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { type Jwks, verifyResponse } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { ADMIN_TOKEN, makeDeskOnFixture, manualClock, type TestDesk } from "./desk-harness.ts";

const clock = manualClock("2026-11-30T12:00:00.000Z");
let fx: UpstreamFixture;
let t: TestDesk;

beforeAll(async () => {
  fx = startUpstreamFixture();
  t = await makeDeskOnFixture(fx.url, { tools: ["fx__echo"], priceMc: 1000, upstreamCostMc: 100 }, { now: clock.now });
});

afterAll(async () => {
  await t[Symbol.asyncDispose]();
  await fx.stop();
});

const get = (path: string, bearer?: string) =>
  t.handler(new Request(`http://desk.test${path}`, bearer === undefined ? {} : { headers: { authorization: `Bearer ${bearer}` } }));

describe("operator API", () => {
  test("every /admin path wants the admin token", async () => {
    for (const bearer of [undefined, "", "wrong-token-wrong-token-wrong-token-xx", `${ADMIN_TOKEN}x`]) {
      const r = await get("/admin/orgs", bearer);
      expect(r.status).toBe(401);
      expect(await r.json()).toEqual({ error: "ADMIN_TOKEN_INVALID" });
    }
    const key = await t.makeKey({ budget_mc: 1, reset: "none", allow: [] });
    expect((await get("/admin/keys", key.secret)).status).toBe(401);
  });

  test("organizations: create and list", async () => {
    const r = await t.admin("POST", "/admin/orgs", { name: "Globex" });
    expect(r.status).toBe(201);
    const org = (await r.json()) as { org_id: string; name: string };
    expect(org).toEqual({ org_id: expect.stringMatching(/^org_[0-9a-z]{16}$/), name: "Globex" });
    const list = (await (await t.admin("GET", "/admin/orgs")).json()) as { org_id: string }[];
    expect(list.map((o) => o.org_id)).toContain(org.org_id);
  });

  test("strict bodies: unknown, missing and bad fields are refused with a code and the field only", async () => {
    const cases: [unknown, number, Record<string, string>][] = [
      [{ name: "x", extra: 1 }, 400, { error: "FIELD_UNKNOWN", field: "extra" }],
      [{}, 400, { error: "FIELD_MISSING", field: "name" }],
      [{ name: "" }, 400, { error: "VALUE_INVALID", field: "name" }],
      [["name"], 400, { error: "BODY_INVALID" }],
    ];
    for (const [body, status, answer] of cases) {
      const r = await t.admin("POST", "/admin/orgs", body);
      expect([r.status, await r.json()]).toEqual([status, answer]);
    }
    const org = ((await (await t.admin("POST", "/admin/orgs", { name: "k" })).json()) as { org_id: string }).org_id;
    const bad: [Record<string, unknown>, Record<string, string>][] = [
      [{ org_id: "org_nope", budget_mc: 1, reset: "none", allow: [] }, { error: "ORG_UNKNOWN" }],
      [
        { org_id: org, budget_mc: -1, reset: "none", allow: [] },
        { error: "VALUE_INVALID", field: "budget_mc" },
      ],
      [
        { org_id: org, budget_mc: 1.5, reset: "none", allow: [] },
        { error: "VALUE_INVALID", field: "budget_mc" },
      ],
      [
        { org_id: org, budget_mc: 1, reset: "weekly", allow: [] },
        { error: "VALUE_INVALID", field: "reset" },
      ],
      [
        { org_id: org, budget_mc: 1, reset: "none", allow: "fx__echo" },
        { error: "VALUE_INVALID", field: "allow" },
      ],
      [
        { org_id: org, budget_mc: 1, reset: "none", allow: [], expires_at: "tomorrow" },
        { error: "VALUE_INVALID", field: "expires_at" },
      ],
    ];
    for (const [body, answer] of bad) expect(await (await t.admin("POST", "/admin/keys", body)).json()).toEqual(answer);
  });

  test("a new key's secret is shown once, stored only as a hash", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "daily", allow: ["fx__echo"], name: "agent-7" });
    expect(k.secret).toMatch(/^cd_live_[A-Za-z0-9_-]{43}$/);
    const listed = await (await t.admin("GET", `/admin/keys?org_id=${k.orgId}`)).text();
    expect(listed).not.toContain(k.secret);
    expect(listed).not.toContain(k.secret.slice(20));
    const row = t.ledger.testOnlyDatabase().query("SELECT secret_sha256 FROM keys WHERE id = ?").get(k.keyId) as { secret_sha256: Uint8Array };
    expect(Buffer.from(row.secret_sha256).toString("hex")).toBe(new Bun.CryptoHasher("sha256").update(k.secret).digest("hex"));
    // Nowhere in clear on disk either, before or after a rotation: only the 12-character lookup
    // prefix is stored, so what follows it (the secret part) must be in no file of the data dir.
    const rotated = (await (await t.admin("POST", `/admin/keys/${k.keyId}/rotate`)).json()) as { secret: string };
    t.ledger.testOnlyDatabase().run("PRAGMA wal_checkpoint(FULL)");
    for (const secret of [k.secret, rotated.secret]) {
      const needle = Buffer.from(secret.slice("cd_live_".length + 12));
      for (const file of readdirSync(t.dir)) expect(`${file}: ${readFileSync(join(t.dir, file)).includes(needle)}`).toBe(`${file}: false`);
    }
    k.secret = rotated.secret;
    expect(await (await get("/v1/key", k.secret)).json()).toEqual({
      key_id: k.keyId,
      org_id: k.orgId,
      budget_mc: 5000,
      spent_mc: 0,
      remaining_mc: 5000,
      reset: "daily",
      period: "2026-11-30",
    });
    const tools = (await (await get("/v1/tools", k.secret)).json()) as { tools: { name: string; price_mc: number; input_schema: unknown }[] };
    expect(tools.tools.map((x) => [x.name, x.price_mc])).toEqual([["fx__echo", 1000]]);
    expect(tools.tools[0]!.input_schema).toMatchObject({ type: "object", required: ["text"] });
  });

  test("PATCH, rotate and revoke apply to the very next call", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    expect((await t.call(k.secret, "fx__echo", { text: "1" })).status).toBe(200);
    expect((await t.admin("PATCH", `/admin/keys/${k.keyId}`, { allow: [] })).status).toBe(200);
    expect((await t.call(k.secret, "fx__echo", { text: "2" })).status).toBe(403);
    expect((await t.admin("PATCH", `/admin/keys/${k.keyId}`, { allow: ["fx__echo"], budget_mc: 1500 })).status).toBe(200);
    expect((await t.call(k.secret, "fx__echo", { text: "3" })).status).toBe(402);
    // A budget below this period's spend is refused rather than breaking spent <= budget.
    expect(await (await t.admin("PATCH", `/admin/keys/${k.keyId}`, { budget_mc: 999 })).json()).toEqual({ error: "VALUE_INVALID", field: "budget_mc" });
    expect(await (await t.admin("PATCH", `/admin/keys/${k.keyId}`, { reset: "daily" })).json()).toEqual({ error: "FIELD_UNKNOWN", field: "reset" });
    expect(await (await t.admin("PATCH", "/admin/keys/key_nope", { name: "x" })).json()).toEqual({ error: "KEY_UNKNOWN" });
    expect((await t.admin("PATCH", `/admin/keys/${k.keyId}`, { budget_mc: 5000, prices: { fx__echo: 10 } })).status).toBe(200);
    expect((await t.call(k.secret, "fx__echo", { text: "4" })).headers.get("x-clearing-price-mc")).toBe("10");

    const rotated = (await (await t.admin("POST", `/admin/keys/${k.keyId}/rotate`)).json()) as { key_id: string; secret: string };
    expect(rotated.key_id).toBe(k.keyId);
    expect((await t.call(k.secret, "fx__echo", { text: "5" })).status).toBe(401);
    expect((await t.call(rotated.secret, "fx__echo", { text: "6" })).status).toBe(200);
    expect((await t.admin("POST", `/admin/keys/${k.keyId}/revoke`)).status).toBe(200);
    expect((await t.call(rotated.secret, "fx__echo", { text: "7" })).status).toBe(401);
    expect((await t.admin("POST", "/admin/keys/key_nope/revoke")).status).toBe(404);
  });

  test("the audit log: one row per call with margin on charged calls, filtered by org, key and time", async () => {
    const k = await t.makeKey({ budget_mc: 1000, reset: "none", allow: ["fx__echo"] });
    await t.call(k.secret, "fx__echo", { text: "1" });
    clock.advance(1000);
    await t.call(k.secret, "fx__echo", { text: "2" });
    clock.advance(-1000);
    const rows = (await (await t.admin("GET", `/admin/audit?key_id=${k.keyId}`)).json()) as Record<string, unknown>[];
    expect(rows).toEqual([
      expect.objectContaining({
        at: "2026-11-30T12:00:00.000Z",
        org_id: k.orgId,
        key_id: k.keyId,
        tool: "fx__echo",
        outcome: "charged",
        http_status: 200,
        price_mc: 1000,
        upstream_cost_mc: 100,
        margin_mc: 900,
      }),
      expect.objectContaining({ at: "2026-11-30T12:00:01.000Z", outcome: "refused_budget", http_status: 402, margin_mc: 0 }),
    ]);
    const since = (await (await t.admin("GET", `/admin/audit?key_id=${k.keyId}&since=2026-11-30T12:00:01Z`)).json()) as unknown[];
    expect(since).toHaveLength(1);
    expect(await (await t.admin("GET", "/admin/audit?limit=0")).json()).toEqual({ error: "VALUE_INVALID", field: "limit" });
  });

  test("a receipt is visible only inside its organization; the admin sees all", async () => {
    const a = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    const orgB = ((await (await t.admin("POST", "/admin/orgs", { name: "B" })).json()) as { org_id: string }).org_id;
    const b = (await (await t.admin("POST", "/admin/keys", { org_id: orgB, budget_mc: 5000, reset: "none", allow: ["fx__echo"] })).json()) as {
      secret: string;
    };
    const r = await t.call(a.secret, "fx__echo", { text: "mine" });
    const id = r.headers.get("x-clearing-receipt-id")!;
    const mine = await get(`/v1/receipts/${id}`, a.secret);
    expect(mine.status).toBe(200);
    expect(((await mine.json()) as { receipt: { id: string } }).receipt.id).toBe(id);
    const theirs = await get(`/v1/receipts/${id}`, b.secret);
    expect([theirs.status, await theirs.json()]).toEqual([404, { error: "RECEIPT_UNKNOWN" }]);
    expect((await get(`/v1/receipts/${id}`, ADMIN_TOKEN)).status).toBe(200);
    expect((await get(`/v1/receipts/${id}`)).status).toBe(401);
    const exportB = await (await t.admin("GET", `/admin/receipts?org_id=${orgB}`)).text();
    expect(exportB).not.toContain(id);
  });

  test("signing-key rotation: new receipts carry the new kid, old ones still verify from the JWKS", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    const before = (await (await t.call(k.secret, "fx__echo", { text: "old" })).json()) as { receipt: { kid: string } };
    const rot = (await (await t.admin("POST", "/admin/signing-key/rotate")).json()) as { kid: string; retired_kid: string };
    expect(rot.retired_kid).toBe(before.receipt.kid);
    const after = (await (await t.call(k.secret, "fx__echo", { text: "new" })).json()) as { receipt: { kid: string } };
    expect(after.receipt.kid).toBe(rot.kid);
    const jwks = (await (await get("/.well-known/receipt-signing-key.json")).json()) as Jwks;
    expect(jwks.keys.map((x) => x.kid)).toEqual([rot.kid, rot.retired_kid]);
    expect(jwks.keys.every((x) => !("d" in x))).toBe(true);
    expect(verifyResponse(before, jwks, { text: "old" }).every((c) => c.ok)).toBe(true);
    expect(verifyResponse(after, jwks, { text: "new" }).every((c) => c.ok)).toBe(true);
    const { checkLedger } = await import("../../src/core/desk/check.ts");
    expect((await checkLedger(t.ledger)).problems).toEqual([]);
  });

  test("request shape: JSON only, a size limit, and x-clearing headers on every /v1/tools answer", async () => {
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["fx__echo"] });
    const send = (body: BodyInit, type = "application/json") =>
      t.handler(
        new Request("http://desk.test/v1/tools/fx__echo", { method: "POST", headers: { authorization: `Bearer ${k.secret}`, "content-type": type }, body }),
      );
    const cases: [Response, number, string][] = [
      [await send('{"text":"x"}', "text/plain"), 415, "CONTENT_TYPE_INVALID"],
      [await send("{not json"), 400, "BODY_INVALID"],
      [await send(JSON.stringify({ text: "x".repeat(1024 * 1024 + 1) })), 413, "BODY_TOO_LARGE"],
    ];
    for (const [r, status, code] of cases) {
      expect([r.status, await r.json()]).toEqual([status, { error: code }]);
      expect(r.headers.get("x-clearing-outcome")).toBe("refused_request");
      expect(r.headers.get("x-clearing-price-mc")).toBe("0");
      expect(r.headers.get("x-clearing-remaining-mc")).toBe("0");
    }
    expect((await get("/v1/nothing")).status).toBe(404);
    const wrongMethod = await get("/v1/tools/fx__echo", k.secret);
    expect([wrongMethod.status, await wrongMethod.json(), wrongMethod.headers.get("x-clearing-outcome")]).toEqual([
      404,
      { error: "NOT_FOUND" },
      "refused_request",
    ]);
    const badEscape = await t.handler(
      new Request("http://desk.test/v1/tools/%E0%A4%A", {
        method: "POST",
        headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
        body: "{}",
      }),
    );
    expect([badEscape.status, await badEscape.json(), badEscape.headers.get("x-clearing-price-mc")]).toEqual([404, { error: "NOT_FOUND" }, "0"]);
    // No tool name at all is an unknown tool, headers included.
    const noName = await t.handler(
      new Request("http://desk.test/v1/tools/", {
        method: "POST",
        headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
        body: "{}",
      }),
    );
    expect([noName.status, await noName.json(), noName.headers.get("x-clearing-outcome")]).toEqual([404, { error: "TOOL_UNKNOWN" }, "refused_tool_unknown"]);
    expect(await (await t.admin("GET", "/admin/keys/%E0%A4%A")).json()).toEqual({ error: "NOT_FOUND" });
    expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(0);
  });

  test("upstreams: names are checked, duplicates refused, an unreachable one is not stored", async () => {
    const bad = [
      [
        { name: "Fx", url: fx.url },
        { error: "VALUE_INVALID", field: "name" },
      ],
      [
        { name: "x".repeat(33), url: fx.url },
        { error: "VALUE_INVALID", field: "name" },
      ],
      [
        { name: "ok", url: "ftp://127.0.0.1/" },
        { error: "VALUE_INVALID", field: "url" },
      ],
      [
        { name: "ok", url: "http://user:pw@127.0.0.1/" },
        { error: "VALUE_INVALID", field: "url" },
      ],
      [
        { name: "ok", url: fx.url, headers: { "mcp-session-id": "x" } },
        { error: "VALUE_INVALID", field: "headers" },
      ],
      [{ name: "fx", url: fx.url }, { error: "UPSTREAM_EXISTS" }],
      [{ name: "down", url: "http://127.0.0.1:9/mcp" }, { error: "UPSTREAM_UNREACHABLE" }],
    ] as const;
    for (const [body, answer] of bad) expect(await (await t.admin("POST", "/admin/upstreams", body)).json()).toEqual(answer);
    expect(await t.ledger.catalog.upstream("down")).toBeNull();
    const refreshed = await t.admin("POST", "/admin/upstreams/fx/refresh");
    expect(refreshed.status).toBe(200);
    const refreshedTools = ((await refreshed.json()) as { tools: string[] }).tools;
    expect(refreshedTools).toHaveLength(8);
    // The fixture also lists "has space": a name outside [A-Za-z0-9_.-] is left out, with a log line.
    expect(refreshedTools).not.toContain("fx__has space");
    expect(t.logs).toContain("upstream fx: left out a tool whose name is not 1-128 of [A-Za-z0-9_.-]");
    expect(await (await t.admin("POST", "/admin/upstreams/nope/refresh")).json()).toEqual({ error: "UPSTREAM_UNKNOWN" });
    expect(await (await t.admin("PUT", "/admin/tools/fx__nope", { price_mc: 1, upstream_cost_mc: 0 })).json()).toEqual({ error: "TOOL_UNKNOWN" });
  });
});

describe("sealed upstream credentials", () => {
  test("the credential header reaches the upstream and appears nowhere else: not in the database file, any response or any log line", async () => {
    const SECRET = "sk-paid-tool-CREDENTIAL-9f8e7d6c5b4a";
    await using paid = startUpstreamFixture({ requireHeader: { name: "x-api-key", value: SECRET } });
    const responses: string[] = [];
    const keep = async (r: Response) => {
      const text = await r.text();
      responses.push(text, JSON.stringify(Object.fromEntries(r.headers as unknown as Iterable<[string, string]>)));
      const isJson = r.headers.get("content-type")?.startsWith("application/json") ?? false;
      return { status: r.status, json: (isJson ? JSON.parse(text) : {}) as Record<string, unknown> };
    };
    const reg = await keep(await t.admin("POST", "/admin/upstreams", { name: "paid", url: paid.url, headers: { "x-api-key": SECRET } }));
    expect(reg.status).toBe(201);
    expect(reg.json.header_names).toEqual(["x-api-key"]);
    await keep(await t.admin("PUT", "/admin/tools/paid__echo", { price_mc: 5, upstream_cost_mc: 1 }));
    const k = await t.makeKey({ budget_mc: 5000, reset: "none", allow: ["paid__echo", "paid__fail_5xx"] });
    expect((await keep(await t.call(k.secret, "paid__echo", { text: "with credential" }))).status).toBe(200);
    expect((await keep(await t.call(k.secret, "paid__fail_5xx", {}))).status).toBe(502);
    expect(paid.seenCredentials.length).toBeGreaterThan(0);
    expect(paid.seenCredentials.every((c) => c === SECRET)).toBe(true);
    for (const path of ["/admin/upstreams", "/admin/tools", "/admin/audit", "/admin/receipts", "/admin/keys"]) await keep(await t.admin("GET", path));
    await keep(await get("/v1/tools", k.secret));

    for (const text of responses) expect(text).not.toContain(SECRET);
    for (const line of t.logs) expect(line).not.toContain(SECRET);
    t.ledger.testOnlyDatabase().run("PRAGMA wal_checkpoint(FULL)");
    const needle = Buffer.from(SECRET);
    for (const file of readdirSync(t.dir)) {
      expect(`${file}: ${readFileSync(join(t.dir, file)).includes(needle)}`).toBe(`${file}: false`);
    }
    // Stored as a header credential: the names in the clear, each value a sealed field of its own.
    const row = (await t.ledger.catalog.upstream("paid"))!;
    expect(row.auth).toEqual({ type: "header", header_names: ["x-api-key"] });
    expect(Object.keys(await t.ledger.credentials.of("paid").load())).toEqual(["header:x-api-key"]);
  });

  test("a sealed blob moved onto another upstream's row does not open", async () => {
    const { importSealingKey, seal, unseal } = await import("../../src/core/desk/seal.ts");
    const key = await importSealingKey(crypto.getRandomValues(new Uint8Array(32)));
    const blob = await seal(key, "paid", '{"x-api-key":"s"}');
    expect(await unseal(key, "paid", blob)).toBe('{"x-api-key":"s"}');
    await expect(unseal(key, "other", blob)).rejects.toThrow();
  });
});
