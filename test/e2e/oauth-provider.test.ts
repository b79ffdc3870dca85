// Upstream OAuth credentials against a real authorization server: oidc-provider (a certified
// OpenID Provider) in its own Node process, protecting a REST API that checks every token by
// introspection. Client credentials and rotating refresh tokens renewed; 20 concurrent calls, one
// renewal; a rotated refresh token surviving `kill -9` of our process between its save and its
// use; a revoked grant giving auth failures with no retry storm; no secret where it must not be.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RestUpstreamClient } from "../../src/adapters/rest-upstream/client.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { importSealingKey, type SealingKey } from "../../src/core/desk/seal.ts";
import { type RestTool, toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { type AuthConfig, parseAuthConfig, settingsOf } from "../../src/core/upstream/auth-config.ts";
import type { Credential } from "../../src/core/upstream/credential.ts";
import { openFields, replaceCredential } from "../../src/core/upstream/credential-store.ts";
import type { CallOutcome } from "../../src/core/upstream/outcome.ts";
import { RESOURCE_DOCUMENT, type ResourceServer, startResourceServer } from "../fixtures/oauth-resource.ts";
import { collectText } from "../helpers/desk-process.ts";
import { FileCredentialStore } from "../helpers/credential-store.ts";
import { type OAuthServer, startOAuthServer } from "../helpers/oauth-server.ts";
import { tempDir } from "../helpers/tmp.ts";

const CHILD = join(import.meta.dir, "../fixtures/oauth-credential-child.ts");
const HOUR = 3_600_000;

let server: OAuthServer;
let api: ResourceServer;
let tools: RestTool[];
let keyBytes: Uint8Array;
let key: SealingKey;
const dir = tempDir();
/** Every secret met in these tests, to look for where none may be. */
const secrets = new Set<string>();
/** Everything our side wrote or said: store files, child output, outcomes. */
const said: string[] = [];

beforeAll(async () => {
  server = await startOAuthServer();
  api = startResourceServer(server.issuer, server.clients.resource);
  ({ tools } = await toolsFromOpenApi("protected", RESOURCE_DOCUMENT));
  keyBytes = crypto.getRandomValues(new Uint8Array(32));
  key = await importSealingKey(keyBytes);
  for (const c of Object.values(server.clients)) secrets.add(c.secret);
});

afterAll(async () => {
  await api?.stop();
  await server?.stop();
  await dir[Symbol.asyncDispose]();
});

const auth = (input: Record<string, unknown>): AuthConfig => {
  const r = parseAuthConfig(input);
  if ("problem" in r) throw new Error(JSON.stringify(r.problem));
  return r.config;
};

let stores = 0;
/** A credential in a new store file, opened as the desk opens one. */
async function credentialFor(config: AuthConfig, now?: () => number) {
  const store = new FileCredentialStore(join(dir.path, `store-${++stores}.json`));
  await replaceCredential(store, key, "protected", config);
  const credential = await openCredential({ upstream: "protected", settings: settingsOf(config), store, sealingKey: key, timeoutMs: 10_000, now });
  return { store, credential };
}

const clientOf = (credential: Credential) => new RestUpstreamClient({ name: "protected", baseUrl: new URL(api.url), tools, credential, timeoutMs: 10_000 });

async function call(credential: Credential): Promise<CallOutcome> {
  const outcome = await clientOf(credential).call("whoami", {});
  said.push(JSON.stringify(outcome));
  return outcome;
}

/** The refresh token a store holds now, opened. */
async function storedRefreshToken(store: FileCredentialStore): Promise<string> {
  const fields = await openFields(key, "protected", await store.load());
  for (const v of Object.values(fields)) secrets.add(v);
  return fields.refresh_token!;
}

async function child(store: FileCredentialStore, settings: ReturnType<typeof settingsOf>, options: { clockOffsetMs?: number; seam?: boolean } = {}) {
  const config = {
    store: store.path,
    sealingKey: Buffer.from(keyBytes).toString("hex"),
    settings,
    baseUrl: api.url,
    clockOffsetMs: options.clockOffsetMs ?? 0,
    seam: options.seam ?? false,
  };
  const proc = Bun.spawn([process.execPath, CHILD], {
    stdout: "pipe",
    stderr: "pipe",
    env: { PATH: process.env.PATH ?? "", CHILD_CONFIG: JSON.stringify(config), NO_COLOR: "1" },
  });
  return { proc, out: collectText(proc.stdout as ReadableStream<Uint8Array>), err: collectText(proc.stderr as ReadableStream<Uint8Array>) };
}

describe("client credentials", () => {
  for (const clientAuth of ["basic", "post"] as const) {
    test(`client_secret_${clientAuth}: a token once, cached, renewed past its expiry`, async () => {
      const c = clientAuth === "basic" ? server.clients.basic : server.clients.post;
      let offset = 0;
      const { credential } = await credentialFor(
        auth({
          type: "oauth2_client_credentials",
          token_url: server.tokenUrl,
          client_id: c.id,
          client_secret: c.secret,
          scope: "api",
          client_auth: clientAuth,
        }),
        () => Date.now() + offset,
      );
      const before = await server.stats();
      expect(await call(credential)).toMatchObject({ kind: "ok", result: { structuredContent: { client_id: c.id } } });
      expect(await call(credential)).toMatchObject({ kind: "ok" });
      expect((await server.stats()).token - before.token).toBe(1);
      offset = HOUR;
      expect(await call(credential)).toMatchObject({ kind: "ok" });
      expect((await server.stats()).token - before.token).toBe(2);
      expect(new Set(api.tokens.slice(-3)).size).toBe(2);
    });
  }

  test("20 concurrent calls on a credential without a token: one token request, 20 answers", async () => {
    const c = server.clients.basic;
    const { credential } = await credentialFor(
      auth({ type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: c.secret, scope: "api" }),
    );
    const before = await server.stats();
    const client = clientOf(credential);
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => client.call("whoami", {})));
    expect(outcomes.map((o) => o.kind)).toEqual(Array(20).fill("ok"));
    expect((await server.stats()).token - before.token).toBe(1);
    expect(new Set(api.tokens.slice(-20)).size).toBe(1);
  });

  test("a wrong client secret: the provider refuses the client, the credential needs a new one, no retry", async () => {
    const c = server.clients.basic;
    const { credential } = await credentialFor(
      auth({ type: "oauth2_client_credentials", token_url: server.tokenUrl, client_id: c.id, client_secret: "not-the-secret" }),
    );
    const before = await server.stats();
    expect(await call(credential)).toEqual({ kind: "auth_failed" });
    expect(credential.state()).toMatchObject({ state: "needs_grant", reason: "invalid_client" });
    for (let i = 0; i < 10; i++) expect(await call(credential)).toEqual({ kind: "auth_failed" });
    expect((await server.stats()).token - before.token).toBe(1);
  });
});

