// The desk's side: an Ed25519 signing key parsed once, its public JWK and kid, and the envelope.
import { createPrivateKey, createPublicKey, generateKeyPairSync, type KeyObject, sign } from "node:crypto";
import { encodeBase64url } from "./base64url.ts";
import { canonicalJson } from "./canonical.ts";
import { hashJson, sha256Hex } from "./hash.ts";
import { approvalBindingProblem } from "../decision/binding.ts";
import {
  APPROVAL_RECEIPT_VERSION,
  canonicalReceipt,
  type Envelope,
  RECEIPT_VERSION,
  type Receipt,
  type ReceiptFields,
  receiptFields,
  receiptProblem,
} from "./types.ts";

/** A public receipt-signing key as published in the JWKS. */
export type ReceiptJwk = { kty: "OKP"; crv: "Ed25519"; x: string; kid: string; use: "sig"; alg: "EdDSA" };

/** `GET /.well-known/receipt-signing-key.json`: the current key and every retired one. */
export type Jwks = { keys: ReceiptJwk[] };

/** A key that is not what it must be (wrong type, unparsable, private material in a JWKS...). */
export class ReceiptKeyError extends Error {
  override name = "ReceiptKeyError";
}

/** A receipt the signer refuses to sign (a desk bug, never a caller's input); names the field. */
export class ReceiptInvalidError extends Error {
  override name = "ReceiptInvalidError";
}

/** RFC 7638 thumbprint of an Ed25519 public key: base64url SHA-256 of {"crv","kty","x"}. */
export function jwkThumbprint(x: string): string {
  const digest = Buffer.from(sha256Hex(canonicalJson({ crv: "Ed25519", kty: "OKP", x })), "hex");
  return encodeBase64url(digest);
}

function publicJwkOf(publicKey: KeyObject): ReceiptJwk {
  const { x } = publicKey.export({ format: "jwk" });
  if (typeof x !== "string") throw new ReceiptKeyError("not an Ed25519 key");
  return { kty: "OKP", crv: "Ed25519", x, kid: jwkThumbprint(x), use: "sig", alg: "EdDSA" };
}

/** A new Ed25519 key: the PKCS#8 PEM to store (mode 0600) and its public JWK. */
export function generateSigningKey(): { privatePem: string; publicJwk: ReceiptJwk; kid: string } {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const privatePem = privateKey.export({ format: "pem", type: "pkcs8" }).toString();
  const publicJwk = publicJwkOf(publicKey);
  return { privatePem, publicJwk, kid: publicJwk.kid };
}

export type ReceiptSigner = {
  /** RFC 7638 thumbprint of the public key; the receipts' and the JWK's `kid`. */
  readonly kid: string;
  publicJwk(): ReceiptJwk;
  /** Sets v and kid, checks the receipt (throws ReceiptInvalidError) and signs its canonical bytes. */
  sign(fields: ReceiptFields): Envelope;
  /**
   * The 64-byte Ed25519 signature of `bytes` under the same key, for the desk's other signed
   * documents (top-up records, statements, webhook v1a). Each of those carries its own `type`
   * or shape, so no signature over one can be read as a receipt (docs/finance.md).
   */
  signBytes(bytes: Uint8Array): Uint8Array;
};

/** An Ed25519 private key parsed once: its kid and public JWK, and signatures over bytes. */
export type SigningKey = {
  readonly kid: string;
  publicJwk(): ReceiptJwk;
  /** The 64-byte Ed25519 signature over `bytes` (pure EdDSA). */
  signBytes(bytes: Uint8Array): Uint8Array;
};

/**
 * Parses a PKCS#8 PEM Ed25519 private key once (the desk's receipt key, the approver's decision
 * key); throws ReceiptKeyError naming `what` for anything else.
 */
export function loadSigningKey(privatePem: string, what = "the receipt-signing key"): SigningKey {
  let privateKey: KeyObject;
  try {
    privateKey = createPrivateKey({ key: privatePem, format: "pem" });
  } catch {
    throw new ReceiptKeyError(`${what} is not a readable PEM private key`);
  }
  // Blocks a P-256 or RSA key slipping in: verifiers only accept Ed25519.
  if (privateKey.asymmetricKeyType !== "ed25519") throw new ReceiptKeyError(`${what} is not Ed25519`);
  const jwk = publicJwkOf(createPublicKey(privateKey));
  return { kid: jwk.kid, publicJwk: () => ({ ...jwk }), signBytes: (bytes) => new Uint8Array(sign(null, bytes, privateKey)) };
}

/** Parses a PKCS#8 PEM Ed25519 private key once; throws ReceiptKeyError for anything else. */
export function loadSigner(privatePem: string): ReceiptSigner {
  const key = loadSigningKey(privatePem);
  const kid = key.kid;
  return {
    kid,
    publicJwk: key.publicJwk,
    sign(fields: ReceiptFields): Envelope {
      const v = fields.approval === undefined ? RECEIPT_VERSION : APPROVAL_RECEIPT_VERSION;
      const source = { ...fields, v, kid } as Record<string, unknown>;
      const problem = receiptProblem(source) ?? (v === APPROVAL_RECEIPT_VERSION ? approvalBindingProblem(source as Receipt) : null);
      if (problem) throw new ReceiptInvalidError(`refusing to sign an invalid receipt: ${problem}`);
      const receipt = {} as Record<string, unknown>;
      for (const field of receiptFields(v)) receipt[field] = source[field];
      const text = canonicalReceipt(receipt as Receipt);
      if (text === null) throw new ReceiptInvalidError("refusing to sign an invalid receipt: a field is not well-formed Unicode");
      const bytes = Buffer.from(text, "utf8");
      return {
        payload: encodeBase64url(bytes),
        signature: encodeBase64url(key.signBytes(bytes)),
        kid,
        receipt: receipt as Receipt,
      };
    },
    signBytes: key.signBytes,
  };
}

/** The JWKS to publish: the current key first, then the retired ones (all still verify). */
export function jwksOf(current: ReceiptJwk, retired: readonly ReceiptJwk[] = []): Jwks {
  return { keys: [current, ...retired.filter((k) => k.kid !== current.kid)] };
}

/**
 * seq and prev_sha256 for the next receipt of a key, given the last receipt of its chain (null
 * for the first). prev_sha256 is SHA-256 of the previous payload bytes, which are its
 * canonical JSON, so it equals hashJson(previous).
 */
export function chainLinkAfter(previous: Receipt | null): { seq: number; prev_sha256: string | null } {
  return previous === null ? { seq: 1, prev_sha256: null } : { seq: previous.seq + 1, prev_sha256: hashJson(previous) };
}
