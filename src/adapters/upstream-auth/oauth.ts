// OAuth 2 credentials that renew themselves: client credentials, and a refresh token (rotated or
// not). Token requests are oauth4webapi's; this file decides when to make one and what to keep.
//
// - The access token is cached, and renewed before it expires (skew: a minute, or half the
//   lifetime of a shorter-lived token); a token without `expires_in` is kept until refused.
// - One renewal at a time, however many calls wait for it (single flight); each waiter gives
//   up at its own deadline, the renewal has its own (the upstream timeout).
// - A rotated refresh token is saved, sealed, before the access token that came with it is used:
//   a crash between the two leaves the new refresh token in the store, never only the old one
//   (which the authorization server has consumed, and may treat as a replay that revokes the grant).
// - A refusal by the token endpoint (an OAuth error such as `invalid_grant` or `invalid_client`)
//   marks the credential as needing a new grant, saved, so calls fail at once from then on, also
//   after a restart, with no request to the token endpoint (no retry storm).
// - The client secret and the refresh token go to token_url's origin only; the access token only
//   where the upstream client puts it (base_url's origin). None of them is ever logged or thrown.
import * as oauth from "oauth4webapi";
import { readAtMost } from "../../core/http/body.ts";
import type { SealingKey } from "../../core/desk/seal.ts";
import { isLoopback, type OAuthSettings } from "../../core/upstream/auth-config.ts";
import { type Applied, type Credential, type CredentialState, CredentialUnavailable } from "../../core/upstream/credential.ts";
import { type CredentialStore, sealField } from "../../core/upstream/credential-store.ts";

/** A token endpoint answer is small; past this it is refused unread. */
const MAX_TOKEN_ANSWER_BYTES = 64 * 1024;
const SKEW_MS = 60_000;
const ERROR_CODE = /^[A-Za-z0-9_.-]{1,64}$/;

export type StoredToken = { token: string; expires_at: number | null };

export type OAuthOptions = {
  upstream: string;
  settings: OAuthSettings;
  /** The credential's opened fields (client_secret, refresh_token, access_token, grant). */
  secrets: Record<string, string>;
  store: CredentialStore;
  sealingKey: SealingKey;
  /** The deadline of one token request. */
  timeoutMs: number;
  now?: () => number;
  /**
   * Runs after a renewal's tokens are saved and before its access token is used: the seam where
   * the crash test kills the process.
   */
  testOnlyAfterTokensSaved?: () => Promise<void>;
};

type Token = { value: string; renewAt: number | null; generation: number };

export class OAuthCredential implements Credential {
  private readonly settings: OAuthSettings;
  private readonly tokenUrl: URL;
  private readonly as: oauth.AuthorizationServer;
  private readonly client: oauth.Client;
  private readonly clientAuth: oauth.ClientAuth;
  private readonly now: () => number;
  private refreshToken: string | null;
  private token: Token | null = null;
  private generation = 0;
  private refused: Extract<CredentialState, { state: "needs_grant" }> | null = null;
  private renewal: Promise<void> | null = null;

  constructor(private readonly options: OAuthOptions) {
    const { settings, secrets } = options;
    this.settings = settings;
    this.now = options.now ?? Date.now;
    this.tokenUrl = new URL(settings.token_url);
    // The issuer is not checked for these grants (no ID token is used): token_url's origin stands in.
    this.as = { issuer: this.tokenUrl.origin, token_endpoint: this.tokenUrl.href };
    this.client = { client_id: settings.client_id };
    const secret = secrets.client_secret;
    this.clientAuth = secret === undefined ? oauth.None() : settings.client_auth === "post" ? oauth.ClientSecretPost(secret) : oauth.ClientSecretBasic(secret);
    this.refreshToken = settings.type === "oauth2_refresh_token" ? (secrets.refresh_token ?? null) : null;
    if (settings.type === "oauth2_refresh_token" && this.refreshToken === null) throw new Error("the credential has no refresh token");
    if (secrets.grant !== undefined) this.refused = JSON.parse(secrets.grant) as typeof this.refused;
    if (secrets.access_token !== undefined) this.token = this.cached(JSON.parse(secrets.access_token) as StoredToken);
  }

