// The receipt checks both verifiers share (verify.ts over node:crypto for the CLI and the desk,
// verify-web.ts over WebCrypto for the console): where the receipt sits in a saved response, how
// a payload reads as a receipt, and every verdict but the Ed25519 and SHA-256 calls themselves.
// No runtime imports beyond pure modules, so the console bundles the very same rules.
import { CanonicalJsonError, canonicalJson } from "./canonical.ts";
import { printable } from "./printable.ts";
import { resultForHashing } from "./result-rule.ts";
import { readShape, type Shape } from "./shapes.ts";
import { isCanonicalReceipt, type Receipt, receiptFields, receiptProblem } from "./types.ts";

export { printable } from "./printable.ts";
export { readShape, type Shape, SHAPES_READ } from "./shapes.ts";

export type CheckName = "shape" | "envelope" | "signature" | "readable_copy" | "result" | "params" | "approver_signature" | "approval" | "chain";

/**
 * One verification step. A `skipped` check is one the input does not call for (no arguments
 * given; no result in a bare envelope) and carries ok: true, so `checks.every((c) => c.ok)` is
 * the verdict; it is made only by notCalledFor. A check the input calls for but that cannot run
 * is a failure (see unreadable).
 */
export type Check = { name: CheckName; ok: boolean; detail?: string; skipped?: boolean };

const notCalledFor = (name: CheckName, detail: string): Check => ({ name, ok: true, skipped: true, detail });

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * The JWK rules of a verifier's key set, but the kid's thumbprint (hashed by each side): null
 * when `k` is a public Ed25519 JWK whose `x` decodes to 32 bytes, else what is wrong with it.
 */
export function jwkProblem(k: unknown, decode: (x: string) => Uint8Array | null): string | null {
  if (!isRecord(k)) return "is not an object";
  // A verifier's key set must never hold a private key: it is handed around freely.
  if (Object.hasOwn(k, "d")) return 'holds private key material ("d")';
  if (k.kty !== "OKP" || k.crv !== "Ed25519") return "is not an Ed25519 (OKP) key";
  if (k.use !== undefined && k.use !== "sig") return 'has use other than "sig"';
  if (k.alg !== undefined && k.alg !== "EdDSA") return 'has alg other than "EdDSA"';
  if (typeof k.x !== "string" || decode(k.x)?.length !== 32) return 'has no valid "x"';
  return null;
}

/** The shape of a saved response (shapes.ts), or the failed `shape` check that refuses it. */
export function shapeOf(body: unknown): { shape: Shape } | { failed: Check } {
  const read = readShape(body);
  return "shape" in read ? read : { failed: { name: "shape", ok: false, detail: read.refused } };
}

/** An envelope's three strings, or the `envelope` check that fails it. */
export function envelopeParts(envelope: unknown): { payload: string; signature: string; kid: string; receipt: unknown } | { failed: Check } {
  if (!isRecord(envelope)) return { failed: { name: "envelope", ok: false, detail: "not a receipt envelope (expected an object)" } };
  const { payload, signature, kid, receipt } = envelope;
  if (typeof payload !== "string" || typeof signature !== "string" || typeof kid !== "string") {
    return { failed: { name: "envelope", ok: false, detail: "not a receipt envelope (payload, signature and kid must be strings)" } };
  }
  return { payload, signature, kid, receipt };
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** The signed receipt when the payload bytes are the canonical JSON of a v1 receipt, else why not. */
export function readSigned(bytes: Uint8Array): { signed: Receipt } | { problem: string } {
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(bytes);
  } catch {
    return { problem: "the signed payload is not UTF-8" };
  }
  try {
    parsed = JSON.parse(text);
  } catch {
    return { problem: "the signed payload is not JSON" };
  }
  const shape = receiptProblem(parsed);
  if (shape !== null) return { problem: `the signed payload is not a receipt (${printable(shape)})` };
  // One byte form per receipt: blocks duplicate keys or re-spelled numbers that two JSON
  // readers could take differently while the signature still holds.
  if (!isCanonicalReceipt(parsed as Receipt, text)) return { problem: "the signed payload is not canonical JSON" };
  return { signed: parsed as Receipt };
}

