// A receipt as a ledger keeps it: what was signed, once (the canonical payload text and the
// 64-byte signature), and the envelope derived from it when it is answered, exported or checked.
// The envelope is the one the signer made, byte for byte: payload and signature in base64url,
// the kid, and the readable copy in RECEIPT_FIELDS order (a test holds the two equal).
import { encodeBase64url } from "./base64url.ts";
import { type Envelope, type Receipt, receiptFields } from "./types.ts";

/** What a ledger stores of a signed envelope: the payload as UTF-8 text (canonical JSON) and the signature bytes. */
export type SignedReceipt = { payload: string; signature: Uint8Array };

/** The stored form of an envelope the signer made. */
export function signedOf(envelope: Pick<Envelope, "payload" | "signature">): SignedReceipt {
  return { payload: Buffer.from(envelope.payload, "base64url").toString("utf8"), signature: Buffer.from(envelope.signature, "base64url") };
}

/** The receipt a stored payload holds, with its fields in the readable copy's order. */
export function readableReceipt(payload: string): Receipt {
  return readableCopyOf(JSON.parse(payload) as Record<string, unknown>);
}

/** The readable copy of a payload already read: its fields in RECEIPT_FIELDS order (readableReceipt). */
export function readableCopyOf(signed: Record<string, unknown>): Receipt {
  const receipt: Record<string, unknown> = {};
  for (const field of receiptFields(signed.v)) {
    if (!Object.hasOwn(signed, field)) continue;
    const value = signed[field];
    if (field === "approval" && typeof value === "object" && value !== null) {
      const { payload: p, signature, kid } = value as Record<string, unknown>;
      receipt[field] = { payload: p, signature, kid };
    } else {
      receipt[field] = value;
    }
  }
  return receipt as Receipt;
}

/** The envelope JSON text of a stored receipt, as the signer wrote it (`receipt`: its readableReceipt, when already read). */
export function envelopeText(stored: SignedReceipt, receipt: Receipt = readableReceipt(stored.payload)): string {
  const envelope: Envelope = {
    payload: encodeBase64url(Buffer.from(stored.payload, "utf8")),
    signature: encodeBase64url(stored.signature),
    kid: receipt.kid,
    receipt,
  };
  return JSON.stringify(envelope);
}
