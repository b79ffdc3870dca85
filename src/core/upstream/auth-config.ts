// The operator's upstream credentials (`auth`), for REST and MCP upstreams alike: what each kind
// holds, the checks on what an operator sends, and the split between the settings that may be
// shown and stored in the clear (kind, token URL, client id, header names) and the secrets that
// are only ever stored sealed (credential-store.ts) and never shown again.

export type ClientAuth = "basic" | "post";

export type AuthConfig =
  | { type: "header"; headers: Record<string, string> }
  | { type: "query"; name: string; value: string }
  | { type: "bearer"; token: string }
  | { type: "basic"; username: string; password: string }
  | { type: "oauth2_client_credentials"; token_url: string; client_id: string; client_secret: string; scope?: string; client_auth: ClientAuth }
  | { type: "oauth2_refresh_token"; token_url: string; client_id: string; client_secret?: string; refresh_token: string; client_auth: ClientAuth };

export type AuthType = AuthConfig["type"];

/** What may be shown and stored in the clear. `client_auth: "none"`: a public client (no secret). */
export type AuthSettings =
  | { type: "header"; header_names: string[] }
  | { type: "query"; name: string }
  | { type: "bearer" }
  | { type: "basic" }
  | { type: "oauth2_client_credentials"; token_url: string; client_id: string; scope?: string; client_auth: ClientAuth }
  | { type: "oauth2_refresh_token"; token_url: string; client_id: string; client_auth: ClientAuth | "none" };

export type OAuthSettings = Extract<AuthSettings, { type: "oauth2_client_credentials" | "oauth2_refresh_token" }>;

/** A field of an operator request that is refused, with the admin API's code for it. */
export type AuthProblem = { field: string; code: "FIELD_UNKNOWN" | "FIELD_MISSING" | "VALUE_INVALID" };

/** An HTTP token (RFC 9110) of 1–64 characters. */
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$/;
const HEADER_VALUE = /^[\x20-\x7e\t]{0,4096}$/;
/** Headers the runtime or the upstream protocol sets itself: a credential must not override them. */
const RESERVED_HEADERS = new Set([
  "host",
  "content-type",
  "content-length",
  "accept",
  "connection",
  "transfer-encoding",
  "mcp-session-id",
  "mcp-protocol-version",
]);
/** A query key name made of unreserved characters only, so it reads the same before and after encoding. */
const QUERY_NAME = /^[A-Za-z0-9._~-]{1,128}$/;
/** Visible ASCII: tokens, secrets and API keys. */
const SECRET = /^[\x21-\x7e]{1,4096}$/;
const USERNAME = /^[\x20-\x39\x3b-\x7e]{0,1024}$/;
const PASSWORD = /^[\x20-\x7e]{0,1024}$/;
const CLIENT_ID = /^[\x20-\x7e]{1,255}$/;
/** RFC 6749 scope: scope-tokens of %x21 / %x23-5B / %x5D-7E, separated by one space. */
const SCOPE = /^[\x21\x23-\x5b\x5d-\x7e]+( [\x21\x23-\x5b\x5d-\x7e]+)*$/;

const FIELDS: Record<AuthType, { required: string[]; optional: string[] }> = {
  header: { required: ["headers"], optional: [] },
  query: { required: ["name", "value"], optional: [] },
  bearer: { required: ["token"], optional: [] },
  basic: { required: ["username", "password"], optional: [] },
  oauth2_client_credentials: { required: ["token_url", "client_id", "client_secret"], optional: ["scope", "client_auth"] },
  oauth2_refresh_token: { required: ["token_url", "client_id", "refresh_token"], optional: ["client_secret", "client_auth"] },
};

/**
 * A token URL: `https:`, or `http:` on a loopback address (`127.0.0.0/8`, `[::1]`, `localhost`),
 * where the token request never leaves the machine (RFC 8252 makes the same exception); no
 * credentials, no fragment, at most 2,048 characters.
 */
export function tokenUrlProblem(value: string): string | null {
  if (value.length > 2048 || !URL.canParse(value)) return "not a URL of at most 2048 characters";
  const url = new URL(value);
  if (url.username !== "" || url.password !== "" || url.hash !== "" || value.includes("#")) return "credentials or a fragment in the URL";
  if (url.protocol === "https:") return null;
  if (url.protocol === "http:" && isLoopback(url.hostname)) return null;
  return "not https (http only on a loopback address)";
}

export function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname);
}

