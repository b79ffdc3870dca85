// An operator's OpenAPI document, checked before any tool is made of it: OpenAPI 3.0 or 3.1 in
// JSON, valid by the specification's own schemas (through @readme/openapi-parser), and holding no
// reference outside itself. A `$ref` to a URL or a file would have the desk fetch what the
// document names (a request to an internal address, a read of a local file) on the operator's
// behalf, so every reference must be a local JSON Pointer (`#/...`), and the parser is run with
// every resolver off as a second wall.
import { type ParserOptions, validate } from "@readme/openapi-parser";
import { DocumentRefused } from "./refused.ts";
import { DIALECTS, type OpenApiVersion } from "./schema.ts";

export { DocumentRefused };

/**
 * How the library is run: no external resolution at all (no http, no file), so whatever a
 * reference names is never fetched or read; a bound on dereferencing time.
 */
export const PARSER_OPTIONS: ParserOptions = {
  resolve: { external: false, file: false },
  timeoutMs: 10_000,
};

const MAX_PROBLEMS = 50;

export type CheckedDocument = { doc: Record<string, unknown>; version: OpenApiVersion };

/** Checks a parsed JSON document; throws DocumentRefused with every reason. The input is not changed. */
export async function checkDocument(document: unknown): Promise<CheckedDocument> {
  if (typeof document !== "object" || document === null || Array.isArray(document)) throw new DocumentRefused(["the document is not a JSON object"]);
  const doc = document as Record<string, unknown>;
  const declared = typeof doc.openapi === "string" ? /^3\.([01])\.\d+$/.exec(doc.openapi) : null;
  if (declared === null) throw new DocumentRefused(["only OpenAPI 3.0 and 3.1 documents are supported (the openapi field)"]);
  const version: OpenApiVersion = declared[1] === "0" ? "3.0" : "3.1";

  const outside = refsOutside(doc);
  if (outside.length > 0) throw new DocumentRefused(outside.map((at) => `a $ref outside the document at ${at}: only local references (#/...) are allowed`));
  if (version === "3.1" && doc.jsonSchemaDialect !== undefined && !(typeof doc.jsonSchemaDialect === "string" && DIALECTS.has(doc.jsonSchemaDialect))) {
    throw new DocumentRefused(["jsonSchemaDialect names a dialect other than JSON Schema 2020-12"]);
  }

  let result: Awaited<ReturnType<typeof validate>>;
  try {
    // The library dereferences the object it is given in place: it gets a copy.
    result = await validate(structuredClone(doc) as never, PARSER_OPTIONS);
  } catch (err) {
    throw new DocumentRefused([`the document could not be validated: ${firstLine(err)}`]);
  }
  if (!result.valid) throw new DocumentRefused(result.errors.slice(0, MAX_PROBLEMS).map((e) => firstLine(e.message)));
  return { doc, version };
}

/**
 * JSON Pointers of every string `$ref` that is not a local JSON Pointer, found without recursion
 * (a deeply nested document cannot overflow the stack).
 */
export function refsOutside(doc: unknown): string[] {
  const found: string[] = [];
  const stack: { node: unknown; at: string }[] = [{ node: doc, at: "" }];
  while (stack.length > 0 && found.length < MAX_PROBLEMS) {
    const { node, at } = stack.pop()!;
    if (typeof node !== "object" || node === null) continue;
    for (const [k, v] of Object.entries(node)) {
      const here = `${at}/${k.replaceAll("~", "~0").replaceAll("/", "~1")}`;
      if (k === "$ref" && typeof v === "string" && !v.startsWith("#/")) found.push(here);
      else stack.push({ node: v, at: here });
    }
  }
  return found.sort();
}

function firstLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  return (
    text
      .split("\n")
      .find((l) => l.trim() !== "")
      ?.trim()
      .slice(0, 300) ?? "invalid"
  );
}
