// OpenAPI Schema Objects as JSON Schema 2020-12, the dialect of every REST tool's input and
// output schema. OpenAPI 3.1 schemas already are 2020-12 (plus annotations); 3.0 schemas are
// their own dialect, mapped here: `nullable`, boolean `exclusiveMinimum`/`exclusiveMaximum`,
// `$ref` siblings ignored, `example`. References stay references: each schema an operation
// reaches through a local `$ref` is copied once into the tool schema's `$defs`, so recursive
// schemas stay finite and shared ones are written once.

export type Usage = "request" | "response";
export type OpenApiVersion = "3.0" | "3.1";

/** A schema this converter cannot carry faithfully; the operation is left out with this reason. */
export class UnsupportedSchema extends Error {
  override name = "UnsupportedSchema";
}

/** Keywords whose value is one schema. */
const ONE_SCHEMA = [
  "items",
  "additionalProperties",
  "not",
  "if",
  "then",
  "else",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contentSchema",
];
/** Keywords whose value maps names to schemas. */
const SCHEMA_MAP = ["properties", "patternProperties", "dependentSchemas"];
/** Keywords whose value is a list of schemas. */
const SCHEMA_LIST = ["allOf", "anyOf", "oneOf", "prefixItems"];
/** Keywords copied as they are (assertions and annotations of JSON Schema 2020-12). */
const PLAIN = new Set([
  "type",
  "enum",
  "const",
  "multipleOf",
  "maximum",
  "minimum",
  "exclusiveMaximum",
  "exclusiveMinimum",
  "maxLength",
  "minLength",
  "pattern",
  "maxItems",
  "minItems",
  "uniqueItems",
  "maxContains",
  "minContains",
  "maxProperties",
  "minProperties",
  "required",
  "dependentRequired",
  "format",
  "title",
  "description",
  "default",
  "deprecated",
  "readOnly",
  "writeOnly",
  "examples",
  "contentEncoding",
  "contentMediaType",
  "$comment",
]);
/**
 * Keywords that change how references resolve or name a schema resource: a nested `$id` would
 * turn the document's `#/...` references inside it into references to somewhere else, and would
 * be registered in the desk's shared validator. Refused rather than guessed.
 */
const RESOLUTION = new Set(["$id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$vocabulary"]);
/** Dialects a 3.1 document may name: JSON Schema 2020-12 and OpenAPI's own base dialect of it. */
export const DIALECTS = new Set([
  "https://json-schema.org/draft/2020-12/schema",
  "https://json-schema.org/draft/2020-12/schema#",
  "https://spec.openapis.org/oas/3.1/dialect/base",
]);

export const SCHEMA_2020_12 = "https://json-schema.org/draft/2020-12/schema";

/** Nesting past this is refused: no schema a person wrote is this deep, and recursion stays bounded. */
const MAX_DEPTH = 100;
const DEF_NAME = /^[A-Za-z0-9._-]{1,128}$/;

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };
type JsonObject = { [k: string]: Json };

/** Reads a local JSON Pointer reference (`#/a/b~1c`) in `doc`; throws UnsupportedSchema when it does not resolve. */
export function resolveRef(doc: unknown, ref: string): unknown {
  if (!ref.startsWith("#/")) throw new UnsupportedSchema(`a $ref outside the document (${ref.slice(0, 80)})`);
  let tokens: string[];
  try {
    tokens = decodeURIComponent(ref.slice(2))
      .split("/")
      .map((t) => t.replaceAll("~1", "/").replaceAll("~0", "~"));
  } catch {
    throw new UnsupportedSchema(`a $ref that is not a JSON Pointer (${ref.slice(0, 80)})`);
  }
  let at: unknown = doc;
  for (const t of tokens) {
    if (typeof at !== "object" || at === null || !Object.hasOwn(at, t)) throw new UnsupportedSchema(`a $ref to nothing (${ref.slice(0, 80)})`);
    at = (at as Record<string, unknown>)[t];
  }
  return at;
}

/** Follows `$ref` chains from `node` to the object they end on (bounded). */
export function deref(doc: unknown, node: unknown): unknown {
  let at = node;
  for (let hops = 0; hops < 32; hops++) {
    if (typeof at !== "object" || at === null || typeof (at as { $ref?: unknown }).$ref !== "string") return at;
    at = resolveRef(doc, (at as { $ref: string }).$ref);
  }
  throw new UnsupportedSchema("a chain of more than 32 $refs");
}

/** Converts the schemas of one tool's input or output; `defs()` holds what their references reach. */
export class SchemaConverter {
  private readonly keys = new Map<string, string>();
  private readonly defsOut: Record<string, Json> = {};

  constructor(
    private readonly doc: unknown,
    private readonly version: OpenApiVersion,
    private readonly usage: Usage,
  ) {}

  /** The 2020-12 form of `schema` (an OpenAPI Schema Object, or a boolean in 3.1). */
  convert(schema: unknown, depth = 0): Json {
    if (depth > MAX_DEPTH) throw new UnsupportedSchema(`a schema nested more than ${MAX_DEPTH} levels`);
    if (typeof schema === "boolean" && this.version === "3.1") return schema;
    if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new UnsupportedSchema("a schema that is not an object");
    const src = schema as Record<string, unknown>;
    if (typeof src.$ref === "string") {
      const ref = { $ref: `#/$defs/${this.defFor(src.$ref, depth)}` };
      // 3.0: a $ref replaces its object, siblings are ignored. 3.1: siblings apply beside it.
      if (this.version === "3.0") return ref;
      const { $ref: _ref, ...rest } = src;
      return Object.keys(rest).length === 0 ? ref : { ...this.convertObject(rest, depth), ...ref };
    }
    return this.convertObject(src, depth);
  }

