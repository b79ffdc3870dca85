// Building a REST tool's HTTP request from base_url, the stored operation and the agent's
// arguments. The arguments are the agent's, the credential is the operator's: a value must never
// move the request to another endpoint of the upstream (a path parameter of `../admin` reaching
// an admin route with the operator's key). So every path parameter becomes part of exactly one
// segment, with every byte outside RFC 3986's unreserved set percent-encoded, and the final URL
// is parsed again and compared with what was meant before anything is sent.
import type { ArgsProblem } from "../desk/args.ts";
import type { RestOperation, RestParameter } from "./operation.ts";

export type BuiltRequest = { method: string; url: URL; headers: Headers; body?: string };

export type BuildResult = { ok: true; request: BuiltRequest } | { ok: false; problems: ArgsProblem[] };

/** One piece of a path template: literal text, or the parameter that fills it. */
export type TemplatePart = { literal: string } | { param: string };

const UNRESERVED = /^[A-Za-z0-9\-._~]$/;
/** Characters a template's literal text may hold: pchar less `%` (no pre-encoded bytes), and `/`. */
const TEMPLATE_LITERAL = /^[A-Za-z0-9\-._~!$&'()*+,;=:@/]*$/;
/** A header value we send: visible ASCII and inner spaces; nothing a runtime would trim or split. */
const HEADER_VALUE = /^(?:[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?)?$/;

/**
 * Percent-encodes every UTF-8 byte outside unreserved (`A-Z a-z 0-9 - . _ ~`). Nothing a URL
 * parser treats specially survives (`/ ? # ; % \` and dot-segment escapes like `%2e` are all
 * encoded), so the parser has nothing left to normalise. Throws on a lone surrogate, which has no
 * UTF-8 form (the caller reports it).
 */
export function encodeStrict(value: string): string {
  if (!value.isWellFormed()) throw new EncodingError();
  let out = "";
  for (const ch of value) {
    if (UNRESERVED.test(ch)) {
      out += ch;
      continue;
    }
    for (const byte of utf8.encode(ch)) out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const utf8 = new TextEncoder();

class EncodingError extends Error {
  override name = "EncodingError";
}

/** Splits a path template into segments of parts; a string says why the template is refused. */
export function parseTemplate(path: string): TemplatePart[][] | string {
  if (!path.startsWith("/")) return "the path does not start with /";
  const segments: TemplatePart[][] = [];
  for (const raw of path.slice(1).split("/")) {
    const parts: TemplatePart[] = [];
    let rest = raw;
    while (rest.length > 0) {
      const open = rest.indexOf("{");
      const literal = open === -1 ? rest : rest.slice(0, open);
      if (literal.includes("}")) return "the path has an unmatched }";
      if (!TEMPLATE_LITERAL.test(literal)) return "the path holds characters outside a URL path (or a %-escape)";
      if (literal !== "") parts.push({ literal });
      if (open === -1) break;
      const close = rest.indexOf("}", open);
      if (close === -1) return "the path has an unmatched {";
      const name = rest.slice(open + 1, close);
      if (name === "" || name.includes("{")) return "the path has an empty or nested {}";
      parts.push({ param: name });
      rest = rest.slice(close + 1);
    }
    segments.push(parts);
  }
  // A URL parser removes dot-segments, and `//` is not one endpoint on every server: refused.
  // A trailing empty segment (`/pets/`) is the document's own endpoint and stays.
  for (const [i, parts] of segments.entries()) {
    const raw = parts.map((p) => ("literal" in p ? p.literal : "{}")).join("");
    if (raw === "" && i < segments.length - 1) return "the path has an empty segment";
    if (raw === "." || raw === "..") return "the path has a . or .. segment";
  }
  return segments;
}

/** base_url: http(s), no credentials, query or fragment. A string says why it is refused. */
export function parseBaseUrl(value: string): URL | string {
  if (value.length > 2048 || !URL.canParse(value)) return "not a URL of at most 2048 characters";
  const url = new URL(value);
  if (url.protocol !== "https:" && url.protocol !== "http:") return "not an http or https URL";
  if (url.username !== "" || url.password !== "") return "credentials in the URL (they belong in auth)";
  if (url.search !== "" || url.hash !== "" || value.includes("?") || value.includes("#")) return "a query or fragment in the URL";
  return url;
}

/**
 * The request for `op` with `args` (already checked against the tool's input schema), or the
 * problems that stop it, in the shape of the desk's argument problems. Nothing is sent here.
 */
export function buildRequest(baseUrl: URL, op: RestOperation, args: Record<string, unknown>): BuildResult {
  const problems: ArgsProblem[] = [];
  const values = new Map<RestParameter, unknown>();
  for (const p of op.parameters) {
    const v = Object.hasOwn(args, p.arg) ? args[p.arg] : undefined;
    if (v === undefined || (v === null && p.in !== "path")) {
      if (p.required) problems.push({ path: pointer(p.arg), rule: "required" });
      continue;
    }
    values.set(p, v);
  }

  const template = parseTemplate(op.path);
  if (typeof template === "string") throw new Error(`a stored operation has a bad path template: ${template}`);
  const pathParams = new Map(op.parameters.filter((p) => p.in === "path").map((p) => [p.name, p]));
  let path = "";
  for (const parts of template) {
    let segment = "";
    let filled: RestParameter | undefined;
    let broken = false;
    for (const part of parts) {
      if ("literal" in part) {
        segment += part.literal;
        continue;
      }
      const p = pathParams.get(part.param);
      if (p === undefined) throw new Error(`a stored operation has no parameter for {${part.param}}`);
      filled = p;
      if (!values.has(p)) {
        broken = true;
        continue;
      }
      const text = serialize(p, values.get(p), problems, true);
      if (text === undefined) broken = true;
      else segment += text;
    }
    // `.` and `..` are dot-segments even percent-encoded in some parsers; an empty segment
    // reaches the collection instead of the item. Neither is one segment of this operation.
    if (filled !== undefined && !broken && (segment === "" || segment === "." || segment === "..")) {
      problems.push({ path: pointer(filled.arg), rule: "path_segment" });
    }
    path += `/${segment}`;
  }

  const query: string[] = [];
  const headers = new Headers();
  for (const p of op.parameters) {
    if (!values.has(p) || p.in === "path") continue;
    if (p.in === "query") {
      const pairs = queryPairs(p, values.get(p), problems);
      if (pairs !== undefined) query.push(...pairs);
      continue;
    }
    const text = serialize(p, values.get(p), problems, false);
    if (text === undefined) continue;
    if (!HEADER_VALUE.test(text)) {
      problems.push({ path: pointer(p.arg), rule: "header_value" });
      continue;
    }
    headers.set(p.name, text);
  }

  let body: string | undefined;
  if (op.body !== undefined) {
    const v = Object.hasOwn(args, op.body.arg) ? args[op.body.arg] : undefined;
    if (v === undefined && op.body.required) problems.push({ path: pointer(op.body.arg), rule: "required" });
    if (v !== undefined) {
      body = JSON.stringify(v);
      headers.set("content-type", op.body.mediaType);
    }
  }
  headers.set("accept", op.accept);
  if (problems.length > 0) return { ok: false, problems: problems.slice(0, 20) };

  const basePath = baseUrl.pathname.replace(/\/+$/, "");
  const search = query.length === 0 ? "" : `?${query.join("&")}`;
  const url = new URL(`${baseUrl.origin}${basePath}${path}${search}`);
  // The URL as a parser reads it must be the one meant: same origin, base path then exactly the
  // operation's segments, our query, no fragment. Anything else is never sent.
  if (
    url.origin !== baseUrl.origin ||
    url.pathname !== `${basePath}${path}` ||
    !url.pathname.startsWith(`${basePath}/`) ||
    url.search !== search ||
    url.hash !== ""
  ) {
    return { ok: false, problems: [{ path: "/", rule: "url" }] };
  }
  return { ok: true, request: { method: op.method.toUpperCase(), url, headers, ...(body === undefined ? {} : { body }) } };
}

/** A value's text for a path segment (percent-encoded) or a header (as is), style simple. */
function serialize(p: RestParameter, value: unknown, problems: ArgsProblem[], encode: boolean): string | undefined {
  const put = (s: string) => (encode ? encodeStrict(s) : s);
  try {
    if (value === null) {
      problems.push({ path: pointer(p.arg), rule: "type" });
      return undefined;
    }
    if (isPrimitive(value)) return put(text(value));
    if (Array.isArray(value) && value.every(isPrimitive)) return value.map((v) => put(text(v))).join(",");
    if (isFlatObject(value)) {
      const entries = Object.entries(value);
      return p.explode ? entries.map(([k, v]) => `${put(k)}=${put(text(v))}`).join(",") : entries.flatMap(([k, v]) => [put(k), put(text(v))]).join(",");
    }
    problems.push({ path: pointer(p.arg), rule: "style" });
  } catch (err) {
    if (!(err instanceof EncodingError)) throw err;
    problems.push({ path: pointer(p.arg), rule: "encoding" });
  }
  return undefined;
}

/** `name=value` pairs of a query parameter, every name and value percent-encoded. */
function queryPairs(p: RestParameter, value: unknown, problems: ArgsProblem[]): string[] | undefined {
  try {
    const name = encodeStrict(p.name);
    const one = (v: unknown) => `${name}=${encodeStrict(text(v))}`;
    if (isPrimitive(value)) return [one(value)];
    if (Array.isArray(value) && value.every(isPrimitive)) {
      if (p.style === "form" && p.explode) return value.map(one);
      return [`${name}=${value.map((v) => encodeStrict(text(v))).join(delimiter(p))}`];
    }
    if (isFlatObject(value)) {
      const entries = Object.entries(value);
      if (p.style === "deepObject") return entries.map(([k, v]) => `${name}%5B${encodeStrict(k)}%5D=${encodeStrict(text(v))}`);
      if (p.style === "form" && p.explode) return entries.map(([k, v]) => `${encodeStrict(k)}=${encodeStrict(text(v))}`);
      return [`${name}=${entries.flatMap(([k, v]) => [encodeStrict(k), encodeStrict(text(v))]).join(delimiter(p))}`];
    }
    problems.push({ path: pointer(p.arg), rule: "style" });
  } catch (err) {
    if (!(err instanceof EncodingError)) throw err;
    problems.push({ path: pointer(p.arg), rule: "encoding" });
  }
  return undefined;
}

/** Between the items of a non-exploded value: a literal comma, or an encoded space or pipe. */
function delimiter(p: RestParameter): string {
  if (p.style === "spaceDelimited") return "%20";
  if (p.style === "pipeDelimited") return "%7C";
  return ",";
}

type Primitive = string | number | boolean;

function isPrimitive(v: unknown): v is Primitive {
  return typeof v === "string" || typeof v === "boolean" || (typeof v === "number" && Number.isFinite(v));
}

function isFlatObject(v: unknown): v is Record<string, Primitive> {
  return typeof v === "object" && v !== null && !Array.isArray(v) && Object.values(v).every(isPrimitive);
}

/** A primitive's text: JSON's form for numbers and booleans, the string itself for strings. */
function text(v: unknown): string {
  return typeof v === "string" ? v : String(v);
}

function pointer(arg: string): string {
  return `/${arg.replaceAll("~", "~0").replaceAll("/", "~1")}`;
}
