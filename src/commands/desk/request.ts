// The operator's request bodies, for /admin and /admin/sandbox alike: a JSON object, no field
// outside the known ones (FIELD_UNKNOWN), required fields present (FIELD_MISSING), each value read
// by its rule (VALUE_INVALID when the rule refuses it). A typo never passes silently, and each of
// the three answers names its field. Every failure is a WireError, which the handler answers as
// {"error":CODE} (with "field" for those three).
import { type ErrorCode, type ErrorDetail, WireError } from "../../core/errors.ts";
import { sortedThresholds, thresholdsProblem } from "../../core/finance/alerts.ts";
import { readJsonBody } from "../../core/http/body.ts";

/** Largest request body accepted (tool arguments and operator requests). */
export const MAX_BODY_BYTES = 1024 * 1024;

/** A request's JSON body under the desk's limit (core/http/body.ts has the rules). */
export function readJson(req: Request): Promise<unknown> {
  return readJsonBody(req, MAX_BODY_BYTES);
}

export type Body = Record<string, unknown>;

/** A rule reads a field's value, or gives undefined when it is not acceptable. */
export type Rule<T> = (v: unknown) => T | undefined;

export function fail(code: ErrorCode, detail?: ErrorDetail): never {
  throw new WireError(code, detail);
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

/** Alert thresholds: 0-10 distinct integer percentages 1-100, kept in ascending order. */
export const thresholdList: Rule<number[]> = (v) => (thresholdsProblem(v) === null ? sortedThresholds(v as number[]) : undefined);

/** An RFC 3339 UTC time (`…Z`) as milliseconds; null stays null (no time). */
export const timestamp: Rule<number | null> = (v) => {
  if (v === null) return null;
  if (typeof v !== "string" || !/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?Z$/.test(v)) return undefined;
  const ms = Date.parse(v);
  return Number.isFinite(ms) ? ms : undefined;
};