/** Checks an operator's `auth` object; the first problem found, with the field it names. */
export function parseAuthConfig(input: unknown): { config: AuthConfig } | { problem: AuthProblem } {
  const bad = (field: string, code: AuthProblem["code"] = "VALUE_INVALID") => ({ problem: { field: `auth.${field}`, code } });
  if (typeof input !== "object" || input === null || Array.isArray(input)) return { problem: { field: "auth", code: "VALUE_INVALID" } };
  const o = input as Record<string, unknown>;
  if (o.type === undefined) return bad("type", "FIELD_MISSING");
  if (typeof o.type !== "string" || !Object.hasOwn(FIELDS, o.type)) return bad("type");
  const type = o.type as AuthType;
  const known = new Set(["type", ...FIELDS[type].required, ...FIELDS[type].optional]);
  for (const k of Object.keys(o)) if (!known.has(k)) return bad(k, "FIELD_UNKNOWN");
  for (const k of FIELDS[type].required) if (o[k] === undefined) return bad(k, "FIELD_MISSING");
  const text = (k: string, re: RegExp) => typeof o[k] === "string" && re.test(o[k] as string);

  switch (type) {
    case "header": {
      const h = o.headers;
      if (typeof h !== "object" || h === null || Array.isArray(h)) return bad("headers");
      const entries = Object.entries(h as Record<string, unknown>);
      if (entries.length === 0 || entries.length > 16) return bad("headers");
      const seen = new Set<string>();
      for (const [name, value] of entries) {
        const lower = name.toLowerCase();
        if (!HEADER_NAME.test(name) || RESERVED_HEADERS.has(lower) || seen.has(lower) || typeof value !== "string" || !HEADER_VALUE.test(value))
          return bad(`headers.${name}`);
        seen.add(lower);
      }
      return { config: { type, headers: Object.fromEntries(entries) as Record<string, string> } };
    }
    case "query":
      if (!text("name", QUERY_NAME)) return bad("name");
      if (!text("value", SECRET)) return bad("value");
      return { config: { type, name: o.name as string, value: o.value as string } };
    case "bearer":
      if (!text("token", SECRET)) return bad("token");
      return { config: { type, token: o.token as string } };
    case "basic":
      if (!text("username", USERNAME)) return bad("username");
      if (!text("password", PASSWORD)) return bad("password");
      return { config: { type, username: o.username as string, password: o.password as string } };
    default: {
      if (typeof o.token_url !== "string" || tokenUrlProblem(o.token_url) !== null) return bad("token_url");
      if (!text("client_id", CLIENT_ID)) return bad("client_id");
      if (o.client_secret !== undefined && !text("client_secret", SECRET)) return bad("client_secret");
      if (o.client_auth !== undefined && o.client_auth !== "basic" && o.client_auth !== "post") return bad("client_auth");
      // Without a secret there is no client authentication to choose.
      if (o.client_secret === undefined && o.client_auth !== undefined) return bad("client_auth");
      const common = { token_url: o.token_url, client_id: o.client_id as string, client_auth: (o.client_auth ?? "basic") as ClientAuth };
      if (type === "oauth2_client_credentials") {
        if (o.scope !== undefined && !(text("scope", SCOPE) && (o.scope as string).length <= 1024)) return bad("scope");
        return { config: { type, ...common, client_secret: o.client_secret as string, ...(o.scope !== undefined ? { scope: o.scope as string } : {}) } };
      }
      if (!text("refresh_token", SECRET)) return bad("refresh_token");
      return {
        config: {
          type,
          ...common,
          refresh_token: o.refresh_token as string,
          ...(o.client_secret !== undefined ? { client_secret: o.client_secret as string } : {}),
        },
      };
    }
  }
}

/** Secrets of a credential, by field name (the names credential-store.ts seals them under). */
export function secretsOf(config: AuthConfig): Record<string, string> {
  switch (config.type) {
    case "header":
      return Object.fromEntries(Object.entries(config.headers).map(([name, value]) => [`header:${name.toLowerCase()}`, value]));
    case "query":
      return { query_value: config.value };
    case "bearer":
      return { token: config.token };
    case "basic":
      return { username: config.username, password: config.password };
    case "oauth2_client_credentials":
      return { client_secret: config.client_secret };
    case "oauth2_refresh_token":
      return { refresh_token: config.refresh_token, ...(config.client_secret !== undefined ? { client_secret: config.client_secret } : {}) };
  }
}

/** The part of a credential that may be stored in the clear and shown. */
export function settingsOf(config: AuthConfig): AuthSettings {
  switch (config.type) {
    case "header":
      return { type: "header", header_names: Object.keys(config.headers) };
    case "query":
      return { type: "query", name: config.name };
    case "bearer":
    case "basic":
      return { type: config.type };
    case "oauth2_client_credentials":
      return {
        type: config.type,
        token_url: config.token_url,
        client_id: config.client_id,
        client_auth: config.client_auth,
        ...(config.scope !== undefined ? { scope: config.scope } : {}),
      };
    case "oauth2_refresh_token":
      return {
        type: config.type,
        token_url: config.token_url,
        client_id: config.client_id,
        client_auth: config.client_secret === undefined ? "none" : config.client_auth,
      };
  }
}
