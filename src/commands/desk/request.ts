// Reading a request below the handler: the JSON body (application/json only, capped), path
// segments, and strict operator bodies for /admin and /admin/sandbox alike: a JSON object, no
// field outside the known ones (FIELD_UNKNOWN), required fields present (FIELD_MISSING), each
// value read by its rule (VALUE_INVALID when the rule refuses it). A typo never passes silently,
// and each of the three answers names its field. Every failure is an HttpFailure, which the
// handler answers as {"error":CODE} (with "field" for those three).
import { readAtMost } from "../../core/body.ts";
import type { ErrorCode, ErrorDetail } from "../../core/errors.ts";

/** Largest request body accepted (tool arguments and operator requests). */
export const MAX_BODY_BYTES = 1024 * 1024;

/** A failure to answer with `{"error":CODE}` (plus what it points at) from anywhere below the handler. */
export class HttpFailure extends Error {
  constructor(
    readonly code: ErrorCode,
    readonly detail?: ErrorDetail,
  ) {
    super(code);
  }
}

/** A path segment decoded; a malformed escape is thrown as NOT_FOUND (never a 500). */
export function pathSegment(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new HttpFailure("NOT_FOUND");
  }
}

/** Reads a JSON body: application/json only, at most MAX_BODY_BYTES, and a JSON value. */
export async function readJson(req: Request): Promise<unknown> {
  const type = req.headers.get("content-type") ?? "";
  if (!/^application\/json\s*(;|$)/i.test(type)) throw new HttpFailure("CONTENT_TYPE_INVALID");
  const length = req.headers.get("content-length");
  const declared = Number(length ?? "0");
  if (declared > MAX_BODY_BYTES) throw new HttpFailure("BODY_TOO_LARGE");
  // A declared length within the limit frames the body (no chunked coding): read it in one go,
  // which costs a fraction of iterating the stream. The size is still checked on what arrived.
  if (length !== null && req.headers.get("transfer-encoding") === null) {
    const bytes = await req.arrayBuffer();
    if (bytes.byteLength > MAX_BODY_BYTES) throw new HttpFailure("BODY_TOO_LARGE");
    return parseJson(Buffer.from(bytes).toString("utf8"));
  }
  // Counted as it streams: a body without a length cannot exhaust memory either.
  const bytes = await readAtMost(req.body, MAX_BODY_BYTES);
  if (bytes === undefined) throw new HttpFailure("BODY_TOO_LARGE");
  return parseJson(Buffer.from(bytes).toString("utf8"));
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new HttpFailure("BODY_INVALID");
  }
}

export type Body = Record<string, unknown>;

/** A rule reads a field's value, or gives undefined when it is not acceptable. */
export type Rule<T> = (v: unknown) => T | undefined;

export function fail(code: ErrorCode, detail?: ErrorDetail): never {
  throw new HttpFailure(code, detail);
}

/** The request's JSON body, which must be an object (BODY_INVALID otherwise). */
export async function objectBody(req: Request): Promise<Body> {
  const value = await readJson(req);
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("BODY_INVALID");
  return value as Body;
}

/** Refuses fields outside `known` (naming the first one); each known field is then read by its rule. */
export function onlyFields(b: Body, known: readonly string[]): void {
  for (const k of Object.keys(b)) if (!known.includes(k)) fail("FIELD_UNKNOWN", { field: k });
}

export function required<T>(b: Body, field: string, read: Rule<T>): T {
  if (!Object.hasOwn(b, field)) fail("FIELD_MISSING", { field });
  return fieldValue(b, field, read);
}

export function optional<T>(b: Body, field: string, read: Rule<T>): T | undefined {
  return Object.hasOwn(b, field) ? fieldValue(b, field, read) : undefined;
}

function fieldValue<T>(b: Body, field: string, read: Rule<T>): T {
  const v = read(b[field]);
  if (v === undefined) fail("VALUE_INVALID", { field });
  return v;
}

/** A whole number from `min` to `max`. */
export function intIn(min: number, max: number): Rule<number> {
  return (v) => (Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max ? (v as number) : undefined);
}

/** An RFC 3339 UTC time (`…Z`) as milliseconds; null stays null (no time). */
export const timestamp: Rule<number | null> = (v) => {
  if (v === null) return null;
  if (typeof v !== "string" || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?Z$/.test(v)) return undefined;
  const ms = Date.parse(v);
  return Number.isFinite(ms) ? ms : undefined;
};
