// Upstream credentials through the desk's operator API and clearing path, against a real OAuth 2
// authorization server (oidc-provider in its own Node process) and upstreams that check each
// token by introspection: a REST upstream behind client credentials and behind a rotating refresh
// token, an MCP upstream behind bearer and behind client credentials. Tokens renewed past expiry
// by the desk's clock, one renewal for 20 waiting calls, the rotated refresh token in the ledger
// and used by the next desk on the same ledger, a revoked grant refunding calls with
// UPSTREAM_AUTH_FAILED (no retry storm) until PUT .../auth gives a new one, and no secret in the
// database files, any answer or any log line.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { openFields } from "../../src/core/upstream/credential-store.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { type Jwks, verifyResponse } from "../../src/core/receipt/index.ts";
import { bearerOf, introspect, RESOURCE_DOCUMENT, type ResourceServer, startResourceServer } from "../fixtures/oauth-resource.ts";
import { startUpstreamFixture } from "../fixtures/upstream-server.ts";
import { makeDesk, manualClock, type TestDesk } from "../integration/desk-harness.ts";
import { type OAuthServer, startOAuthServer } from "../helpers/oauth-server.ts";
import { tempDir } from "../helpers/tmp.ts";

const HOUR = 3_600_000;

let server: OAuthServer;
let api: ResourceServer;
const dir = tempDir("desk-oauth-");
const keyBytes = crypto.getRandomValues(new Uint8Array(32));
const clock = manualClock(new Date().toISOString());
let t: TestDesk;
/** Every secret met, to look for where none may be. */
const secrets = new Set<string>();
/** Every answer the desk gave. */
const answers: string[] = [];

const openDesk = () => makeDesk({ dir: dir.path, sealingKeyBytes: keyBytes, now: clock.now, upstreamTimeoutMs: 10_000 });

beforeAll(async () => {
  server = await startOAuthServer();
  api = startResourceServer(server.issuer, server.clients.resource);
  for (const c of Object.values(server.clients)) secrets.add(c.secret);
  t = await openDesk();
});

afterAll(async () => {
  await t?.[Symbol.asyncDispose]();
  await api?.stop();
  await server?.stop();
  dir[Symbol.dispose]();
});

