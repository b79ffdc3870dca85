// Strict operator bodies, for /admin and /admin/sandbox alike: a JSON object, no field outside
// the known ones (FIELD_UNKNOWN), required fields present (FIELD_MISSING), each value read by
// its rule (VALUE_INVALID when the rule refuses it). A typo in a field never passes silently.
import type { ErrorCode } from "../../core/errors.ts";
import { HttpFailure, readJson } from "./http.ts";

export type Body = Record<string, unknown>;

/** A rule reads a field's value, or gives undefined when it is not acceptable. */
export type Rule<T> = (v: unknown) => T | undefined;

export function fail(code: ErrorCode): never {
  throw new HttpFailure(code);
}

/** The request's JSON body, which must be an object (BODY_INVALID otherwise). */
export async function objectBody(req: Request): Promise<Body> {
  const value = await readJson(req);
  if (typeof value !== "object" || value === null || Array.isArray(value)) fail("BODY_INVALID");
  return value as Body;
}

/** Refuses fields outside `known`; each known field is then read by its rule. */
export function onlyFields(b: Body, known: readonly string[]): void {
  for (const k of Object.keys(b)) if (!known.includes(k)) fail("FIELD_UNKNOWN");
}

export function required<T>(b: Body, field: string, read: Rule<T>): T {
  if (!Object.hasOwn(b, field)) fail("FIELD_MISSING");
  return fieldValue(b, field, read);
}

export function optional<T>(b: Body, field: string, read: Rule<T>): T | undefined {
  return Object.hasOwn(b, field) ? fieldValue(b, field, read) : undefined;
}

function fieldValue<T>(b: Body, field: string, read: Rule<T>): T {
  const v = read(b[field]);
  if (v === undefined) fail("VALUE_INVALID");
  return v;
}

/** A whole number from `min` to `max`. (A declaration: admin.ts calls it at load, inside an import cycle with http.ts.) */
export function intIn(min: number, max: number): Rule<number> {
  return (v) => (Number.isSafeInteger(v) && (v as number) >= min && (v as number) <= max ? (v as number) : undefined);
}
