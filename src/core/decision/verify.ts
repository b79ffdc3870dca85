// Offline verification of the approver's decision records, pure over its JWKS (the same key set
// shape and rules as the desk's, ReceiptKeys): one record's signature and readable copy, the
// approver's chain through an export, and the approval a desk receipt (version 2) carries.
import { verify } from "node:crypto";
import { decodeBase64url } from "../receipt/base64url.ts";
import { type Check, isRecord, readableCopyCheck } from "../receipt/checks.ts";
import { sha256Hex } from "../receipt/hash.ts";
import { printable } from "../receipt/printable.ts";
import type { ApprovalEnvelope, Receipt } from "../receipt/types.ts";
import type { ReceiptKeys } from "../receipt/verify.ts";
import { bindingProblem, readDecisionBytes } from "./binding.ts";
import { DECISION_FIELDS, type DecisionRecord } from "./record.ts";

/** A decision envelope opened: its checks, and the signed record when the payload is one. */
export type OpenedDecision = { checks: Check[]; signed: DecisionRecord | null; payloadSha256: string | null };

type Verified = { bytes: Buffer; read: ReturnType<typeof readDecisionBytes> } | { failed: Check };

/** The signature of `{payload, signature, kid}` under `keys`, and the payload read as a record. */
function verifySigned(envelope: unknown, keys: ReceiptKeys, name: "signature" | "approver_signature"): Verified {
  const bad = (detail: string): Verified => ({ failed: { name, ok: false, detail } });
  if (!isRecord(envelope)) return bad("not a decision envelope (expected an object)");
  const { payload, signature, kid } = envelope;
  if (typeof payload !== "string" || typeof signature !== "string" || typeof kid !== "string") {
    return bad("not a decision envelope (payload, signature and kid must be strings)");
  }
  const bytes = decodeBase64url(payload);
  if (bytes === null) return bad("payload is not base64url");
  const key = keys.get(kid);
  if (key === undefined) return bad(`unknown kid ${printable(kid)} (not in the ${name === "signature" ? "" : "approver's "}key set)`);
  const sig = decodeBase64url(signature);
  if (sig === null || sig.length !== 64 || !verify(null, bytes, key, sig)) return bad(`does not verify under kid ${printable(kid)}`);
  const read = readDecisionBytes(bytes);
  if ("problem" in read) return bad(read.problem);
  if (read.record.kid !== kid) return bad("the signed kid differs from the envelope kid");
  return { bytes, read };
}

/**
 * A decision envelope as someone acting on it reads it (the desk): the signature under `keys`,
 * the payload a canonical v1 record carrying the envelope's kid. Gives the record and the
 * `{payload, signature, kid}` a receipt binds, or the problem; `unknownKid` when the only
 * problem is a kid the key set lacks (a rotation the reader has not heard of).
 */
export function readSignedDecision(
  envelope: unknown,
  keys: ReceiptKeys,
): { record: DecisionRecord; approval: ApprovalEnvelope } | { problem: string; unknownKid?: string } {
  const v = verifySigned(envelope, keys, "signature");
  if ("failed" in v) {
    const kid = isRecord(envelope) && typeof envelope.kid === "string" && keys.get(envelope.kid) === undefined ? envelope.kid : undefined;
    return { problem: v.failed.detail ?? "does not verify", ...(kid === undefined ? {} : { unknownKid: kid }) };
  }
  const { payload, signature, kid } = envelope as ApprovalEnvelope;
  return { record: (v.read as { record: DecisionRecord }).record, approval: { payload, signature, kid } };
}

/** A one-line summary of a record, from the signed payload: `seq 3: K7Q2M4XZ3A approved (pay)`. */
export function describeDecision(r: DecisionRecord): string {
  return `seq ${r.seq}: ${r.approval_id} ${r.decision}${r.ref === null ? "" : ` (${printable(r.ref)})`}, ${r.verb} ask`;
}

