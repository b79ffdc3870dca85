// The receipt checks of verify.ts over WebCrypto only, for the operator console in a browser
// (verify.ts needs node:crypto, which a browser does not have). Every rule comes from checks.ts,
// as in verify.ts; only the Ed25519 and SHA-256 calls differ. A unit test holds its verdicts
// equal to verifyResponse on the receipt vectors.
import { canonicalJson } from "./canonical.ts";
import {
  type Check,
  envelopeParts,
  hashCheck,
  isRecord,
  jwkProblem,
  paramsCheck,
  readableCheck,
  readSigned,
  resultCheck,
  shapeOf,
  signatureCheck,
  type ToHash,
  unreadable,
} from "./checks.ts";

const BASE64URL = /^[A-Za-z0-9_-]*$/;

/** The bytes of `text`, or null unless it is the one canonical unpadded base64url spelling. */
export function decodeBase64urlWeb(text: string): Uint8Array<ArrayBuffer> | null {
  if (text.length % 4 === 1 || !BASE64URL.test(text)) return null;
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  const bytes = Uint8Array.from(binary, (c) => c.charCodeAt(0));
  // Re-encoding must give the same text: non-zero spare bits would be a second spelling.
  return encodeBase64urlWeb(bytes) === text ? bytes : null;
}

function encodeBase64urlWeb(bytes: Uint8Array): string {
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function sha256(bytes: Uint8Array<ArrayBuffer>): Promise<Uint8Array<ArrayBuffer>> {
  return new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
}

const hex = (bytes: Uint8Array) => Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
const utf8 = new TextEncoder();

/** A JWKS read into kid -> Ed25519 public CryptoKey; the same rules as ReceiptKeys.fromJwks. */
export async function importJwksWeb(jwks: unknown): Promise<Map<string, CryptoKey>> {
  const keys = isRecord(jwks) ? jwks.keys : undefined;
  if (!Array.isArray(keys)) throw new Error('not a JWKS: expected {"keys": [...]}');
  const byKid = new Map<string, CryptoKey>();
  for (const [i, k] of keys.entries()) {
    const where = `keys[${i}]`;
    const problem = jwkProblem(k, decodeBase64urlWeb);
    if (problem !== null) throw new Error(`${where} ${problem}`);
    const { x, kid } = k as { x: string; kid: unknown };
    // kid is the key's own RFC 7638 thumbprint, so a kid cannot be pinned to a different key.
    const thumb = encodeBase64urlWeb(await sha256(utf8.encode(canonicalJson({ crv: "Ed25519", kty: "OKP", x }))));
    if (kid !== thumb) throw new Error(`${where} has a kid that is not its RFC 7638 thumbprint`);
    if (byKid.has(thumb)) throw new Error(`${where} repeats kid ${thumb}`);
    byKid.set(thumb, await crypto.subtle.importKey("jwk", { kty: "OKP", crv: "Ed25519", x }, { name: "Ed25519" }, false, ["verify"]));
  }
  return byKid;
}

async function hashed(step: Check | ToHash): Promise<Check> {
  return "text" in step ? hashCheck(step, hex(await sha256(utf8.encode(step.text)))) : step;
}

/**
 * verifyResponse for a browser: the same shapes (a failed `shape` check for any other file), then
 * signature, readable_copy, result, params (params skipped when `args` is undefined, result
 * only for a bare envelope of a charged call), each compared with the SIGNED payload. `keys`
 * from importJwksWeb.
 */
export async function verifyResponseWeb(body: unknown, keys: ReadonlyMap<string, CryptoKey>, args?: unknown): Promise<Check[]> {
  const found = shapeOf(body);
  if ("failed" in found) return [found.failed];
  const parts = envelopeParts(found.shape.envelope);
  if ("failed" in parts) return [parts.failed];
  const bytes = decodeBase64urlWeb(parts.payload);
  if (bytes === null) return [{ name: "envelope", ok: false, detail: "payload is not base64url" }];
  const sig = decodeBase64urlWeb(parts.signature);
  const key = keys.get(parts.kid);
  const valid = key !== undefined && sig !== null && sig.length === 64 && (await crypto.subtle.verify({ name: "Ed25519" }, key, sig, bytes));
  const read = readSigned(bytes);
  const checks = [signatureCheck(parts.kid, key !== undefined, valid, read)];
  if ("problem" in read) return [...checks, unreadable("readable_copy"), unreadable("result"), unreadable("params")];
  // The approver's decision a version 2 receipt carries is checked by verify-receipt with the
  // approver's key set, which this page does not have: it says so, and the receipt does not pass.
  const approval: Check[] =
    read.signed.approval === undefined
      ? []
      : [{ name: "approval", ok: false, detail: "not checked here: verify the receipt with ask-only verify-receipt --approver-keys" }];
  return [
    ...checks,
    readableCheck(parts.receipt, read.signed),
    await hashed(resultCheck(found.shape, read.signed)),
    await hashed(paramsCheck(args, read.signed)),
    ...approval,
  ];
}
