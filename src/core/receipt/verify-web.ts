// The receipt checks of verify.ts over WebCrypto only, for the operator console in a browser
// (verify.ts needs node:crypto, which a browser does not have). Same canonical JSON, same
// receipt reader, same result rule; only the Ed25519 and SHA-256 calls differ. A unit test holds
// its verdicts equal to verifyResponse on the receipt vectors.
import { CanonicalJsonError, canonicalJson } from "./canonical.ts";
import { MCP_RECEIPT_META_KEY, resultForHashing } from "./result-rule.ts";
import { canonicalReceipt, RECEIPT_FIELDS, type Receipt, receiptProblem } from "./types.ts";
import type { Check } from "./verify.ts";

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** The bytes of `text`, or null unless it is the one canonical unpadded base64url spelling. */
export function decodeBase64urlWeb(text: string): Uint8Array<ArrayBuffer> | null {
  if (text.length % 4 === 1 || !BASE64URL.test(text)) return null;
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  // Re-encoding must give the same text: non-zero spare bits would be a second spelling.
  return encodeBase64urlWeb(bytes) === text ? bytes : null;
}

export function encodeBase64urlWeb(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const utf8 = new TextEncoder();
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/** Escapes anything outside printable ASCII and cuts long values (text from the file shown back). */
function printable(text: string): string {
  const cut = text.length > 80 ? `${text.slice(0, 80)}...` : text;
  return cut.replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`);
}

/** A JWKS read into kid -> Ed25519 public CryptoKey; the same rules as ReceiptKeys.fromJwks. */
export async function importJwksWeb(jwks: unknown): Promise<Map<string, CryptoKey>> {
  const keys = isRecord(jwks) ? jwks.keys : undefined;
  if (!Array.isArray(keys)) throw new Error('not a JWKS: expected {"keys": [...]}');
  const byKid = new Map<string, CryptoKey>();
  for (const [i, k] of keys.entries()) {
    const where = `keys[${i}]`;
    if (!isRecord(k)) throw new Error(`${where} is not an object`);
    // A verifier's key set must never hold a private key: it is handed around freely.
    if (Object.hasOwn(k, "d")) throw new Error(`${where} holds private key material ("d")`);
    if (k.kty !== "OKP" || k.crv !== "Ed25519") throw new Error(`${where} is not an Ed25519 (OKP) key`);
    if (k.use !== undefined && k.use !== "sig") throw new Error(`${where} has use other than "sig"`);
    if (k.alg !== undefined && k.alg !== "EdDSA") throw new Error(`${where} has alg other than "EdDSA"`);
    if (typeof k.x !== "string" || decodeBase64urlWeb(k.x)?.length !== 32) throw new Error(`${where} has no valid "x"`);
    // kid is the key's own RFC 7638 thumbprint, so a kid cannot be pinned to a different key.
    const thumb = encodeBase64urlWeb(await sha256(utf8.encode(canonicalJson({ crv: "Ed25519", kty: "OKP", x: k.x }))));
    if (k.kid !== thumb) throw new Error(`${where} has a kid that is not its RFC 7638 thumbprint`);
    if (byKid.has(thumb)) throw new Error(`${where} repeats kid ${thumb}`);
    byKid.set(thumb, await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x: k.x }, { name: "Ed25519" }, false, ["verify"]));
  }
  return byKid;
}

type Located = { kind: "envelope" | "rest" | "refusal" | "mcp"; envelope: unknown; result?: unknown };

// The same shapes verifyResponse accepts: REST body, refusal, MCP result (or its JSON-RPC
// response), bare envelope.
function locate(body: unknown): Located | null {
  if (!isRecord(body)) return null;
  if (body.jsonrpc === "2.0" && isRecord(body.result) && isRecord(body.result._meta)) return locate(body.result);
  if (typeof body.payload === "string" && typeof body.signature === "string") return { kind: "envelope", envelope: body };
  const meta = body._meta;
  if (isRecord(meta) && Object.hasOwn(meta, MCP_RECEIPT_META_KEY)) return { kind: "mcp", envelope: meta[MCP_RECEIPT_META_KEY], result: body };
  if (Object.hasOwn(body, "receipt")) {
    return Object.hasOwn(body, "result") ? { kind: "rest", envelope: body.receipt, result: body.result } : { kind: "refusal", envelope: body.receipt };
  }
  return null;
}

async function hashOrProblem(value: unknown): Promise<{ hash: string } | { problem: string }> {
  try {
    return { hash: hex(await sha256(utf8.encode(canonicalJson(value)))) };
  } catch (err) {
    if (err instanceof CanonicalJsonError) return { problem: `no canonical JSON form (${err.problem} at ${err.path})` };
    throw err;
  }
}

/** The signed receipt when the payload bytes are the canonical JSON of a v1 receipt, else why not. */
function readSigned(bytes: Uint8Array): { signed: Receipt } | { problem: string } {
  let text: string;
  let parsed: unknown;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    return { problem: "the signed payload is not UTF-8" };
  }
  try {
    parsed = JSON.parse(text);
  } catch {
    return { problem: "the signed payload is not JSON" };
  }
  const shape = receiptProblem(parsed);
  if (shape !== null) return { problem: `the signed payload is not a v1 receipt (${shape})` };
  // One byte form per receipt: duplicate keys or re-spelled numbers would read two ways.
  if (canonicalReceipt(parsed as Receipt) !== text) return { problem: "the signed payload is not canonical JSON" };
  return { signed: parsed as Receipt };
}

function readableCheck(readable: unknown, signed: Receipt): Check {
  if (!isRecord(readable)) return { name: "readable_copy", ok: false, detail: "the envelope has no readable copy" };
  const names = new Set<string>([...RECEIPT_FIELDS, ...Object.keys(readable)]);
  const differ: string[] = [];
  for (const name of names) {
    const mine = Object.hasOwn(readable, name) ? readable[name] : undefined;
    const theirs = Object.hasOwn(signed, name) ? (signed as Record<string, unknown>)[name] : undefined;
    // Every receipt field is a string, a number or null: === is canonical equality.
    if (mine !== theirs || mine === undefined) differ.push(printable(name));
  }
  return differ.length === 0
    ? { name: "readable_copy", ok: true }
    : { name: "readable_copy", ok: false, detail: `differs from signed payload at ${differ.join(", ")}` };
}

async function resultCheck(found: Located, signed: Receipt): Promise<Check> {
  const expected = signed.result_sha256;
  if (found.kind === "envelope") return { name: "result", ok: true, skipped: true, detail: "a bare envelope carries no result" };
  if (found.kind === "refusal") {
    return expected === null
      ? { name: "result", ok: true, detail: `none returned, none paid for: ${signed.outcome}` }
      : { name: "result", ok: false, detail: "result_sha256 is set but the response holds no result" };
  }
  if (expected === null) {
    if (found.kind === "mcp" && isRecord(found.result) && found.result.isError === true) {
      return { name: "result", ok: true, detail: `an error result, none paid for: ${signed.outcome}` };
    }
    return { name: "result", ok: false, detail: "the response holds a result but result_sha256 is null" };
  }
  const got = await hashOrProblem(resultForHashing(found.result));
  if ("problem" in got) return { name: "result", ok: false, detail: `the result has ${got.problem}` };
  return got.hash === expected ? { name: "result", ok: true, detail: "matches result_sha256" } : { name: "result", ok: false, detail: "result_sha256 differs" };
}

async function paramsCheck(args: unknown, signed: Receipt): Promise<Check> {
  if (args === undefined) return { name: "params", ok: true, skipped: true, detail: "no arguments given" };
  const got = await hashOrProblem(args);
  if ("problem" in got) return { name: "params", ok: false, detail: `the arguments have ${got.problem}` };
  return got.hash === signed.params_sha256 ? { name: "params", ok: true, detail: "matches params_sha256" } : { name: "params", ok: false, detail: "params_sha256 differs" };
}

/**
 * verifyResponse for a browser: signature, readable_copy, result, params (params skipped when
 * `args` is undefined), each compared with the SIGNED payload. `keys` from importJwksWeb.
 */
export async function verifyResponseWeb(body: unknown, keys: ReadonlyMap<string, CryptoKey>, args?: unknown): Promise<Check[]> {
  const found = locate(body);
  if (found === null) {
    return [{ name: "envelope", ok: false, detail: `no receipt in the response (looked for receipt, _meta["${MCP_RECEIPT_META_KEY}"] and a bare envelope)` }];
  }
  const env = found.envelope;
  if (!isRecord(env)) return [{ name: "envelope", ok: false, detail: "not a receipt envelope (expected an object)" }];
  const { payload, signature, kid, receipt } = env;
  if (typeof payload !== "string" || typeof signature !== "string" || typeof kid !== "string") {
    return [{ name: "envelope", ok: false, detail: "not a receipt envelope (payload, signature and kid must be strings)" }];
  }
  const bytes = decodeBase64urlWeb(payload);
  if (bytes === null) return [{ name: "envelope", ok: false, detail: "payload is not base64url" }];
  const sig = decodeBase64urlWeb(signature);
  const key = keys.get(kid);
  const valid = key !== undefined && sig !== null && sig.length === 64 && (await crypto.subtle.verify({ name: "Ed25519" }, key, sig, bytes));
  const read = readSigned(bytes);

  const checks: Check[] = [];
  if (!key) checks.push({ name: "signature", ok: false, detail: `unknown kid ${printable(kid)} (not in the key set)` });
  else if (!valid) checks.push({ name: "signature", ok: false, detail: `does not verify under kid ${printable(kid)}` });
  else if ("problem" in read) checks.push({ name: "signature", ok: false, detail: read.problem });
  else if (read.signed.kid !== kid) checks.push({ name: "signature", ok: false, detail: "the signed kid differs from the envelope kid" });
  else checks.push({ name: "signature", ok: true, detail: `kid ${kid}` });

  if ("problem" in read) {
    const detail = "not checked: the signed payload is unreadable";
    return [...checks, { name: "readable_copy", ok: false, detail }, { name: "result", ok: false, detail }, { name: "params", ok: false, detail }];
  }
  checks.push(readableCheck(receipt, read.signed));
  checks.push(await resultCheck(found, read.signed));
  checks.push(await paramsCheck(args, read.signed));
  return checks;
}