  async apply(_url: URL, headers: Headers, signal: AbortSignal): Promise<Applied> {
    if (this.refused !== null) throw new CredentialUnavailable("auth_failed");
    if (this.token === null || (this.token.renewAt !== null && this.now() >= this.token.renewAt)) await this.renewed(signal);
    const token = this.token;
    if (this.refused !== null || token === null) throw new CredentialUnavailable("auth_failed");
    headers.set("authorization", `Bearer ${token.value}`);
    return { generation: token.generation };
  }

  rejected(applied: Applied): boolean {
    // The token that was refused is dropped, so the next apply renews (once, for all waiters);
    // if a newer one already replaced it, the retry simply carries that one.
    if (this.token !== null && this.token.generation === applied.generation) this.token = null;
    return this.refused === null;
  }

  state(): CredentialState {
    return this.refused ?? { state: "ok" };
  }

  /** Waits for the one renewal in flight (starting it if none), up to the caller's own deadline. */
  private renewed(signal: AbortSignal): Promise<void> {
    this.renewal ??= this.renew().finally(() => {
      this.renewal = null;
    });
    const renewal = this.renewal;
    return new Promise<void>((resolve, reject) => {
      if (signal.aborted) return reject(new CredentialUnavailable("timeout"));
      const giveUp = () => reject(new CredentialUnavailable("timeout"));
      signal.addEventListener("abort", giveUp, { once: true });
      renewal.then(
        () => {
          signal.removeEventListener("abort", giveUp);
          resolve();
        },
        (err: unknown) => {
          signal.removeEventListener("abort", giveUp);
          reject(err);
        },
      );
    });
  }

  private async renew(): Promise<void> {
    if (this.refused !== null) throw new CredentialUnavailable("auth_failed");
    const requestOptions = {
      [oauth.customFetch]: this.tokenFetch,
      // http only to a loopback token endpoint (auth-config.ts checked token_url against that rule).
      [oauth.allowInsecureRequests]: this.tokenUrl.protocol === "http:" && isLoopback(this.tokenUrl.hostname),
      signal: AbortSignal.timeout(this.options.timeoutMs),
    };
    const presented = this.refreshToken;
    let answer: oauth.TokenEndpointResponse;
    try {
      if (this.settings.type === "oauth2_client_credentials") {
        const parameters: Record<string, string> = this.settings.scope === undefined ? {} : { scope: this.settings.scope };
        const res = await oauth.clientCredentialsGrantRequest(this.as, this.client, this.clientAuth, parameters, requestOptions);
        answer = await oauth.processClientCredentialsResponse(this.as, this.client, res);
      } else {
        const res = await oauth.refreshTokenGrantRequest(this.as, this.client, this.clientAuth, presented!, requestOptions);
        answer = await oauth.processRefreshTokenResponse(this.as, this.client, res);
      }
    } catch (err) {
      throw await this.failure(err);
    }
    if (answer.token_type !== "bearer") throw await this.refuse("token_type");

    const obtained = this.now();
    const lifetimeMs = typeof answer.expires_in === "number" ? Math.max(1, answer.expires_in) * 1000 : null;
    const stored: StoredToken = { token: answer.access_token, expires_at: lifetimeMs === null ? null : obtained + lifetimeMs };
    const changes: Record<string, string | null> = { access_token: await this.seal("access_token", JSON.stringify(stored)) };
    const rotated = answer.refresh_token !== undefined && answer.refresh_token !== presented ? answer.refresh_token : null;
    if (rotated !== null) {
      changes.refresh_token = await this.seal("refresh_token", rotated);
      // Held in memory at once: the one presented is consumed, whatever happens to the save.
      this.refreshToken = rotated;
    }
    try {
      await this.options.store.save(changes);
    } catch {
      throw new CredentialUnavailable("upstream_error");
    }
    await this.options.testOnlyAfterTokensSaved?.();
    this.token = this.cached(stored);
  }

