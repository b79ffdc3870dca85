// The one mapping from what the ledger knows about a call (ReceiptFacts) to a signed receipt,
// for the desk and for anything else that drives the ledger (the multi-process test worker).
import type { Clock, ReceiptMaker } from "./ports.ts";
import { type Envelope, type ReceiptSigner, sha256Hex, signedOf } from "../receipt/index.ts";

/**
 * A ReceiptMaker signing with `signer`; `onSigned` sees each envelope as it is made. With a
 * `clock`, a receipt is issued when it is signed (never before its facts say): the ledger signs
 * inside the transaction that stores it, so issue order is commit order, and a statement made
 * in a later transaction holds every receipt issued before it.
 */
export function receiptMakerFor(signer: ReceiptSigner, onSigned: (envelope: Envelope) => void = () => {}, clock?: Clock): ReceiptMaker {
  return (f) => {
    const issuedAt = clock === undefined ? f.issuedAt : Math.max(f.issuedAt, clock());
    const envelope = signer.sign({
      id: f.receiptId,
      issued_at: new Date(issuedAt).toISOString(),
      org_id: f.orgId,
      key_id: f.keyId,
      tool: f.tool,
      outcome: f.outcome,
      http_status: f.httpStatus,
      price_mc: f.priceMc,
      amount_mc: f.amountMc,
      upstream_cost_mc: f.upstreamCostMc,
      remaining_mc: Math.max(0, f.remainingMc),
      period: f.period,
      params_sha256: f.paramsSha256,
      result_sha256: f.resultSha256,
      seq: f.link.seq,
      prev_sha256: f.link.prevSha256,
      // A call that waited for a person binds the decision: the receipt is version 2.
      ...(f.approval ? { approval: f.approval } : {}),
    });
    onSigned(envelope);
    const signed = signedOf(envelope);
    return {
      id: envelope.receipt.id,
      kid: envelope.kid,
      // The chain hashes the payload bytes as signed.
      sha256: sha256Hex(signed.payload),
      // Written out only when read: the ledgers store `signed`, and the answer carries the envelope itself.
      get envelope() {
        return JSON.stringify(envelope);
      },
      issuedAt,
      signed,
    };
  };
}