async function admin(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await t.admin(method, path, body);
  const text = await r.text();
  answers.push(text);
  const isJson = r.headers.get("content-type")?.startsWith("application/json") ?? false;
  return { status: r.status, json: isJson ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

async function call(secret: string, tool: string, args: Record<string, unknown> = {}) {
  const r = await t.call(secret, tool, args);
  const text = await r.text();
  answers.push(text);
  return { status: r.status, outcome: r.headers.get("x-clearing-outcome"), json: JSON.parse(text) as Record<string, unknown> };
}

async function register(body: Record<string, unknown>, tools: string[]) {
  const r = await admin("POST", "/admin/upstreams", body);
  expect(r.status).toBe(201);
  for (const tool of tools) expect((await admin("PUT", `/admin/tools/${tool}`, { price_mc: 100, upstream_cost_mc: 10 })).status).toBe(200);
  return r.json;
}

const tokenRequests = async () => (await server.stats()).token;
const authOf = async (name: string) =>
  ((await admin("GET", "/admin/upstreams")).json as unknown as { name: string; auth: Record<string, unknown> }[]).find((u) => u.name === name)!.auth;

describe("a REST upstream behind oauth2_client_credentials", () => {
  test("registered with one call; its settings shown, never its secret; tokens cached and renewed past expiry", async () => {
    const c = server.clients.basic;
    const reg = await register(
      {
        name: "cc",
        base_url: api.url,
        openapi: RESOURCE_DOCUMENT,
        auth: { type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: c.secret, scope: "api" },
      },
      ["cc__whoami"],
    );
    expect(reg.auth).toEqual({
      type: "oauth2_client_credentials",
      token_url: server.tokenUrl,
      client_id: c.id,
      scope: "api",
      client_auth: "basic",
      state: "ok",
    });
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["cc__whoami"] });
    const before = await tokenRequests();
    const jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
    const first = await call(k.secret, "cc__whoami");
    expect(first).toMatchObject({ status: 200, outcome: "charged" });
    expect((first.json.result as Record<string, unknown>).structuredContent).toEqual({ client_id: c.id });
    expect(verifyResponse(first.json, jwks, {}).every((x) => x.ok)).toBe(true);
    expect((await call(k.secret, "cc__whoami")).status).toBe(200);
    expect((await tokenRequests()) - before).toBe(1);
    clock.advance(HOUR);
    expect((await call(k.secret, "cc__whoami")).status).toBe(200);
    expect((await tokenRequests()) - before).toBe(2);
  });

  test("20 concurrent calls waiting on an expired token: one renewal, 20 charged", async () => {
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["cc__whoami"] });
    clock.advance(HOUR);
    const before = await tokenRequests();
    const results = await Promise.all(Array.from({ length: 20 }, () => call(k.secret, "cc__whoami")));
    expect(results.map((r) => r.outcome)).toEqual(Array(20).fill("charged"));
    expect((await tokenRequests()) - before).toBe(1);
  });

  test("a wrong client secret: refunded UPSTREAM_AUTH_FAILED at once, no retry storm, needs_grant until PUT .../auth", async () => {
    const c = server.clients.post;
    await register(
      {
        name: "wrong",
        base_url: api.url,
        openapi: RESOURCE_DOCUMENT,
        auth: { type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: "not-the-secret", client_auth: "post" },
      },
      ["wrong__whoami"],
    );
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["wrong__whoami"] });
    const before = await tokenRequests();
    const reached = api.calls();
    for (let i = 0; i < 5; i++) {
      const r = await call(k.secret, "wrong__whoami");
      expect({ status: r.status, outcome: r.outcome, error: r.json.error }).toEqual({
        status: 502,
        outcome: "refunded_upstream_error",
        error: "UPSTREAM_AUTH_FAILED",
      });
    }
    expect((await tokenRequests()) - before).toBe(1);
    expect(api.calls()).toBe(reached);
    expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(0);
    expect(await authOf("wrong")).toMatchObject({ state: "needs_grant", reason: "invalid_client", since: expect.any(String) });

    const put = await admin("PUT", "/admin/upstreams/wrong/auth", {
      auth: { type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: c.secret, client_auth: "post" },
    });
    expect(put.status).toBe(200);
    expect(put.json.auth).toMatchObject({ type: "oauth2_client_credentials", state: "ok" });
    expect((await call(k.secret, "wrong__whoami")).outcome).toBe("charged");
  });

  test("PUT .../auth: strict, UPSTREAM_UNKNOWN for no such upstream, and auth null removes the credential", async () => {
    expect((await admin("PUT", "/admin/upstreams/nope/auth", { auth: null })).json).toEqual({ error: "UPSTREAM_UNKNOWN" });
    expect((await admin("PUT", "/admin/upstreams/wrong/auth", {})).json).toEqual({ error: "FIELD_MISSING", field: "auth" });
    expect((await admin("PUT", "/admin/upstreams/wrong/auth", { auth: { type: "bearer", token: "x", extra: 1 } })).json).toEqual({
      error: "FIELD_UNKNOWN",
      field: "auth.extra",
    });
    expect(
      (
        await admin("PUT", "/admin/upstreams/wrong/auth", {
          auth: { type: "oauth2_client_credentials", token_url: "http://example.com/token", client_id: "a", client_secret: "b" },
        })
      ).json,
    ).toEqual({
      error: "VALUE_INVALID",
      field: "auth.token_url",
    });
    const cleared = await admin("PUT", "/admin/upstreams/wrong/auth", { auth: null });
    expect(cleared.json.auth).toBeNull();
    expect(await t.ledger.credentials.of("wrong").load()).toEqual({});
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["wrong__whoami"] });
    // The API wants a token: without one it answers 401, the operator's credential, never the agent's fault.
    expect((await call(k.secret, "wrong__whoami")).json.error).toBe("UPSTREAM_AUTH_FAILED");
  });
});