  /** A saved token in memory, with the time to renew it. */
  private cached(stored: StoredToken): Token {
    let renewAt: number | null = null;
    if (stored.expires_at !== null) {
      const lifetime = Math.max(0, stored.expires_at - this.now());
      renewAt = stored.expires_at - Math.min(SKEW_MS, lifetime / 2);
    }
    return { value: stored.token, renewAt, generation: ++this.generation };
  }

  /**
   * Sorts a failed token request. An OAuth error answer (4xx with an `error` code, or a client
   * authentication challenge) is a refusal of the grant or the client: permanent until the
   * operator acts. Anything else (no answer, 5xx, 429, a garbled answer) may pass.
   */
  private async failure(err: unknown): Promise<CredentialUnavailable> {
    if (err instanceof oauth.ResponseBodyError && err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429) {
      return this.refuse(err.error);
    }
    if (err instanceof oauth.WWWAuthenticateChallengeError && err.status === 401) return this.refuse("invalid_client");
    // In these grants the only unsupported thing an answer can hold is its token type.
    if (err instanceof oauth.UnsupportedOperationError) return this.refuse("token_type");
    if (err instanceof Error && (err.name === "TimeoutError" || (err.cause instanceof Error && err.cause.name === "TimeoutError"))) {
      return new CredentialUnavailable("timeout");
    }
    return new CredentialUnavailable("upstream_error");
  }

  /** Marks the credential as needing a new grant, in memory at once and in the store. */
  private async refuse(code: string): Promise<CredentialUnavailable> {
    this.refused = { state: "needs_grant", reason: ERROR_CODE.test(code) ? code : "refused", since: this.now() };
    this.token = null;
    try {
      await this.options.store.save({ grant: await this.seal("grant", JSON.stringify(this.refused)), access_token: null });
    } catch {
      // Still refused in memory: calls fail at once until the desk restarts.
    }
    return new CredentialUnavailable("auth_failed");
  }

  private seal(field: string, value: string): Promise<string> {
    return sealField(this.options.sealingKey, this.options.upstream, field, value);
  }

  /**
   * fetch for token requests: only to token_url's origin (the client secret and the refresh token
   * go nowhere else), no redirect, the answer capped. An ID token in the answer is dropped unread:
   * the desk is an OAuth client, not an OpenID relying party, and knows no issuer to check it by.
   */
  private readonly tokenFetch = async (url: string, init: oauth.CustomFetchOptions<"POST", unknown>): Promise<Response> => {
    if (new URL(url).origin !== this.tokenUrl.origin) throw new Error("a token request to another origin");
    const res = await fetch(url, {
      method: init.method,
      headers: init.headers,
      body: init.body as RequestInit["body"],
      redirect: "manual",
      signal: init.signal,
    });
    const bytes = await readAtMost(res.body, MAX_TOKEN_ANSWER_BYTES);
    if (bytes === undefined) throw new Error("the token answer is too large");
    const headers = new Headers(res.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    let body: Uint8Array<ArrayBuffer> | string = bytes as Uint8Array<ArrayBuffer>;
    if (res.ok) {
      try {
        const json = JSON.parse(new TextDecoder().decode(bytes)) as unknown;
        if (typeof json === "object" && json !== null && !Array.isArray(json) && "id_token" in json) {
          delete (json as Record<string, unknown>).id_token;
          body = JSON.stringify(json);
        }
      } catch {
        // Not JSON: oauth4webapi reports it.
      }
    }
    return new Response(body, { status: res.status, statusText: res.statusText, headers });
  };
}
