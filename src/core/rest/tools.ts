// A checked OpenAPI document as the desk's tools: one per operation, named
// `{upstream}__{operationId}`, with an input schema every argument is checked against before any
// spend, the output schema of its JSON success answer, and the stored operation that builds its
// request. The rules are written in docs/rest-upstreams.md; this file is the one place they live.
import { compileArgsSchema } from "../desk/args.ts";
import { isJsonMediaType } from "./answer.ts";
import { checkDocument, DocumentRefused } from "./document.ts";
import { HTTP_METHODS, type HttpMethod, type ParameterLocation, type ParameterStyle, type RestOperation, type RestParameter } from "./operation.ts";
import { parseTemplate } from "./request.ts";
import { deref, type OpenApiVersion, rootKind, SCHEMA_2020_12, SchemaConverter, UnsupportedSchema } from "./schema.ts";

export type RestTool = {
  /** The upstream's own name for the tool (operationId, or built from method and path). */
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  operation: RestOperation;
};

/** An operation the desk cannot call as the document describes it, and why. */
export type SkippedOperation = { operation: string; reason: string };

export type DocumentTools = { tools: RestTool[]; skipped: SkippedOperation[] };

/** The desk's tool name rule (8.7), applied to `{upstream}__{name}`. */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** Tools one document may give; past it the document is refused. */
export const MAX_TOOLS = 1000;
/**
 * Header parameters left out of the tool: OpenAPI says to ignore Accept, Content-Type and
 * Authorization; the others are the desk's own (framing, the connection, cookies) and an agent
 * never sets them.
 */
const IGNORED_HEADERS = new Set([
  "accept",
  "content-type",
  "authorization",
  "host",
  "content-length",
  "connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "keep-alive",
  "proxy-authorization",
  "proxy-connection",
  "expect",
  "cookie",
]);
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$/;
const MEDIA_TYPE = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;

/** The tools of `document` for the upstream `upstream`; throws DocumentRefused. */
export async function toolsFromOpenApi(upstream: string, document: unknown): Promise<DocumentTools> {
  const { doc, version } = await checkDocument(document);
  const tools: RestTool[] = [];
  const skipped: SkippedOperation[] = [];
  const paths = (doc.paths ?? {}) as Record<string, unknown>;
  for (const [path, rawItem] of Object.entries(paths)) {
    let item: Record<string, unknown>;
    try {
      item = deref(doc, rawItem) as Record<string, unknown>;
    } catch (err) {
      if (!(err instanceof UnsupportedSchema)) throw err;
      skipped.push({ operation: `* ${path}`, reason: err.message });
      continue;
    }
    // Operations in the document's own order.
    for (const key of Object.keys(item)) {
      const label = `${key.toUpperCase()} ${path}`;
      if (key === "trace") {
        // TRACE answers with the request it received, the operator's credential included.
        skipped.push({ operation: label, reason: "TRACE echoes the request, credential included" });
        continue;
      }
      const method = HTTP_METHODS.find((m) => m === key);
      if (method === undefined) continue;
      try {
        tools.push(toolOf(doc, version, path, method, item, item[method] as Record<string, unknown>));
      } catch (err) {
        if (!(err instanceof Unsupported || err instanceof UnsupportedSchema)) throw err;
        skipped.push({ operation: label, reason: err.message });
      }
    }
  }
  refuseBadNames(upstream, tools);
  return { tools, skipped };
}

/** An operation the desk leaves out; the message says why. */
class Unsupported extends Error {
  override name = "Unsupported";
}

