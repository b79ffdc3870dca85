// What ties a desk receipt (version 2) to the approver's decision it carries: the decision is
// the person's on a spend ask for this very call (its arguments, tool, price, key and org), and
// the receipt's outcome follows the decision. The desk's signer refuses a receipt that breaks a
// rule here; verifiers run the same rules after checking both signatures.
import { decodeBase64url } from "../receipt/base64url.ts";
import { canonicalJson } from "../receipt/canonical.ts";
import type { Receipt } from "../receipt/types.ts";
import { type DecisionRecord, decisionProblem } from "./record.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });

/** A signed payload as a decision record: canonical JSON of a valid v1 record, else why not. */
export function readDecisionBytes(bytes: Uint8Array): { record: DecisionRecord } | { problem: string } {
  let text: string;
  let parsed: unknown;
  try {
    text = utf8.decode(bytes);
    parsed = JSON.parse(text);
  } catch {
    return { problem: "the signed payload is not UTF-8 JSON" };
  }
  const problem = decisionProblem(parsed);
  if (problem !== null) return { problem: `the signed payload is not a decision record (${problem})` };
  // One byte form per record: no duplicate keys or re-spelled numbers two readers could take differently.
  if (canonicalJson(parsed) !== text) return { problem: "the signed payload is not canonical JSON" };
  return { record: parsed as DecisionRecord };
}

/** The decision record in a payload's base64url, or why it is none. */
export function readDecisionPayload(payload: string): { record: DecisionRecord; bytes: Buffer } | { problem: string } {
  const bytes = decodeBase64url(payload);
  if (bytes === null) return { problem: "the payload is not base64url" };
  const read = readDecisionBytes(bytes);
  return "record" in read ? { record: read.record, bytes } : read;
}

/** The decision a receipt's outcome needs: a denial or an expiry refunds, anything else went through an approval. */
const decisionFor = (outcome: Receipt["outcome"]): DecisionRecord["decision"] =>
  outcome === "refunded_denied" ? "denied" : outcome === "refunded_expired" ? "expired" : "approved";

/**
 * The first way `record` fails to be the decision on `receipt`'s call, or null. `receipt` is a
 * version 2 receipt that passed receiptProblem.
 */
export function bindingProblem(receipt: Receipt, record: DecisionRecord): string | null {
  if (record.verb !== "spend" || record.spend === null) return `the decision is on a ${record.verb} ask, not on a desk call`;
  const s = record.spend;
  const differ = (["params_sha256", "tool", "price_mc", "key_id", "org_id"] as const).filter((f) => s[f] !== receipt[f]);
  if (differ.length > 0) return `the decision is on another call (${differ.join(", ")} differ)`;
  const wanted = decisionFor(receipt.outcome);
  if (record.decision !== wanted) return `the decision is ${record.decision}, and a receipt ${receipt.outcome} needs one ${wanted}`;
  if (Date.parse(record.decided_at) > Date.parse(receipt.issued_at)) return "the decision was made after the receipt was issued";
  return null;
}

/** receiptProblem's counterpart for the approval of a version 2 receipt, without the approver's signature. */
export function approvalBindingProblem(receipt: Receipt): string | null {
  if (receipt.approval === undefined) return "approval: missing";
  const read = readDecisionPayload(receipt.approval.payload);
  if ("problem" in read) return `approval: ${read.problem}`;
  if (read.record.kid !== receipt.approval.kid) return "approval: the signed kid differs from the envelope kid";
  const problem = bindingProblem(receipt, read.record);
  return problem === null ? null : `approval: ${problem}`;
}