/** The signature verdict, from the key lookup, the Ed25519 result and the payload as read. */
export function signatureCheck(kid: string, keyKnown: boolean, valid: boolean, read: { signed: Receipt } | { problem: string }): Check {
  if (!keyKnown) return { name: "signature", ok: false, detail: `unknown kid ${printable(kid)} (not in the key set)` };
  if (!valid) return { name: "signature", ok: false, detail: `does not verify under kid ${printable(kid)}` };
  if ("problem" in read) return { name: "signature", ok: false, detail: read.problem };
  if (read.signed.kid !== kid) return { name: "signature", ok: false, detail: "the signed kid differs from the envelope kid" };
  return { name: "signature", ok: true, detail: `kid ${printable(kid)}` };
}

/** Canonical equality: a string, number or null by ===, an object (a v2 approval, a decision's spend) by its RFC 8785 form. */
export function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return a !== undefined;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  try {
    return canonicalJson(a) === canonicalJson(b);
  } catch {
    return false;
  }
}

/** A readable copy against the signed record it stands for, field by field; the failure names every field that differs. */
export function readableCopyCheck(readable: unknown, signed: Record<string, unknown>, fields: readonly string[]): Check {
  if (!isRecord(readable)) return { name: "readable_copy", ok: false, detail: "the envelope has no readable copy" };
  const keys = Object.keys(readable);
  if (keys.length === fields.length && fields.every((f) => Object.hasOwn(readable, f) && sameValue(readable[f], signed[f]))) {
    return { name: "readable_copy", ok: true };
  }
  const differ: string[] = [];
  for (const name of new Set<string>([...fields, ...keys])) {
    const mine = Object.hasOwn(readable, name) ? readable[name] : undefined;
    const theirs = Object.hasOwn(signed, name) ? signed[name] : undefined;
    if (!sameValue(mine, theirs)) differ.push(printable(name));
  }
  return { name: "readable_copy", ok: false, detail: `differs from signed payload at ${differ.join(", ")}` };
}

export function readableCheck(readable: unknown, signed: Receipt): Check {
  return readableCopyCheck(readable, signed as Record<string, unknown>, receiptFields(signed.v));
}

/** A hash still to compute: the canonical text of a value, and what its SHA-256 must be. */
export type ToHash = { name: "result" | "params"; text: string; expected: string };

function toHash(name: "result" | "params", value: unknown, expected: string): Check | ToHash {
  try {
    return { name, text: canonicalJson(value), expected };
  } catch (err) {
    if (!(err instanceof CanonicalJsonError)) throw err;
    const what = name === "result" ? "the result has" : "the arguments have";
    // The pointer, not the raw path: it never echoes a key that is itself the problem.
    return { name, ok: false, detail: `${what} no canonical JSON form (${err.problem} at ${printable(err.pointer === "" ? "/" : err.pointer)})` };
  }
}

/** The verdict once the hash of a ToHash is known. */
export function hashCheck(step: ToHash, hash: string): Check {
  const field = `${step.name}_sha256`;
  return hash === step.expected ? { name: step.name, ok: true, detail: `matches ${field}` } : { name: step.name, ok: false, detail: `${field} differs` };
}

/** The result check, or the hash it still needs (compared with the SIGNED result_sha256). */
export function resultCheck(shape: Shape, signed: Receipt): Check | ToHash {
  const expected = signed.result_sha256;
  if (shape.kind === "envelope") {
    return expected === null
      ? { name: "result", ok: true, detail: `none bound: ${signed.outcome}` }
      : notCalledFor("result", "a bare envelope carries no result: the answer is not checked");
  }
  if (shape.kind === "refusal") {
    return expected === null
      ? { name: "result", ok: true, detail: `none returned, none paid for: ${signed.outcome}` }
      : { name: "result", ok: false, detail: "result_sha256 is set but the response holds no result" };
  }
  if (expected === null) {
    // An MCP refusal is itself a tool result (isError: true); a REST body with a result, or an
    // MCP answer that is not an error, under a receipt that binds no result is not a paid answer.
    if (shape.kind !== "rest" && shape.result.isError === true) {
      return { name: "result", ok: true, detail: `an error result, none paid for: ${signed.outcome}` };
    }
    return { name: "result", ok: false, detail: "the response holds a result but result_sha256 is null" };
  }
  return toHash("result", resultForHashing(shape.result), expected);
}

/** The params check (skipped when no arguments are given), or the hash it still needs. */
export function paramsCheck(args: unknown, signed: Receipt): Check | ToHash {
  if (args === undefined) return notCalledFor("params", "no arguments given");
  return toHash("params", args, signed.params_sha256);
}

/** The checks that cannot run when the signed payload does not read as a receipt. */
export const unreadable = (name: CheckName): Check => ({ name, ok: false, detail: "not checked: the signed payload is unreadable" });