function toolOf(
  doc: Record<string, unknown>,
  version: OpenApiVersion,
  path: string,
  method: HttpMethod,
  item: Record<string, unknown>,
  op: Record<string, unknown>,
): RestTool {
  const template = parseTemplate(path);
  if (typeof template === "string") throw new Unsupported(template);
  const input = new SchemaConverter(doc, version, "request");
  const declared = parametersOf(doc, item, op);
  const body = requestBodyOf(doc, op);
  const parameters = withArgNames(declared, body !== undefined);

  const templateNames = template.flat().flatMap((p) => ("param" in p ? [p.param] : []));
  const pathNames = parameters.filter((p) => p.param.in === "path").map((p) => p.param.name);
  for (const name of templateNames) if (!pathNames.includes(name)) throw new Unsupported(`the path names {${name}}, which no path parameter declares`);
  for (const name of pathNames) if (!templateNames.includes(name)) throw new Unsupported(`the path parameter ${name} is not in the path`);

  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const { param, source } of parameters) {
    const schema = input.convert(source.schema ?? {});
    const description = typeof source.description === "string" ? source.description : undefined;
    properties[param.arg] =
      description !== undefined && typeof schema === "object" && schema !== null && !Array.isArray(schema) && schema.description === undefined
        ? { ...schema, description }
        : schema;
    if (param.required) required.push(param.arg);
  }
  if (body !== undefined) {
    properties[body.stored.arg] = input.convert(body.schema ?? {});
    if (body.stored.required) required.push(body.stored.arg);
  }
  const defs = input.defs();
  const inputSchema: Record<string, unknown> = {
    $schema: SCHEMA_2020_12,
    type: "object",
    properties,
    ...(required.length > 0 ? { required } : {}),
    additionalProperties: false,
    ...(defs ? { $defs: defs } : {}),
  };
  try {
    compileArgsSchema(inputSchema);
  } catch (err) {
    throw new Unsupported(`its input schema does not compile (${err instanceof Error ? err.message.slice(0, 200) : "invalid"})`);
  }

  const success = successAnswer(doc, op);
  const operation: RestOperation = {
    method,
    path,
    parameters: parameters.map((p) => p.param),
    ...(body ? { body: body.stored } : {}),
    accept: success.accept,
  };
  const summary = [op.summary, op.description].filter((s): s is string => typeof s === "string" && s.trim() !== "").join("\n\n");
  return {
    name: typeof op.operationId === "string" ? op.operationId : builtName(method, path),
    description: summary === "" ? `${method.toUpperCase()} ${path}` : summary,
    inputSchema,
    ...(success.schema !== undefined ? { outputSchema: outputSchemaOf(doc, version, success.schema) } : {}),
    operation,
  };
}

/**
 * A name for an operation without operationId: the method, then each path segment with its
 * braces removed, joined by `_`, characters outside `[A-Za-z0-9_.-]` turned into `_`
 * (`GET /pets/{petId}/photos` → `get_pets_petId_photos`; `GET /` → `get`).
 */
export function builtName(method: string, path: string): string {
  const segments = path
    .split("/")
    .filter((s) => s !== "")
    .map((s) => s.replace(/[{}]/g, "").replace(/[^A-Za-z0-9_.-]/g, "_"));
  return [method.toLowerCase(), ...segments].join("_");
}

type Declared = { param: Omit<RestParameter, "arg">; source: Record<string, unknown> };

/** The operation's parameters: the path item's, overridden by the operation's of the same name and location. */
function parametersOf(doc: Record<string, unknown>, item: Record<string, unknown>, op: Record<string, unknown>): Declared[] {
  const byKey = new Map<string, Record<string, unknown>>();
  for (const list of [item.parameters, op.parameters]) {
    for (const raw of Array.isArray(list) ? list : []) {
      const p = deref(doc, raw) as Record<string, unknown>;
      byKey.set(`${p.in}\u0000${p.name}`, p);
    }
  }
  const out: Declared[] = [];
  const headerNames = new Set<string>();
  for (const p of byKey.values()) {
    const name = String(p.name);
    const where = String(p.in);
    if (where === "cookie") throw new Unsupported(`cookie parameters are not supported (${name})`);
    if (where !== "path" && where !== "query" && where !== "header") throw new Unsupported(`a parameter in ${where}`);
    if (p.content !== undefined) throw new Unsupported(`a parameter described by content rather than schema (${name})`);
    if (where === "header") {
      if (IGNORED_HEADERS.has(name.toLowerCase())) continue;
      if (!HEADER_NAME.test(name)) throw new Unsupported(`a header parameter name that is not an HTTP token (${name})`);
      if (headerNames.has(name.toLowerCase())) throw new Unsupported(`two header parameters named ${name} (header names ignore case)`);
      headerNames.add(name.toLowerCase());
    }
    const { style, explode } = styleOf(where, p);
    if (where === "path" && p.required !== true) throw new Unsupported(`the path parameter ${name} is not required`);
    out.push({ param: { name, in: where, required: p.required === true, style, explode }, source: p });
  }
  return out;
}