describe("a REST upstream behind oauth2_refresh_token with rotation", () => {
  test("the rotated refresh token is stored sealed; the next desk on the same ledger uses it; a revoked grant refunds until a new one", async () => {
    const initial = await server.newRefreshToken();
    secrets.add(initial);
    const rt = server.clients.refresh;
    await register(
      {
        name: "rt",
        base_url: api.url,
        openapi: RESOURCE_DOCUMENT,
        auth: { type: "oauth2_refresh_token", token_url: server.tokenUrl, client_id: rt.id, client_secret: rt.secret, refresh_token: initial },
      },
      ["rt__whoami"],
    );
    const key = await importSealingKey(keyBytes);
    const stored = async () => {
      const fields = await openFields(key, "rt", await t.ledger.credentials.of("rt").load());
      for (const v of Object.values(fields)) secrets.add(v);
      return fields.refresh_token!;
    };
    expect(await stored()).toBe(initial);
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["rt__whoami"] });
    expect((await call(k.secret, "rt__whoami")).outcome).toBe("charged");
    const second = await stored();
    expect(second).not.toBe(initial);

    // A new desk on the same ledger (a restart): the stored token renews, and rotates again.
    await t[Symbol.asyncDispose]();
    t = await openDesk();
    clock.advance(HOUR);
    const before = await tokenRequests();
    expect((await call(k.secret, "rt__whoami")).outcome).toBe("charged");
    expect((await tokenRequests()) - before).toBe(1);
    const third = await stored();
    expect(third).not.toBe(second);

    // The grant revoked at the provider: the next renewal is invalid_grant; calls are refunded at once.
    await server.revokeGrants();
    clock.advance(HOUR);
    const revokedAt = await tokenRequests();
    for (let i = 0; i < 5; i++) {
      const r = await call(k.secret, "rt__whoami");
      expect({ status: r.status, error: r.json.error }).toEqual({ status: 502, error: "UPSTREAM_AUTH_FAILED" });
    }
    expect((await tokenRequests()) - revokedAt).toBe(1);
    expect(await authOf("rt")).toMatchObject({ type: "oauth2_refresh_token", state: "needs_grant", reason: "invalid_grant" });

    // The operator gives a new grant.
    const fresh = await server.newRefreshToken();
    secrets.add(fresh);
    const put = await admin("PUT", "/admin/upstreams/rt/auth", {
      auth: { type: "oauth2_refresh_token", token_url: server.tokenUrl, client_id: rt.id, client_secret: rt.secret, refresh_token: fresh },
    });
    expect(put.status).toBe(200);
    expect((put.json.auth as Record<string, unknown>).state).toBe("ok");
    expect((await call(k.secret, "rt__whoami")).outcome).toBe("charged");
  });
});

