// Upstream credentials: the operator's auth object checked, every secret sealed per upstream and
// field, static credentials put on requests, and OAuth renewal rules against a token endpoint
// this test controls (the certified authorization server is in test/e2e/oauth-provider.test.ts).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { setQueryKey } from "../../src/adapters/upstream-auth/static.ts";
import { importSealingKey, type SealingKey } from "../../src/core/desk/seal.ts";
import { type AuthConfig, parseAuthConfig, settingsOf } from "../../src/core/upstream/auth-config.ts";
import type { Credential, CredentialUnavailable } from "../../src/core/upstream/credential.ts";
import { openField, replaceCredential, SealedFieldError, sealField } from "../../src/core/upstream/credential-store.ts";
import { MemoryCredentialStore } from "../helpers/credential-store.ts";

let key: SealingKey;
beforeAll(async () => {
  key = await importSealingKey(crypto.getRandomValues(new Uint8Array(32)));
});

const config = (input: unknown): AuthConfig => {
  const r = parseAuthConfig(input);
  if ("problem" in r) throw new Error(JSON.stringify(r.problem));
  return r.config;
};

/** A credential opened as the desk would: secrets sealed into a store, then opened from it. */
async function opened(upstream: string, auth: AuthConfig, extra: { now?: () => number; timeoutMs?: number; store?: MemoryCredentialStore } = {}) {
  const store = extra.store ?? new MemoryCredentialStore();
  await replaceCredential(store, key, upstream, auth);
  const credential = await openCredential({
    upstream,
    settings: settingsOf(auth),
    store,
    sealingKey: key,
    timeoutMs: extra.timeoutMs ?? 2_000,
    now: extra.now,
  });
  return { credential, store };
}

async function put(credential: Credential, url = "https://api.example/v1/x?a=%20b&c=1", signal = new AbortController().signal) {
  const u = new URL(url);
  const headers = new Headers({ accept: "application/json" });
  const applied = await credential.apply(u, headers, signal);
  return { url: u, headers, applied };
}

describe("the operator's auth object", () => {
  test("each kind, with its defaults", () => {
    expect(config({ type: "bearer", token: "t0k" })).toEqual({ type: "bearer", token: "t0k" });
    expect(config({ type: "oauth2_client_credentials", token_url: "https://as.example/token", client_id: "c", client_secret: "s" })).toEqual({
      type: "oauth2_client_credentials",
      token_url: "https://as.example/token",
      client_id: "c",
      client_secret: "s",
      client_auth: "basic",
    });
    expect(settingsOf(config({ type: "oauth2_refresh_token", token_url: "http://127.0.0.1:9/t", client_id: "c", refresh_token: "r" }))).toEqual({
      type: "oauth2_refresh_token",
      token_url: "http://127.0.0.1:9/t",
      client_id: "c",
      client_auth: "none",
    });
    expect(settingsOf(config({ type: "header", headers: { "X-Api-Key": "k" } }))).toEqual({ type: "header", header_names: ["X-Api-Key"] });
  });

  test("refusals name the field", () => {
    const problem = (input: unknown) => ("problem" in parseAuthConfig(input) ? (parseAuthConfig(input) as { problem: unknown }).problem : null);
    expect(problem({ type: "bearer" })).toEqual({ field: "auth.token", code: "FIELD_MISSING" });
    expect(problem({ type: "bearer", token: "t", extra: 1 })).toEqual({ field: "auth.extra", code: "FIELD_UNKNOWN" });
    expect(problem({ type: "magic" })).toEqual({ field: "auth.type", code: "VALUE_INVALID" });
    expect(problem({ type: "bearer", token: "has space" })).toEqual({ field: "auth.token", code: "VALUE_INVALID" });
    expect(problem({ type: "header", headers: { Host: "x" } })).toEqual({ field: "auth.headers.Host", code: "VALUE_INVALID" });
    expect(problem({ type: "header", headers: { "X-A": "1", "x-a": "2" } })).toEqual({ field: "auth.headers.x-a", code: "VALUE_INVALID" });
    expect(problem({ type: "query", name: "a=b", value: "k" })).toEqual({ field: "auth.name", code: "VALUE_INVALID" });
    expect(problem({ type: "basic", username: "a:b", password: "p" })).toEqual({ field: "auth.username", code: "VALUE_INVALID" });
    const cc = { type: "oauth2_client_credentials", client_id: "c", client_secret: "s" };
    for (const url of ["http://as.example/token", "https://u:p@as.example/t", "https://as.example/t#f", "ftp://as.example/t", "http://10.0.0.1/t"]) {
      expect(problem({ ...cc, token_url: url })).toEqual({ field: "auth.token_url", code: "VALUE_INVALID" });
    }
    for (const url of ["http://127.0.0.1:8080/token", "http://localhost/t", "http://[::1]:9/t", "https://as.example/t"])
      expect(problem({ ...cc, token_url: url })).toBeNull();
    expect(problem({ ...cc, token_url: "https://as.example/t", scope: "a  b" })).toEqual({ field: "auth.scope", code: "VALUE_INVALID" });
    expect(problem({ type: "oauth2_refresh_token", token_url: "https://as.example/t", client_id: "c", refresh_token: "r", client_auth: "post" })).toEqual({
      field: "auth.client_auth",
      code: "VALUE_INVALID",
    });
  });
});

