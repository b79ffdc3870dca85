// The operator API's upstream requests: registration by kind (an MCP endpoint, or a REST API
// described by OpenAPI), re-reading tools, replacing a credential, and the listing. Bodies are
// read strictly (request.ts); an `auth` object is read by core/upstream/auth-config.ts, whose
// refusals name the field inside it (`auth.client_secret`). No secret ever comes back: answers
// show a credential's settings and state only.
import type { Desk } from "../../core/desk/desk.ts";
import type { Registered, UpstreamSpec, UpstreamState } from "../../core/desk/registry.ts";
import type { AuthView, RegisteredView, UpstreamView } from "../../core/desk/wire.ts";
import { parseBaseUrl } from "../../core/rest/request.ts";
import { type AuthConfig, parseAuthConfig } from "../../core/upstream/auth-config.ts";
import { type Body, fail, objectBody, onlyFields, optional, required } from "./request.ts";

const UPSTREAM_NAME = /^[a-z][a-z0-9-]{0,31}$/;
/** A body naming any of these registers a REST upstream; otherwise an MCP one. */
const REST_FIELDS = ["base_url", "openapi", "openapi_url"];

const iso = (ms: number) => new Date(ms).toISOString();

export function upstreamView({ record: u, credential }: UpstreamState): UpstreamView {
  const auth: AuthView | null =
    u.auth === null
      ? null
      : credential?.state === "needs_grant"
        ? { ...u.auth, state: "needs_grant", reason: credential.reason, since: iso(credential.since) }
        : { ...u.auth, state: "ok" };
  return {
    name: u.name,
    kind: u.kind,
    url: u.url,
    openapi_url: u.document !== null && "url" in u.document ? u.document.url : null,
    // Header names only: the values are sealed and never leave the desk.
    header_names: u.auth?.type === "header" ? u.auth.header_names : u.headerNames,
    auth,
    created_at: iso(u.createdAt),
    refreshed_at: iso(u.refreshedAt),
  };
}

const registeredView = (r: Registered): RegisteredView => ({ ...upstreamView(r), tools: r.tools, skipped: r.skipped });

/** An http(s) URL of at most 2,048 characters without credentials (they belong in `auth`, never in logs and listings). */
const httpUrl = (v: unknown): URL | undefined => {
  if (typeof v !== "string" || v.length > 2048 || !URL.canParse(v)) return undefined;
  const u = new URL(v);
  return (u.protocol === "https:" || u.protocol === "http:") && u.username === "" && u.password === "" ? u : undefined;
};

/** `auth`: a credential object (auth-config.ts names the refused field inside it), or null for none. */
function authField(b: Body): AuthConfig | null {
  if (!Object.hasOwn(b, "auth") || b.auth === null) return null;
  const read = parseAuthConfig(b.auth);
  if ("problem" in read) fail(read.problem.code, { field: read.problem.field });
  return read.config;
}

/** MCP's `headers` (the `header` credential, as older clients send it): at most 16, each checked as `auth.headers` is. */
function headersField(b: Body): AuthConfig | null {
  const headers = optional(b, "headers", (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined));
  if (headers === undefined || Object.keys(headers).length === 0) return null;
  const read = parseAuthConfig({ type: "header", headers });
  if ("problem" in read) fail("VALUE_INVALID", { field: "headers" });
  return read.config;
}

function upstreamSpec(b: Body): UpstreamSpec {
  const name = () => required(b, "name", (v) => (typeof v === "string" && UPSTREAM_NAME.test(v) ? v : undefined));
  if (!REST_FIELDS.some((f) => Object.hasOwn(b, f))) {
    onlyFields(b, ["name", "url", "headers", "auth"]);
    const spec = { kind: "mcp" as const, name: name(), url: required(b, "url", httpUrl) };
    const headers = headersField(b);
    const auth = authField(b);
    // One credential: the old `headers` or `auth`, never both.
    if (headers !== null && auth !== null) fail("VALUE_INVALID", { field: "auth" });
    return { ...spec, auth: headers ?? auth };
  }
  onlyFields(b, ["name", "base_url", "openapi", "openapi_url", "auth"]);
  const upstreamName = name();
  const url = required(b, "base_url", (v) => {
    const parsed = typeof v === "string" ? parseBaseUrl(v) : "not a string";
    return typeof parsed === "string" ? undefined : parsed;
  });
  if (Object.hasOwn(b, "openapi") && Object.hasOwn(b, "openapi_url")) fail("VALUE_INVALID", { field: "openapi_url" });
  const document = Object.hasOwn(b, "openapi_url")
    ? { url: required(b, "openapi_url", httpUrl) }
    : {
        inline: required(b, "openapi", (v) => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined)),
      };
  return { kind: "rest", name: upstreamName, url, document, auth: authField(b) };
}

export async function listUpstreams(desk: Desk): Promise<Response> {
  return Response.json((await desk.upstreams()).map(upstreamView));
}

export async function addUpstream(desk: Desk, req: Request): Promise<Response> {
  const registered = await desk.addUpstream(upstreamSpec(await objectBody(req)));
  return Response.json(registeredView(registered), { status: 201 });
}

export async function refreshUpstream(desk: Desk, name: string): Promise<Response> {
  const { tools, skipped } = await desk.refreshUpstream(name);
  return Response.json({ name, tools, skipped });
}

/** `PUT /admin/upstreams/{name}/auth {auth}`: a new credential (a new grant), or null for none. */
export async function replaceAuth(desk: Desk, name: string, req: Request): Promise<Response> {
  const b = await objectBody(req);
  onlyFields(b, ["auth"]);
  if (!Object.hasOwn(b, "auth")) fail("FIELD_MISSING", { field: "auth" });
  return Response.json(upstreamView(await desk.replaceUpstreamAuth(name, authField(b))));
}