describe("MCP upstreams with credentials", () => {
  test("behind bearer: every exchange carries it", async () => {
    const token = `mcp-bearer-${crypto.randomUUID()}`;
    secrets.add(token);
    await using mcp = startUpstreamFixture({ requireHeader: { name: "authorization", value: `Bearer ${token}` } });
    const reg = await register({ name: "mcpb", url: mcp.url, auth: { type: "bearer", token } }, ["mcpb__echo"]);
    expect(reg.auth).toEqual({ type: "bearer", state: "ok" });
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["mcpb__echo"] });
    expect((await call(k.secret, "mcpb__echo", { text: "hi" })).outcome).toBe("charged");
    expect(mcp.seenCredentials.length).toBeGreaterThan(0);
    expect(mcp.seenCredentials.every((c) => c === `Bearer ${token}`)).toBe(true);
  });

  test("behind oauth2_client_credentials: the handshake and the calls carry a token the provider issued", async () => {
    const c = server.clients.basic;
    const presented: string[] = [];
    await using mcp = startUpstreamFixture({
      authorize: async (req) => {
        const token = bearerOf(req);
        if (token === undefined) return false;
        presented.push(token);
        return (await introspect(server.issuer, server.clients.resource, token)).active === true;
      },
    });
    await register(
      { name: "mcpo", url: mcp.url, auth: { type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: c.secret } },
      ["mcpo__echo"],
    );
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["mcpo__echo"] });
    expect((await call(k.secret, "mcpo__echo", { text: "hi" })).outcome).toBe("charged");
    expect(presented.length).toBeGreaterThan(0);
    for (const p of presented) secrets.add(p);
    // A registration without the credential is refused by the upstream, and says whose fault it is.
    const bare = await admin("POST", "/admin/upstreams", { name: "mcpx", url: mcp.url });
    expect(bare).toEqual({ status: 502, json: { error: "UPSTREAM_AUTH_FAILED" } });
  });
});

describe("a 401 to a token the upstream no longer takes", () => {
  test("MCP: the call is retried once with a fresh token and charged; a second 401 is UPSTREAM_AUTH_FAILED", async () => {
    const c = server.clients.post;
    /** Tokens the upstream stops taking (as after a revocation on its side), and what it was shown. */
    const refusedTokens = new Set<string>();
    let refuseAll = false;
    const presented: string[] = [];
    await using mcp = startUpstreamFixture({
      authorize: async (req) => {
        const token = bearerOf(req);
        if (token === undefined) return false;
        presented.push(token);
        if (refuseAll || refusedTokens.has(token)) return false;
        return (await introspect(server.issuer, server.clients.resource, token)).active === true;
      },
    });
    await register(
      {
        name: "mcpr",
        url: mcp.url,
        auth: { type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: c.secret, client_auth: "post" },
      },
      ["mcpr__echo"],
    );
    const k = await t.makeKey({ budget_mc: 100_000, reset: "none", allow: ["mcpr__echo"] });
    expect((await call(k.secret, "mcpr__echo", { text: "a" })).outcome).toBe("charged");
    const first = presented.at(-1)!;
    refusedTokens.add(first);
    const before = await tokenRequests();
    expect((await call(k.secret, "mcpr__echo", { text: "b" })).outcome).toBe("charged");
    // One new token, and the call went through with it after one 401.
    expect((await tokenRequests()) - before).toBe(1);
    expect(presented.at(-1)).not.toBe(first);
    for (const p of presented) secrets.add(p);

    refuseAll = true;
    const r = await call(k.secret, "mcpr__echo", { text: "c" });
    expect({ status: r.status, error: r.json.error }).toEqual({ status: 502, error: "UPSTREAM_AUTH_FAILED" });
    expect((await tokenRequests()) - before).toBe(2);
    for (const p of presented) secrets.add(p);
  });
});

describe("no secret where none may be", () => {
  test("not in the database files, any answer or any log line", async () => {
    for (const token of api.tokens) secrets.add(token);
    for (const path of ["/admin/upstreams", "/admin/tools", "/admin/audit", "/admin/receipts"]) await admin("GET", path);
    t.ledger.testOnlyDatabase().run("PRAGMA wal_checkpoint(FULL)");
    expect(secrets.size).toBeGreaterThan(5);
    const files = readdirSync(dir.path).map((f) => ({ f, bytes: readFileSync(join(dir.path, f)) }));
    for (const secret of secrets) {
      for (const { f, bytes } of files) expect(`${f}: ${bytes.includes(Buffer.from(secret))}`).toBe(`${f}: false`);
      for (const a of answers) expect(a).not.toContain(secret);
      for (const line of t.logs) expect(line).not.toContain(secret);
    }
  });
});