describe("sealed fields", () => {
  test("each secret is sealed under its upstream and field: moved anywhere else it does not open", async () => {
    const sealed = await sealField(key, "pay", "refresh_token", "rt-secret");
    expect(await openField(key, "pay", "refresh_token", sealed)).toBe("rt-secret");
    await expect(openField(key, "pay", "access_token", sealed)).rejects.toBeInstanceOf(SealedFieldError);
    await expect(openField(key, "other", "refresh_token", sealed)).rejects.toBeInstanceOf(SealedFieldError);
    const otherKey = await importSealingKey(crypto.getRandomValues(new Uint8Array(32)));
    await expect(openField(otherKey, "pay", "refresh_token", sealed)).rejects.toBeInstanceOf(SealedFieldError);
  });

  test("a store holding a moved field refuses to open the credential", async () => {
    const { store } = await opened("pay", config({ type: "basic", username: "u", password: "p" }));
    store.fields.password = store.fields.username!;
    await expect(openCredential({ upstream: "pay", settings: { type: "basic" }, store, sealingKey: key, timeoutMs: 1000 })).rejects.toBeInstanceOf(
      SealedFieldError,
    );
  });

  test("no secret is in what the store was given, nor in a refusal's message", async () => {
    const secrets = ["hdr-secret-1", "query-secret-2", "bearer-secret-3", "user-secret-4", "pass-secret-5"];
    const all = [
      config({ type: "header", headers: { "X-Key": secrets[0] } }),
      config({ type: "query", name: "key", value: secrets[1] }),
      config({ type: "bearer", token: secrets[2] }),
      config({ type: "basic", username: secrets[3], password: secrets[4] }),
    ];
    for (const auth of all) {
      const { store } = await opened("up", auth);
      for (const s of secrets) expect(store.written()).not.toContain(s);
    }
    const r = parseAuthConfig({ type: "bearer", token: "bad secret with spaces" });
    expect(JSON.stringify(r)).not.toContain("bad secret");
  });
});

describe("static credentials", () => {
  test("header, bearer and basic are headers; a 401 is final", async () => {
    const h = await put((await opened("up", config({ type: "header", headers: { "X-Api-Key": "k1", "X-Org": "o" } }))).credential);
    expect([h.headers.get("x-api-key"), h.headers.get("x-org")]).toEqual(["k1", "o"]);
    const b = await put((await opened("up", config({ type: "bearer", token: "tok" }))).credential);
    expect(b.headers.get("authorization")).toBe("Bearer tok");
    const basic = (await opened("up", config({ type: "basic", username: "al ice", password: "p:w" }))).credential;
    expect((await put(basic)).headers.get("authorization")).toBe(`Basic ${btoa("al ice:p:w")}`);
    expect(basic.rejected({ generation: 0 })).toBe(false);
    expect(basic.state()).toEqual({ state: "ok" });
  });

  test("a query key replaces an agent's pair of the same name and leaves the others byte for byte", async () => {
    const q = (await opened("up", config({ type: "query", name: "api_key", value: "s3cret/+=" }))).credential;
    const { url } = await put(q, "https://api.example/v1/x?a=%20b&api_key=agent&API_KEY=x&api%5Fkey=y&c=1");
    expect(url.search).toBe("?a=%20b&API_KEY=x&c=1&api_key=s3cret%2F%2B%3D");
    expect(url.pathname).toBe("/v1/x");
    const u = new URL("https://api.example/p");
    setQueryKey(u, "k", "v");
    expect(u.href).toBe("https://api.example/p?k=v");
  });
});