/**
 * Checks one decision envelope `{payload, signature, kid, decision}`: `signature` (Ed25519 under
 * its kid in the approver's keys, over the payload bytes, which must be the canonical JSON of a
 * v1 decision record carrying that kid) and `readable_copy` (equal to the payload).
 */
export function openDecision(envelope: unknown, keys: ReceiptKeys): OpenedDecision {
  const v = verifySigned(envelope, keys, "signature");
  if ("failed" in v)
    return { checks: [v.failed, { name: "readable_copy", ok: false, detail: "not checked: the signature did not verify" }], signed: null, payloadSha256: null };
  const record = (v.read as { record: DecisionRecord }).record;
  const copy = readableCopyCheck((envelope as Record<string, unknown>).decision, record as unknown as Record<string, unknown>, DECISION_FIELDS);
  const checks: Check[] = [
    { name: "signature", ok: true, detail: `kid ${printable(record.kid)}` },
    copy.ok ? { ...copy, detail: describeDecision(record) } : copy,
  ];
  return { checks, signed: record, payloadSha256: sha256Hex(v.bytes) };
}

/** One break in the approver's chain; `index` is the position (a line number) given to add. */
export type DecisionChainFailure = { index: number; detail: string };

/**
 * Follows the approver's one chain through records in export order: seq starts at 1 and goes up
 * by one, prev_sha256 is the SHA-256 of the previous payload bytes, and no ask has two records.
 * Records whose payload is unreadable are skipped here; their own checks fail.
 */
export class DecisionChain {
  private last: { seq: number; sha256: string } | undefined;
  private readonly asks = new Set<string>();
  readonly failures: DecisionChainFailure[] = [];
  count = 0;

  add(index: number, signed: DecisionRecord | null, payloadSha256: string | null): void {
    if (signed === null || payloadSha256 === null) return;
    this.count++;
    const prev = this.last;
    this.last = { seq: signed.seq, sha256: payloadSha256 };
    const expectedSeq = prev ? prev.seq + 1 : 1;
    if (signed.seq !== expectedSeq) {
      const what = prev ? `after seq ${prev.seq}` : "as the first record";
      this.failures.push({ index, detail: `seq ${signed.seq} ${what}; expected seq ${expectedSeq} (a record is missing or out of order)` });
    } else if (prev && signed.prev_sha256 !== prev.sha256) {
      this.failures.push({ index, detail: `prev_sha256 differs from the hash of seq ${prev.seq}` });
    }
    if (this.asks.has(signed.approval_id)) this.failures.push({ index, detail: `a second record for ask ${signed.approval_id}` });
    this.asks.add(signed.approval_id);
  }
}

/**
 * The approval of a version 2 receipt, once the desk's signature holds: `approver_signature`
 * (the decision verifies under the approver's keys) and `approval` (it is the person's decision
 * on this very call, and the outcome follows it). Without the approver's keys both fail: a
 * check the receipt calls for never reads as a pass.
 */
export function approvalChecks(signed: Receipt, approverKeys: ReceiptKeys | undefined): Check[] {
  if (signed.approval === undefined) return [];
  if (approverKeys === undefined) {
    const why = "not checked: the receipt carries the approver's decision; give --approver-keys with the approver's JWKS";
    return [
      { name: "approver_signature", ok: false, detail: why },
      { name: "approval", ok: false, detail: why },
    ];
  }
  const v = verifySigned(signed.approval, approverKeys, "approver_signature");
  if ("failed" in v) return [v.failed, { name: "approval", ok: false, detail: "not checked: the decision did not verify" }];
  const record = (v.read as { record: DecisionRecord }).record;
  const problem = bindingProblem(signed, record);
  return [
    { name: "approver_signature", ok: true, detail: `kid ${printable(record.kid)}` },
    problem === null
      ? {
          name: "approval",
          ok: true,
          detail: `${record.approval_id} ${record.decision === "expired" ? "expired undecided" : `${record.decision} by a person`}, for this call (seq ${record.seq})`,
        }
      : { name: "approval", ok: false, detail: problem },
  ];
}