/**
 * Styles the desk writes, with OpenAPI's defaults: path and header `simple`; query `form`
 * (explode true by default), `spaceDelimited`, `pipeDelimited` (explode true means form's), and
 * `deepObject` (explode true only). Anything else leaves the operation out.
 */
function styleOf(where: ParameterLocation, p: Record<string, unknown>): { style: ParameterStyle; explode: boolean } {
  const style = typeof p.style === "string" ? p.style : where === "query" ? "form" : "simple";
  const explode = typeof p.explode === "boolean" ? p.explode : style === "form" || style === "deepObject";
  const ok =
    where === "query" ? ["form", "spaceDelimited", "pipeDelimited", "deepObject"].includes(style) && !(style === "deepObject" && !explode) : style === "simple";
  if (!ok)
    throw new Unsupported(
      `the ${where} parameter ${String(p.name)} has style ${style}${style === "deepObject" ? " without explode" : ""}, which the desk does not write`,
    );
  if ((style === "spaceDelimited" || style === "pipeDelimited") && explode) return { style: "form", explode: true };
  return { style: style as ParameterStyle, explode };
}

/**
 * Argument names: each parameter by its own name; the JSON body as `body`. Where a name would be
 * used twice (the same name in two locations, or a parameter named `body` beside a body), every
 * parameter of that name is called `{in}.{name}` instead (`path.id`, `query.id`). A clash left
 * after that leaves the operation out.
 */
function withArgNames(declared: Declared[], hasBody: boolean): { param: RestParameter; source: Record<string, unknown> }[] {
  const count = new Map<string, number>();
  for (const d of declared) count.set(d.param.name, (count.get(d.param.name) ?? 0) + 1);
  if (hasBody) count.set("body", (count.get("body") ?? 0) + 1);
  const named = declared.map((d) => ({
    param: { ...d.param, arg: (count.get(d.param.name) ?? 0) > 1 ? `${d.param.in}.${d.param.name}` : d.param.name },
    source: d.source,
  }));
  const args = [...named.map((n) => n.param.arg), ...(hasBody ? ["body"] : [])];
  const twice = args.filter((a, i) => args.indexOf(a) !== i);
  if (twice.length > 0) throw new Unsupported(`argument names clash (${[...new Set(twice)].join(", ")})`);
  return named;
}

/**
 * The JSON request body: `application/json` when offered, else the first `+json` media type in
 * the document's order. A body with no JSON media type leaves the operation out when it is
 * required, and is left off the tool when it is optional.
 */
function requestBodyOf(doc: Record<string, unknown>, op: Record<string, unknown>): { stored: NonNullable<RestOperation["body"]>; schema: unknown } | undefined {
  if (op.requestBody === undefined) return undefined;
  const body = deref(doc, op.requestBody) as Record<string, unknown>;
  const content = (body.content ?? {}) as Record<string, Record<string, unknown>>;
  const types = Object.keys(content);
  const chosen = types.find((t) => t.split(";")[0]!.trim().toLowerCase() === "application/json") ?? types.find(isJsonMediaType);
  const required = body.required === true;
  if (chosen === undefined) {
    if (required) throw new Unsupported(`the request body is not JSON (${types.join(", ").slice(0, 120) || "no media type"})`);
    return undefined;
  }
  if (!MEDIA_TYPE.test(chosen)) throw new Unsupported("a request media type that is not a header value");
  return { stored: { arg: "body", mediaType: chosen, required }, schema: content[chosen]!.schema };
}