/** A token endpoint whose answers a test sets, counting every request. */
function tokenEndpoint() {
  const requests: { body: URLSearchParams; authorization: string | null }[] = [];
  let answer: (n: number, body: URLSearchParams) => Response | Promise<Response> = (i) =>
    Response.json({ access_token: `at-${i}`, token_type: "Bearer", expires_in: 3600 });
  let gate: Promise<void> | null = null;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    idleTimeout: 0,
    async fetch(req) {
      const body = new URLSearchParams(await req.text());
      requests.push({ body, authorization: req.headers.get("authorization") });
      const n = requests.length;
      if (gate) await gate;
      return answer(n, body);
    },
  });
  return {
    url: `http://127.0.0.1:${server.port}/token`,
    requests,
    count: () => requests.length,
    answer: (f: typeof answer) => {
      answer = f;
    },
    /** Holds every answer until the returned function is called. */
    hold: () => {
      let open!: () => void;
      gate = new Promise((r) => {
        open = r;
      });
      return () => {
        gate = null;
        open();
      };
    },
    stop: () => server.stop(true),
  };
}

describe("OAuth renewal rules (a token endpoint this test controls)", () => {
  const as = tokenEndpoint();
  afterAll(() => as.stop());
  const cc = (extra: Record<string, unknown> = {}) =>
    config({ type: "oauth2_client_credentials", token_url: as.url, client_id: "desk", client_secret: "cs-secret", scope: "read", ...extra });
  const reset = () => {
    as.requests.length = 0;
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "Bearer", expires_in: 3600 }));
  };

  test("client credentials: basic or post client authentication, the scope sent, the token cached", async () => {
    reset();
    const { credential } = await opened("up", cc());
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-1");
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-1");
    expect(as.count()).toBe(1);
    const r = as.requests[0]!;
    expect(r.body.get("grant_type")).toBe("client_credentials");
    expect(r.body.get("scope")).toBe("read");
    // RFC 6749 2.3.1: id and secret form-encoded, then basic.
    expect(atob(r.authorization!.slice("Basic ".length)).split(":").map(decodeURIComponent)).toEqual(["desk", "cs-secret"]);
    expect(r.body.get("client_secret")).toBeNull();
    const post = (await opened("up", cc({ client_auth: "post" }))).credential;
    await put(post);
    expect(as.requests[1]!.authorization).toBeNull();
    expect(as.requests[1]!.body.get("client_secret")).toBe("cs-secret");
  });

  test("renewed before expiry, with skew: a minute early, or half the lifetime of a short one", async () => {
    reset();
    let now = 1_000_000;
    const { credential } = await opened("up", cc(), { now: () => now });
    await put(credential);
    now += 3600_000 - 60_001;
    await put(credential);
    expect(as.count()).toBe(1);
    now += 2;
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-2");
    as.answer((i) => Response.json({ access_token: `short-${i}`, token_type: "bearer", expires_in: 20 }));
    now += 3600_000;
    await put(credential);
    now += 9_999;
    await put(credential);
    expect(as.count()).toBe(3);
    now += 2;
    await put(credential);
    expect(as.count()).toBe(4);
  });

  test("a token without expires_in is kept until the upstream refuses it", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `forever-${i}`, token_type: "bearer" }));
    let now = 0;
    const { credential } = await opened("up", cc(), { now: () => now });
    const first = await put(credential);
    now += 365 * 86_400_000;
    await put(credential);
    expect(as.count()).toBe(1);
    expect(credential.rejected(first.applied)).toBe(true);
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer forever-2");
  });

  test("20 waiting calls cause one renewal; 20 refusals of one token cause one more", async () => {
    reset();
    const { credential } = await opened("up", cc());
    const release = as.hold();
    const calls = Array.from({ length: 20 }, () => put(credential));
    release();
    const done = await Promise.all(calls);
    expect(new Set(done.map((d) => d.headers.get("authorization")))).toEqual(new Set(["Bearer at-1"]));
    expect(as.count()).toBe(1);
    for (const d of done) expect(credential.rejected(d.applied)).toBe(true);
    const again = await Promise.all(Array.from({ length: 20 }, () => put(credential)));
    expect(new Set(again.map((d) => d.headers.get("authorization")))).toEqual(new Set(["Bearer at-2"]));
    expect(as.count()).toBe(2);
  });

  test("a refusal of a token already replaced does not drop the new one", async () => {
    reset();
    const { credential } = await opened("up", cc());
    const old = await put(credential);
    expect(credential.rejected(old.applied)).toBe(true);
    const fresh = await put(credential);
    expect(credential.rejected(old.applied)).toBe(true);
    expect((await put(credential)).headers.get("authorization")).toBe(fresh.headers.get("authorization"));
    expect(as.count()).toBe(2);
  });

  test("a token endpoint that fails (5xx, 429, garbled, a redirect) is an upstream error, and the credential stays usable", async () => {
    reset();
    for (const bad of [
      () => new Response("down", { status: 503 }),
      () => Response.json({ error: "temporarily_unavailable" }, { status: 503 }),
      () => Response.json({ error: "slow_down" }, { status: 429 }),
      () => new Response("{not json", { headers: { "content-type": "application/json" } }),
      () => new Response(null, { status: 302, headers: { location: "https://elsewhere.example/token" } }),
    ]) {
      const { credential } = await opened("up", cc());
      as.answer(bad);
      expect(((await put(credential).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("upstream_error");
      expect(credential.state()).toEqual({ state: "ok" });
    }
  });

  test("a token type the desk cannot send (not bearer) is a refusal", async () => {
    reset();
    as.answer(() => Response.json({ access_token: "x", token_type: "mac" }));
    const { credential } = await opened("up", cc());
    const err = (await put(credential).catch((e: unknown) => e)) as CredentialUnavailable;
    expect(err.kind).toBe("auth_failed");
    expect(credential.state()).toMatchObject({ state: "needs_grant", reason: "token_type" });
  });

  test("passing failures leave the credential usable", async () => {
    reset();
    const { credential } = await opened("up", cc());
    as.answer(() => new Response("down", { status: 500 }));
    const err = (await put(credential).catch((e: unknown) => e)) as CredentialUnavailable;
    expect(err.kind).toBe("upstream_error");
    expect(credential.state()).toEqual({ state: "ok" });
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", expires_in: 60 }));
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-2");
  });

  test("a slow token endpoint: each waiter gives up at its own deadline", async () => {
    reset();
    const { credential } = await opened("up", cc(), { timeoutMs: 5_000 });
    const release = as.hold();
    const deadline = new AbortController();
    const waiting = put(credential, undefined, deadline.signal).catch((e: unknown) => e);
    deadline.abort();
    expect(((await waiting) as CredentialUnavailable).kind).toBe("timeout");
    release();
    // The renewal itself went on, for whoever calls next.
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-1");
    expect(as.count()).toBe(1);
  });

  test("a refused grant: auth failure at once, no more token requests, saved for the next start; a new credential revives it", async () => {
    reset();
    const store = new MemoryCredentialStore();
    const auth = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", refresh_token: "rt-old-secret" });
    const { credential } = await opened("up", auth, { store });
    as.answer(() => Response.json({ error: "invalid_grant", error_description: "the grant was revoked" }, { status: 400 }));
    const err = (await put(credential).catch((e: unknown) => e)) as CredentialUnavailable;
    expect(err.kind).toBe("auth_failed");
    expect(err.message).not.toContain("rt-old-secret");
    expect(credential.state()).toMatchObject({ state: "needs_grant", reason: "invalid_grant" });
    for (let i = 0; i < 50; i++) expect(((await put(credential).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("auth_failed");
    expect(as.count()).toBe(1);
    expect(credential.rejected({ generation: 1 })).toBe(false);

    const restarted = await openCredential({ upstream: "up", settings: settingsOf(auth), store, sealingKey: key, timeoutMs: 1000 });
    expect(restarted.state()).toMatchObject({ state: "needs_grant", reason: "invalid_grant" });
    expect(((await put(restarted).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("auth_failed");
    expect(as.count()).toBe(1);

    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", refresh_token: `rt-${i}`, expires_in: 60 }));
    const fresh = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", refresh_token: "rt-new-grant" });
    await replaceCredential(store, key, "up", fresh);
    const revived = await openCredential({ upstream: "up", settings: settingsOf(fresh), store, sealingKey: key, timeoutMs: 1000 });
    expect(revived.state()).toEqual({ state: "ok" });
    expect((await put(revived)).headers.get("authorization")).toBe("Bearer at-2");
    expect(as.requests[1]!.body.get("refresh_token")).toBe("rt-new-grant");
    expect(as.requests[1]!.body.get("client_id")).toBe("desk");
  });

  test("a client the endpoint refuses (invalid_client, 401) is also a refusal", async () => {
    reset();
    const { credential } = await opened("up", cc());
    as.answer(() => Response.json({ error: "invalid_client" }, { status: 401, headers: { "www-authenticate": 'Basic realm="as"' } }));
    expect(((await put(credential).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("auth_failed");
    expect(credential.state()).toMatchObject({ state: "needs_grant" });
  });

  test("rotation: the new refresh token is saved before its access token is used, and presented next time", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", refresh_token: `rt-${i}`, expires_in: 60 }));
    let now = 0;
    const store = new MemoryCredentialStore();
    const auth = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", client_secret: "cs", refresh_token: "rt-0" });
    await replaceCredential(store, key, "up", auth);
    let savedBeforeUse: string | null = null;
    const credential = await openCredential({
      upstream: "up",
      settings: settingsOf(auth),
      store,
      sealingKey: key,
      timeoutMs: 1000,
      now: () => now,
      testOnlyAfterTokensSaved: async () => {
        savedBeforeUse = await openField(key, "up", "refresh_token", store.fields.refresh_token!);
      },
    });
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-1");
    expect(savedBeforeUse!).toBe("rt-1");
    now += 120_000;
    await put(credential);
    expect(as.requests.map((r) => r.body.get("refresh_token"))).toEqual(["rt-0", "rt-1"]);
    expect(await openField(key, "up", "refresh_token", store.fields.refresh_token!)).toBe("rt-2");
  });

  test("no call uses a renewed token before its save is done, not even one that arrives meanwhile", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", refresh_token: `rt-${i}`, expires_in: 60 }));
    const store = new MemoryCredentialStore();
    const auth = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", refresh_token: "rt-0" });
    const { credential } = await opened("up", auth, { store });
    let open!: () => void;
    store.gate = new Promise((r) => {
      open = r;
    });
    const settled: string[] = [];
    const saving = store.whenSaving();
    const first = put(credential).then(() => settled.push("first"));
    await saving;
    // The token answer is in and its save is held: a call arriving now must wait too.
    const second = put(credential).then(() => settled.push("second"));
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
    expect(settled).toEqual([]);
    open();
    await Promise.all([first, second]);
    expect(settled.sort()).toEqual(["first", "second"]);
    expect(as.count()).toBe(1);
  });

  test("a save that fails: the token is not used, and the rotated refresh token is kept in memory for the next try", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", refresh_token: `rt-${i}`, expires_in: 60 }));
    const store = new MemoryCredentialStore();
    const auth = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", refresh_token: "rt-0" });
    const { credential } = await opened("up", auth, { store });
    store.failNext = new Error("disk full");
    expect(((await put(credential).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("upstream_error");
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-2");
    expect(as.requests.map((r) => r.body.get("refresh_token"))).toEqual(["rt-0", "rt-1"]);
  });

  test("an ID token in a token answer is dropped unread (the desk is no OpenID relying party)", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `at-${i}`, token_type: "bearer", expires_in: 60, id_token: "not.a.jwt" }));
    const { credential } = await opened("up", cc());
    expect((await put(credential)).headers.get("authorization")).toBe("Bearer at-1");
  });

  test("a token answer over 64 KiB is refused", async () => {
    reset();
    as.answer(() => Response.json({ access_token: "x".repeat(70_000), token_type: "bearer" }));
    const { credential } = await opened("up", cc());
    expect(((await put(credential).catch((e: unknown) => e)) as CredentialUnavailable).kind).toBe("upstream_error");
  });

  test("the client secret, the refresh token and the access tokens are never in the store's bytes", async () => {
    reset();
    as.answer((i) => Response.json({ access_token: `at-secret-${i}`, token_type: "bearer", refresh_token: `rt-secret-${i}`, expires_in: 1 }));
    let now = 0;
    const store = new MemoryCredentialStore();
    const auth = config({ type: "oauth2_refresh_token", token_url: as.url, client_id: "desk", client_secret: "cs-secret-0", refresh_token: "rt-secret-0" });
    const { credential } = await opened("up", auth, { store, now: () => now });
    for (let i = 0; i < 3; i++) {
      await put(credential);
      now += 5_000;
    }
    const written = store.written();
    for (const s of ["cs-secret-0", "rt-secret-0", "rt-secret-1", "rt-secret-3", "at-secret-1", "at-secret-3"]) expect(written).not.toContain(s);
    expect(Object.keys(store.fields).sort()).toEqual(["access_token", "client_secret", "refresh_token"]);
  });
});
