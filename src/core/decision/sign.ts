// The approver's side: decision records signed with its own Ed25519 key (loaded once, as the
// desk's receipt key is), in the envelope shape of a desk receipt.
import { encodeBase64url } from "../receipt/base64url.ts";
import { canonicalJson } from "../receipt/canonical.ts";
import { sha256Hex } from "../receipt/hash.ts";
import { ReceiptInvalidError, type SigningKey } from "../receipt/sign.ts";
import { DECISION_FIELDS, DECISION_VERSION, type DecisionEnvelope, type DecisionFields, type DecisionRecord, decisionProblem } from "./record.ts";

/** A signed record with its payload text (what the ledger keeps) and that text's SHA-256. */
export type SignedDecision = { envelope: DecisionEnvelope; text: string; sha256: string };

export type DecisionSigner = {
  readonly kid: string;
  /** Sets v and kid, checks the record (throws ReceiptInvalidError) and signs its canonical bytes. */
  sign(fields: DecisionFields): SignedDecision;
};

/** The readable copy of a record, fields in DECISION_FIELDS order. */
export function orderedDecision(record: Record<string, unknown>): DecisionRecord {
  const out = {} as Record<string, unknown>;
  for (const field of DECISION_FIELDS) out[field] = record[field];
  return out as DecisionRecord;
}

export function decisionSigner(key: SigningKey): DecisionSigner {
  return {
    kid: key.kid,
    sign(fields) {
      const record = orderedDecision({ ...fields, v: DECISION_VERSION, kid: key.kid });
      const problem = decisionProblem(record);
      // A ledger fault never yields a signed record that verifiers would have to interpret.
      if (problem) throw new ReceiptInvalidError(`refusing to sign an invalid decision record: ${problem}`);
      const text = canonicalJson(record);
      const bytes = Buffer.from(text, "utf8");
      return {
        envelope: { payload: encodeBase64url(bytes), signature: encodeBase64url(key.signBytes(bytes)), kid: key.kid, decision: record },
        text,
        sha256: sha256Hex(bytes),
      };
    },
  };
}

/** The envelope of a record the ledger kept as its payload text and signature. */
export function envelopeOf(text: string, signature: string, kid: string): DecisionEnvelope {
  return { payload: encodeBase64url(Buffer.from(text, "utf8")), signature, kid, decision: orderedDecision(JSON.parse(text)) };
}
