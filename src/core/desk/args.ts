// Tool arguments against the tool's input JSON Schema, as its upstream published it. Each schema
// is compiled once (at registration or start-up), never per call. Problems name the path and the
// rule only: echoing the offending value would hand an agent's secret back into logs and clients.
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import { Ajv2020 } from "ajv/dist/2020.js";

export type ArgsProblem = { path: string; rule: string };
export type ArgsCheck = (args: unknown) => ArgsProblem[];

const draft07 = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const draft2020 = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });

/** Compiles a tool's input schema; throws when neither draft-07 nor 2020-12 can compile it. */
export function compileArgsSchema(schema: unknown): ArgsCheck {
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) throw new Error("the input schema is not an object");
  const declared = (schema as { $schema?: unknown }).$schema;
  // A root $id would be registered in the shared validator: a second tool (or a refresh) with
  // the same $id would then fail to compile. Local "#/..." references work without it.
  const { $schema: _schema, $id: _id, ...rest } = schema as Record<string, unknown>;
  const validate: ValidateFunction =
    typeof declared === "string" && declared.includes("2020-12") ? draft2020.compile(rest) : draft07.compile(rest);
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
