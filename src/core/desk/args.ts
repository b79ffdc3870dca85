// Tool arguments against the tool's input JSON Schema, as its upstream published it. Each schema
// is compiled once (at registration or start-up), never per call. Problems name the path and the
// rule only: echoing the offending value would hand an agent's secret back into logs and clients.
//
// The schema comes from an upstream and the arguments from an agent, and validation runs on the
// event loop: no keyword may cost more than linear time in the arguments. So patterns run on
// RE2 (schema-regex.ts), `uniqueItems` compares items by a canonical key in a set (Ajv's own
// compares every pair of non-scalar items: 20,000 objects take 1.6 s), and `format` is not
// checked at all (format validators are regular expressions of their own).
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";
import { linearRegExp, PatternRefused } from "./schema-regex.ts";

export type ArgsProblem = { path: string; rule: string };
export type ArgsCheck = (args: unknown) => ArgsProblem[];

/** Why a schema was refused: a pattern RE2 cannot run, or a schema no validator compiles. */
export class SchemaRefused extends Error {
  override name = "SchemaRefused";
  constructor(
    readonly reason: "pattern" | "schema",
    why: string,
  ) {
    super(why);
  }
}

const OPTIONS: Options = { strict: false, allErrors: true, validateFormats: false, code: { regExp: linearRegExp } };

/** The canonical text of a JSON value (object keys sorted): equal values, equal keys. */
const equalityKey = (value: unknown) =>
  JSON.stringify(value, (_k, v: unknown) =>
    typeof v === "object" && v !== null && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v,
  );

function withLinearUniqueItems<T extends Ajv>(ajv: T): T {
  ajv.removeKeyword("uniqueItems");
  ajv.addKeyword({
    keyword: "uniqueItems",
    type: "array",
    schemaType: "boolean",
    validate: (unique: boolean, items: unknown[]) => {
      if (!unique) return true;
      const seen = new Set<string>();
      for (const item of items) {
        const key = equalityKey(item);
        if (seen.has(key)) return false;
        seen.add(key);
      }
      return true;
    },
  });
  return ajv;
}

const draft07 = withLinearUniqueItems(new Ajv(OPTIONS));
const draft2020 = withLinearUniqueItems(new Ajv2020(OPTIONS));

/** Compiles a tool's input schema; throws SchemaRefused when it cannot be checked in linear time or does not compile. */
export function compileArgsSchema(schema: unknown): ArgsCheck {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new SchemaRefused("schema", "the input schema is not an object");
  const declared = (schema as { $schema?: unknown }).$schema;
  // A root $id would be registered in the shared validator: a second tool (or a refresh) with
  // the same $id would then fail to compile. Local "#/..." references work without it.
  const { $schema: _schema, $id: _id, ...rest } = schema as Record<string, unknown>;
  let validate: ValidateFunction;
  try {
    validate = typeof declared === "string" && declared.includes("2020-12") ? draft2020.compile(rest) : draft07.compile(rest);
  } catch (err) {
    if (err instanceof PatternRefused) throw new SchemaRefused("pattern", `a pattern: ${err.why}`);
    throw new SchemaRefused("schema", "neither a draft-07 nor a 2020-12 validator compiles it");
  }
  return (args) => (validate(args) ? [] : problemsOf(validate.errors ?? []));
}

function problemsOf(errors: ErrorObject[]): ArgsProblem[] {
  const seen = new Set<string>();
  const out: ArgsProblem[] = [];
  for (const e of errors) {
    const path =
      e.keyword === "required" && typeof e.params.missingProperty === "string"
        ? `${e.instancePath}/${escapePointer(e.params.missingProperty)}`
        : e.instancePath;
    const problem = { path: path === "" ? "/" : path, rule: e.keyword };
    const id = `${problem.path}\u0000${problem.rule}`;
    if (!seen.has(id)) {
      seen.add(id);
      out.push(problem);
    }
    if (out.length >= 20) break;
  }
  return out;
}

const escapePointer = (s: string) => s.replaceAll("~", "~0").replaceAll("/", "~1");
