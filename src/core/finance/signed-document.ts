// The desk's signed documents other than receipts (top-up records, statements): the same envelope
// as a receipt's (9.4), the same key and the same rules, reused from core/receipt. `payload` is
// base64url of the RFC 8785 canonical JSON of the document, `signature` the Ed25519 signature of
// those bytes, `kid` the key, and a readable copy under the document's own name.
import { verify } from "node:crypto";
import { decodeBase64url, encodeBase64url } from "../receipt/base64url.ts";
import { CanonicalJsonError, canonicalJson } from "../receipt/canonical.ts";
import { sha256Hex } from "../receipt/hash.ts";
import type { ReceiptSigner } from "../receipt/sign.ts";
import type { ReceiptKeys } from "../receipt/verify.ts";

export type SignedDocument<Name extends string, Doc> = { payload: string; signature: string; kid: string } & { [K in Name]: Doc };

/**
 * Signs `doc` (which must carry `kid: signer.kid` and a `type` of its own, so it can never read
 * as a receipt) and wraps it with its readable copy under `name`.
 */
export function signDocument<Name extends string, Doc extends { kid: string; type: string }>(
  signer: Pick<ReceiptSigner, "kid" | "signBytes">,
  name: Name,
  doc: Doc,
): SignedDocument<Name, Doc> {
  if (doc.kid !== signer.kid) throw new RangeError("the document's kid is not the signer's");
  const bytes = Buffer.from(canonicalJson(doc), "utf8");
  return { payload: encodeBase64url(bytes), signature: encodeBase64url(signer.signBytes(bytes)), kid: signer.kid, [name]: doc } as SignedDocument<Name, Doc>;
}

export type OpenedDocument<Doc> = { ok: true; doc: Doc; payloadSha256: string } | { ok: false; problem: string };

const utf8 = new TextDecoder("utf-8", { fatal: true });
const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * Opens an envelope: the kid is in `keys`, the Ed25519 signature holds over the payload bytes,
 * the payload is the canonical JSON of a document `read` accepts (null = accepted, else the
 * problem) with the envelope's kid, and the readable copy equals it. One spelling only: a
 * re-encoded payload, a padded base64url or a readable copy that differs fails.
 */
export function openDocument<Doc>(envelope: unknown, name: string, keys: ReceiptKeys, read: (value: unknown) => string | null): OpenedDocument<Doc> {
  if (!isRecord(envelope)) return { ok: false, problem: "not an envelope (expected an object)" };
  const { payload, signature, kid } = envelope;
  if (typeof payload !== "string" || typeof signature !== "string" || typeof kid !== "string") {
    return { ok: false, problem: "not an envelope (payload, signature and kid must be strings)" };
  }
  const bytes = decodeBase64url(payload);
  const sig = decodeBase64url(signature);
  if (bytes === null) return { ok: false, problem: "payload is not base64url" };
  const key = keys.get(kid);
  if (key === undefined) return { ok: false, problem: "unknown kid (not in the key set)" };
  if (sig === null || sig.length !== 64 || !verify(null, bytes, key, sig)) return { ok: false, problem: "the signature does not verify" };
  let text: string;
  let doc: unknown;
  try {
    text = utf8.decode(bytes);
    doc = JSON.parse(text);
  } catch {
    return { ok: false, problem: "the signed payload is not UTF-8 JSON" };
  }
  const problem = read(doc);
  if (problem !== null) return { ok: false, problem: `the signed payload is not a valid ${name} (${problem})` };
  try {
    // Blocks duplicate keys and re-spelled numbers that two JSON readers could take differently.
    if (canonicalJson(doc) !== text) return { ok: false, problem: "the signed payload is not canonical JSON" };
    if ((doc as { kid?: unknown }).kid !== kid) return { ok: false, problem: "the signed kid differs from the envelope kid" };
    if (!Object.hasOwn(envelope, name) || canonicalJson(envelope[name]) !== text)
      return { ok: false, problem: `the readable ${name} differs from the signed payload` };
  } catch (err) {
    if (err instanceof CanonicalJsonError) return { ok: false, problem: `the readable ${name} differs from the signed payload` };
    throw err;
  }
  return { ok: true, doc: doc as Doc, payloadSha256: sha256Hex(bytes) };
}