  /** `$defs` for the tool schema's root, or undefined when no reference was met. */
  defs(): Record<string, Json> | undefined {
    return Object.keys(this.defsOut).length === 0 ? undefined : this.defsOut;
  }

  private convertObject(src: Record<string, unknown>, depth: number): JsonObject {
    const out: JsonObject = {};
    for (const [k, v] of Object.entries(src)) {
      if (RESOLUTION.has(k)) throw new UnsupportedSchema(`a schema with ${k}`);
      if (k === "$schema") {
        if (typeof v !== "string" || !DIALECTS.has(v)) throw new UnsupportedSchema("a schema in another JSON Schema dialect");
        continue;
      }
      if (PLAIN.has(k)) out[k] = v as Json;
      else if (ONE_SCHEMA.includes(k)) {
        if (k === "items" && Array.isArray(v)) throw new UnsupportedSchema("items as a list of schemas");
        out[k] = typeof v === "boolean" ? v : this.convert(v, depth + 1);
      } else if (SCHEMA_MAP.includes(k)) {
        if (typeof v !== "object" || v === null || Array.isArray(v)) throw new UnsupportedSchema(`${k} that is not an object`);
        out[k] = Object.fromEntries(Object.entries(v).map(([name, s]) => [name, this.convert(s, depth + 1)]));
      } else if (SCHEMA_LIST.includes(k)) {
        if (!Array.isArray(v)) throw new UnsupportedSchema(`${k} that is not a list`);
        out[k] = v.map((s) => this.convert(s, depth + 1));
      }
      // Everything else is an annotation for other tools (discriminator, xml, externalDocs,
      // x-* extensions) or handled below; nested $defs are reached through references.
    }
    if (src.example !== undefined && src.examples === undefined) out.examples = [src.example as Json];
    if (this.version === "3.0") this.from30(src, out);
    this.dropUnsendable(src, out);
    return out;
  }

  /** OpenAPI 3.0's own keywords in their 2020-12 form. */
  private from30(src: Record<string, unknown>, out: JsonObject): void {
    for (const [flag, bound] of [
      ["exclusiveMaximum", "maximum"],
      ["exclusiveMinimum", "minimum"],
    ] as const) {
      if (typeof src[flag] !== "boolean") continue;
      delete out[flag];
      if (src[flag] === true && typeof src[bound] === "number") {
        out[flag] = src[bound] as number;
        delete out[bound];
      }
    }
    if (src.nullable !== true) return;
    if (typeof out.type === "string") {
      out.type = [out.type, "null"];
      if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null];
      return;
    }
    // No single type to widen (a composition, say): null is allowed beside the whole schema.
    const inner = { ...out };
    for (const k of Object.keys(out)) delete out[k];
    out.anyOf = [inner, { type: "null" }];
  }

  /**
   * A request never needs to send a `readOnly` property, nor an answer a `writeOnly` one
   * (OpenAPI: "SHOULD NOT be sent"): such properties stay allowed but are no longer required.
   */
  private dropUnsendable(src: Record<string, unknown>, out: JsonObject): void {
    const target = out.anyOf !== undefined && out.required === undefined ? (out.anyOf as JsonObject[])[0]! : out;
    if (!Array.isArray(target.required) || typeof src.properties !== "object" || src.properties === null) return;
    const marker = this.usage === "request" ? "readOnly" : "writeOnly";
    const props = src.properties as Record<string, unknown>;
    const kept = (target.required as Json[]).filter((name) => {
      if (typeof name !== "string" || !Object.hasOwn(props, name)) return true;
      const s = deref(this.doc, props[name]);
      return !(typeof s === "object" && s !== null && (s as Record<string, unknown>)[marker] === true);
    });
    if (kept.length === 0) delete target.required;
    else target.required = kept;
  }

  /** The `$defs` name of the schema `ref` points to, converting it the first time it is met. */
  private defFor(ref: string, depth: number): string {
    const known = this.keys.get(ref);
    if (known !== undefined) return known;
    const target = resolveRef(this.doc, ref);
    const key = this.freshKey(ref);
    this.keys.set(ref, key);
    // The key is taken before converting, so a schema that refers to itself ends here.
    this.defsOut[key] = {};
    this.defsOut[key] = this.convert(target, depth + 1);
    return key;
  }

  /** `Pet` for `#/components/schemas/Pet`; other pointers flattened to safe characters; unique. */
  private freshKey(ref: string): string {
    const component = /^#\/components\/schemas\/([A-Za-z0-9._-]+)$/.exec(ref);
    const base = component
      ? component[1]!
      : ref
          .slice(2)
          .replace(/[^A-Za-z0-9._-]+/g, "_")
          .slice(0, 100) || "ref";
    const taken = new Set(this.keys.values());
    let key = DEF_NAME.test(base) ? base : "ref";
    for (let n = 2; taken.has(key); n++) key = `${base}_${n}`;
    return key;
  }
}

/** What `schema` describes at its root after references: objects, something else, or unknown. */
export function rootKind(doc: unknown, schema: unknown): "object" | "other" | "unknown" {
  let s: unknown;
  try {
    s = deref(doc, schema);
  } catch {
    return "unknown";
  }
  if (typeof s !== "object" || s === null) return "unknown";
  const o = s as Record<string, unknown>;
  if (o.nullable === true) return "unknown";
  if (o.type === "object") return "object";
  if (typeof o.type === "string") return "other";
  if (o.type === undefined && typeof o.properties === "object" && o.allOf === undefined && o.anyOf === undefined && o.oneOf === undefined) return "object";
  return "unknown";
}