describe("refresh tokens with rotation", () => {
  const rtConfig = (refreshToken: string) =>
    auth({
      type: "oauth2_refresh_token",
      token_url: server.tokenUrl,
      client_id: server.clients.refresh.id,
      client_secret: server.clients.refresh.secret,
      refresh_token: refreshToken,
    });

  test("a refresh rotates the refresh token; the new one is stored and used for the next renewal", async () => {
    const initial = await server.newRefreshToken();
    secrets.add(initial);
    let offset = 0;
    const { store, credential } = await credentialFor(rtConfig(initial), () => Date.now() + offset);
    expect(await call(credential)).toMatchObject({ kind: "ok", result: { structuredContent: { client_id: server.clients.refresh.id } } });
    const second = await storedRefreshToken(store);
    expect(second).not.toBe(initial);
    offset = HOUR;
    expect(await call(credential)).toMatchObject({ kind: "ok" });
    const third = await storedRefreshToken(store);
    expect(third).not.toBe(second);
    // The provider consumed the older ones: presenting one again is a replay, refused.
    const replay = await fetch(server.tokenUrl, {
      method: "POST",
      headers: {
        authorization: `Basic ${btoa(`${server.clients.refresh.id}:${server.clients.refresh.secret}`)}`,
        "content-type": "application/x-www-form-urlencoded",
      },
      body: new URLSearchParams({ grant_type: "refresh_token", refresh_token: initial }),
    });
    expect(replay.status).toBe(400);
  });

  test("kill -9 between the rotated token's save and its use: after a restart the stored one works, the grant lives", async () => {
    const initial = await server.newRefreshToken();
    secrets.add(initial);
    const config = rtConfig(initial);
    const store = new FileCredentialStore(join(dir.path, `store-${++stores}.json`));
    await replaceCredential(store, key, "protected", config);
    const settings = settingsOf(config);
    const before = await server.stats();

    const first = await child(store, settings, { seam: true });
    await first.out.until(/at-seam\n/);
    first.proc.kill("SIGKILL");
    expect(await first.proc.exited).not.toBe(0);
    expect(first.out.text()).toBe("at-seam\n");
    // The provider rotated the token, and the store already holds the new one.
    expect((await server.stats()).token - before.token).toBe(1);
    const rotated = await storedRefreshToken(store);
    expect(rotated).not.toBe(initial);
    expect(api.calls()).toBe(api.tokens.length);
    const apiBefore = api.calls();

    // A restart within the token's lifetime uses the stored access token: no token request.
    const second = await child(store, settings);
    expect(await second.proc.exited).toBe(0);
    expect(JSON.parse(second.out.text())).toMatchObject({ outcome: { kind: "ok" }, state: { state: "ok" } });
    expect((await server.stats()).token - before.token).toBe(1);
    expect(api.calls()).toBe(apiBefore + 1);

    // A restart past its lifetime renews with the stored refresh token; the provider accepts it
    // (had the old one been kept, this would be a replay, and the grant revoked).
    const third = await child(store, settings, { clockOffsetMs: 2 * HOUR });
    expect(await third.proc.exited).toBe(0);
    expect(JSON.parse(third.out.text())).toMatchObject({ outcome: { kind: "ok" }, state: { state: "ok" } });
    expect((await server.stats()).token - before.token).toBe(2);
    expect(await storedRefreshToken(store)).not.toBe(rotated);
    for (const c of [first, second, third]) said.push(c.out.text(), c.err.text());
    said.push(readFileSync(store.path, "utf8"));
  });

  test("a revoked grant: auth failures at once, no retry storm, the credential needs a new grant; a new grant revives it", async () => {
    const initial = await server.newRefreshToken();
    secrets.add(initial);
    const { store, credential } = await credentialFor(rtConfig(initial));
    expect(await call(credential)).toMatchObject({ kind: "ok" });
    await storedRefreshToken(store);

    await server.revokeGrants();
    const before = await server.stats();
    const apiBefore = api.calls();
    // The upstream refuses the revoked access token (401): one renewal, refused (invalid_grant).
    expect(await call(credential)).toEqual({ kind: "auth_failed" });
    expect(credential.state()).toMatchObject({ state: "needs_grant", reason: "invalid_grant" });
    const after = await server.stats();
    expect(after.token - before.token).toBe(1);
    expect(api.calls() - apiBefore).toBe(1);
    // From now on: at once, with no request to the provider or the upstream.
    const client = clientOf(credential);
    const outcomes = await Promise.all(Array.from({ length: 20 }, () => client.call("whoami", {})));
    expect(outcomes).toEqual(Array(20).fill({ kind: "auth_failed" }));
    expect((await server.stats()).token).toBe(after.token);
    expect(api.calls() - apiBefore).toBe(1);
    // Also after a restart.
    const reopened = await openCredential({ upstream: "protected", settings: settingsOf(rtConfig(initial)), store, sealingKey: key, timeoutMs: 10_000 });
    expect(reopened.state()).toMatchObject({ state: "needs_grant", reason: "invalid_grant" });
    expect(await call(reopened)).toEqual({ kind: "auth_failed" });
    expect((await server.stats()).token).toBe(after.token);

    // The operator gives a new grant: calls clear again.
    const fresh = await server.newRefreshToken();
    secrets.add(fresh);
    await replaceCredential(store, key, "protected", rtConfig(fresh));
    const revived = await openCredential({ upstream: "protected", settings: settingsOf(rtConfig(fresh)), store, sealingKey: key, timeoutMs: 10_000 });
    expect(revived.state()).toEqual({ state: "ok" });
    expect(await call(revived)).toMatchObject({ kind: "ok" });
    await storedRefreshToken(store);
    said.push(readFileSync(store.path, "utf8"));
  });
});

describe("secrets", () => {
  test("no client secret, refresh token or access token in a store's bytes, an outcome or our processes' output", async () => {
    for (const t of api.tokens) secrets.add(t);
    for (let i = 1; i <= stores; i++) said.push(readFileSync(join(dir.path, `store-${i}.json`), "utf8"));
    expect(secrets.size).toBeGreaterThan(20);
    const all = said.join("\n");
    expect(all.length).toBeGreaterThan(1000);
    for (const s of secrets) expect(all.includes(s) ? `found ${s.slice(0, 4)}…` : "absent").toBe("absent");
  });
});
