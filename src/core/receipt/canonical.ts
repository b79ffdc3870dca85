// RFC 8785 (JCS) canonical JSON: the one byte form that receipts are signed in and that
// params_sha256 / result_sha256 are taken over, so key order and number spelling never change a
// hash. Pure: no runtime imports, so the operator console can bundle it too.

export type CanonicalJsonProblem =
  | "LONE_SURROGATE" // not valid Unicode: two readers could decode it differently
  | "NUMBER_NOT_FINITE" // NaN and Infinity have no JSON form
  | "UNSUPPORTED_TYPE" // undefined, function, symbol, bigint, Date, Map, class instances...
  | "TOO_DEEP"; // deeper than MAX_DEPTH, or a cycle

/**
 * A value that has no RFC 8785 form; `path` names where (e.g. `$.result.content[0].text`), and
 * `pointer` names the same place as an RFC 6901 JSON Pointer ("" for the root) except that a key
 * that is itself the problem is left out: the pointer stops at its object, so it never echoes it.
 */
export class CanonicalJsonError extends Error {
  constructor(
    readonly problem: CanonicalJsonProblem,
    readonly path: string,
    readonly pointer = "",
  ) {
    super(`${problem} at ${path}`);
    this.name = "CanonicalJsonError";
  }
}

/** Nesting deeper than this is refused (it also stops cycles before the stack does). */
export const MAX_DEPTH = 200;

/** Serialises `value` as RFC 8785 canonical JSON; throws CanonicalJsonError on what JCS refuses. */
export function canonicalJson(value: unknown): string {
  return write(value, 0);
}

function fail(problem: CanonicalJsonProblem, segment = ""): never {
  throw new CanonicalJsonError(problem, `$${segment}`);
}

// Re-throws an inner failure with this level's key in front of its path (and of its pointer,
// unless `token` is null: the key itself failed).
function within(err: unknown, segment: string, token: string | null): never {
  if (!(err instanceof CanonicalJsonError)) throw err;
  const pointer = token === null ? err.pointer : `/${token.replaceAll("~", "~0").replaceAll("/", "~1")}${err.pointer}`;
  throw new CanonicalJsonError(err.problem, `$${segment}${err.path.slice(1)}`, pointer);
}

function quote(text: string): string {
  if (!text.isWellFormed()) fail("LONE_SURROGATE");
  // JSON.stringify escapes exactly as JCS section 3.2.2.2 asks: \b \t \n \f \r \" \\ and
  // \u00xx (lowercase) for the other controls; everything else is written as is.
  return JSON.stringify(text);
}

function write(value: unknown, depth: number): string {
  switch (typeof value) {
    case "string":
      return quote(value);
    case "number":
      if (!Number.isFinite(value)) fail("NUMBER_NOT_FINITE");
      // ES Number::toString is the number form JCS specifies (and -0 becomes 0).
      return JSON.stringify(value);
    case "boolean":
      return value ? "true" : "false";
    case "object":
      break;
    default:
      fail("UNSUPPORTED_TYPE");
  }
  if (value === null) return "null";
  if (depth >= MAX_DEPTH) fail("TOO_DEEP");
  if (Array.isArray(value)) {
    let out = "[";
    for (let i = 0; i < value.length; i++) {
      if (i > 0) out += ",";
      try {
        out += write(value[i], depth + 1);
      } catch (err) {
        within(err, `[${i}]`, String(i));
      }
    }
    return `${out}]`;
  }
  const proto = Object.getPrototypeOf(value);
  // Only plain objects: a Date or Map would serialise through toJSON or lose its contents.
  if (proto !== Object.prototype && proto !== null) fail("UNSUPPORTED_TYPE");
  const record = value as Record<string, unknown>;
  // Default sort compares UTF-16 code units, which is the order JCS section 3.2.3 requires.
  const keys = Object.keys(record).sort();
  let out = "{";
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]!;
    if (i > 0) out += ",";
    try {
      out += `${quote(key)}:${write(record[key], depth + 1)}`;
    } catch (err) {
      within(err, `.${key}`, key.isWellFormed() ? key : null);
    }
  }
  return `${out}}`;
}