/**
 * The success answer: the lowest 2xx status the operation declares, else `2XX`. Its JSON media
 * type (if any) gives the Accept header and the output schema; else its first `text/*` type;
 * else `*\/*`.
 */
function successAnswer(doc: Record<string, unknown>, op: Record<string, unknown>): { accept: string; schema?: unknown } {
  const responses = (op.responses ?? {}) as Record<string, unknown>;
  const codes = Object.keys(responses)
    .filter((c) => /^2\d\d$/.test(c))
    .sort();
  const code = codes[0] ?? (Object.hasOwn(responses, "2XX") ? "2XX" : undefined);
  if (code === undefined) return { accept: "application/json" };
  const answer = deref(doc, responses[code]) as Record<string, unknown>;
  const content = (answer.content ?? {}) as Record<string, Record<string, unknown>>;
  const types = Object.keys(content);
  const json = types.find((t) => t.split(";")[0]!.trim().toLowerCase() === "application/json") ?? types.find(isJsonMediaType);
  if (json !== undefined) {
    const accept = json.split(";")[0]!.trim();
    return MEDIA_TYPE.test(accept) ? { accept, schema: content[json]!.schema } : { accept: "application/json" };
  }
  const text = types.find((t) => t.toLowerCase().startsWith("text/"));
  if (text !== undefined && MEDIA_TYPE.test(text)) return { accept: text.split(";")[0]!.trim() };
  return { accept: types.length === 0 ? "application/json" : "*/*" };
}

/**
 * The schema of `structuredContent`: the answer's own schema when it describes objects, wrapped
 * as `{"value": …}` when it describes anything else (the result wraps such answers the same way);
 * left out when the schema does not say which (the answer may be either).
 */
function outputSchemaOf(doc: Record<string, unknown>, version: OpenApiVersion, schema: unknown): Record<string, unknown> | undefined {
  const kind = rootKind(doc, schema);
  if (kind === "unknown") return undefined;
  try {
    const out = new SchemaConverter(doc, version, "response");
    let converted = out.convert(schema) as Record<string, unknown>;
    const defs = out.defs();
    // MCP wants an object schema at the root, not a reference to one: the referenced schema is
    // copied up (and stays in $defs for the references inside it).
    const only = Object.keys(converted);
    if (kind === "object" && only.length === 1 && typeof converted.$ref === "string" && defs) {
      converted = defs[converted.$ref.slice("#/$defs/".length)] as Record<string, unknown>;
    }
    const root =
      kind === "object"
        ? { type: "object", ...converted }
        : { type: "object", properties: { value: converted }, required: ["value"], additionalProperties: false };
    const full = { $schema: SCHEMA_2020_12, ...root, ...(defs ? { $defs: defs } : {}) };
    compileArgsSchema(full);
    return full;
  } catch {
    // An output schema is a courtesy to the agent: one the desk cannot carry is left out, the tool stays.
    return undefined;
  }
}

/** Every tool name must pass 8.7's rule as `{upstream}__{name}` and be unique: else the whole document is refused. */
function refuseBadNames(upstream: string, tools: RestTool[]): void {
  const problems: string[] = [];
  if (tools.length > MAX_TOOLS) problems.push(`${tools.length} operations, more than ${MAX_TOOLS}`);
  const seen = new Map<string, string>();
  for (const t of tools) {
    const full = `${upstream}__${t.name}`;
    const label = `${t.operation.method.toUpperCase()} ${t.operation.path}`;
    if (!TOOL_NAME.test(full)) problems.push(`the tool name ${JSON.stringify(full).slice(0, 160)} (${label}) is not 1-128 characters of A-Z a-z 0-9 _ . -`);
    const other = seen.get(full);
    if (other !== undefined) problems.push(`the tool name ${full} is used by both ${other} and ${label}`);
    else seen.set(full, label);
  }
  if (problems.length > 0) throw new DocumentRefused(problems);
}
