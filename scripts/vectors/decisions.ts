// Writes test/vectors/decisions/: the approver's JWKS, an export of decision records with their
// chain, one .vector file per decision record, and desk receipts of version 2 that carry a
// decision (their desk keys are the receipt vectors' own: test/vectors/receipts/jwks.json).
// Fixed keys from fixed seeds, so the files are the same on every run (Ed25519 is deterministic).
// Run: node_modules/.bin/bun scripts/vectors/decisions.ts
import { createPrivateKey } from "node:crypto";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { DecisionEnvelope, DecisionFields } from "../../src/core/decision/record.ts";
import { decisionSigner } from "../../src/core/decision/sign.ts";
import {
  describeCheck,
  jwksOf,
  loadSigner,
  loadSigningKey,
  paramsSha256,
  type ReceiptFields,
  resultSha256,
  sha256Hex,
  verifyResponse,
} from "../../src/core/receipt/index.ts";
import { isDecisionEnvelope } from "../../src/core/receipt/shapes.ts";
import { receiptFields } from "../../src/core/receipt/types.ts";
import { encodeBase64url } from "../../src/core/receipt/base64url.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";
import { ReceiptKeys } from "../../src/core/receipt/verify.ts";
import { openDecision } from "../../src/core/decision/verify.ts";
import { formatVector, VECTOR_JWKS } from "../../test/vectors/receipts/vectors.ts";

const DIR = resolve(import.meta.dir, "../../test/vectors/decisions");

function pemFromSeed(label: string): string {
  const seed = Buffer.from(sha256Hex(label), "hex");
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), seed]);
  return createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" }).toString();
}

// The desk's keys are those of the receipt vectors (scripts/vectors/receipts.ts): the RFC 8037 A.1 key.
const deskPem = (() => {
  const der = Buffer.concat([Buffer.from("302e020100300506032b657004220420", "hex"), Buffer.from("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A", "base64url")]);
  return createPrivateKey({ key: der, format: "der", type: "pkcs8" }).export({ format: "pem", type: "pkcs8" }).toString();
})();
const desk = loadSigner(deskPem);
const deskKey = loadSigningKey(deskPem);
const approverKey = loadSigningKey(pemFromSeed("ask-only decision vectors: approver key"), "the vector key");
const retiredKey = loadSigningKey(pemFromSeed("ask-only decision vectors: retired approver key"), "the vector key");
const strangerKey = loadSigningKey(pemFromSeed("ask-only decision vectors: stranger approver key"), "the vector key");
const approver = decisionSigner(approverKey);
const retired = decisionSigner(retiredKey);
const stranger = decisionSigner(strangerKey);
const approverJwks = jwksOf(approverKey.publicJwk(), [retiredKey.publicJwk()]);

const ARGS = { city: "Lyon", days: 2, units: "metric" };
const RESULT = { content: [{ type: "text", text: "Lyon: 14°C, light rain" }] };
const PARAMS = paramsSha256(ARGS);
const SPEND = { reservation_id: "res_0042", tool: "weather__forecast", price_mc: 250_000, key_id: "key_agent7", org_id: "org_acme", params_sha256: PARAMS };
const RECAP = sha256Hex("[ask K7Q2M4XZ3A] SPEND 250,000 mc (250 cents)\n");

/** The chain of the vectors: each record follows the one made before it. */
let last: { seq: number; sha256: string } | undefined;
function record(over: Partial<DecisionFields>, signer = approver): DecisionEnvelope {
  const fields: DecisionFields = {
    seq: last ? last.seq + 1 : 1,
    prev_sha256: last ? last.sha256 : null,
    approval_id: "K7Q2M4XZ3A",
    verb: "spend",
    ask_sha256: sha256Hex("the stored ask"),
    recap_sha256: RECAP,
    decision: "approved",
    ref: null,
    decided_at: "2026-11-30T09:14:10.000Z",
    recorded_at: "2026-11-30T09:14:10.000Z",
    spend: SPEND,
    ...over,
  };
  const signed = signer.sign(fields);
  last = { seq: fields.seq, sha256: signed.sha256 };
  return signed.envelope;
}

const spendApproved = record({});
const payApproved = record({ approval_id: "P4YAPPR0VE", verb: "pay", ref: "demo-3e40a688", spend: null });
const spendDenied = record({ approval_id: "DEN1ED0000", decision: "denied", spend: { ...SPEND, reservation_id: "res_0043" } });
const spendExpired = record({
  approval_id: "EXP1RED000",
  decision: "expired",
  recap_sha256: null,
  decided_at: "2026-11-30T09:24:10.000Z",
  recorded_at: "2026-11-30T09:24:11.000Z",
  spend: { ...SPEND, reservation_id: "res_0044" },
});
const payFailed = record({ approval_id: "FA11ED0000", verb: "pay", decision: "failed", ref: "interrupted", spend: null });
const accountRetired = record({ approval_id: "RET1RED000", verb: "account", ref: "SIGNUP_77", spend: null }, retired);
const chain = [spendApproved, payApproved, spendDenied, spendExpired, payFailed, accountRetired];

/** Bytes signed outside the signer, as a faulty or hostile signer would. */
function signRaw(key: typeof approverKey, text: string) {
  const bytes = Buffer.from(text, "utf8");
  return { payload: encodeBase64url(bytes), signature: encodeBase64url(key.signBytes(bytes)), kid: key.kid };
}
const compactDecision = (env: DecisionEnvelope) => ({ payload: env.payload, signature: env.signature, kid: env.kid });

function receipt(over: Partial<ReceiptFields>): ReceiptFields {
  return {
    id: "rcpt_0101",
    issued_at: "2026-11-30T09:14:11.500Z",
    org_id: "org_acme",
    key_id: "key_agent7",
    tool: "weather__forecast",
    outcome: "charged",
    http_status: 200,
    price_mc: 250_000,
    amount_mc: 250_000,
    upstream_cost_mc: 900,
    remaining_mc: 750_000,
    period: "2026-11",
    params_sha256: PARAMS,
    result_sha256: resultSha256(RESULT),
    seq: 1,
    prev_sha256: null,
    approval: compactDecision(spendApproved),
    ...over,
  };
}
const refunded = (outcome: "refunded_denied" | "refunded_expired", approval: DecisionEnvelope): Partial<ReceiptFields> => ({
  id: outcome === "refunded_denied" ? "rcpt_0102" : "rcpt_0103",
  issued_at: "2026-11-30T09:24:12.000Z",
  outcome,
  http_status: 403,
  amount_mc: 0,
  result_sha256: null,
  remaining_mc: 1_000_000,
  approval: compactDecision(approval),
});

/** A receipt the desk's own signer refuses (its approval does not bind the call): signed raw with the desk's key. */
function forgedReceipt(fields: ReceiptFields) {
  const r = { ...fields, v: 2, kid: deskKey.kid } as Record<string, unknown>;
  const readable = Object.fromEntries(receiptFields(2).map((k) => [k, r[k]]));
  return { ...signRaw(deskKey, canonicalJson(readable)), receipt: readable };
}

const pretty = (v: unknown) => `${JSON.stringify(v, null, 2)}\n`;

type Case = { description: string; body: string; keys: "desk" | "approver"; approverKeys?: boolean; args?: unknown };
const decisionCase = (description: string, envelope: unknown): Case => ({ description, body: pretty(envelope), keys: "approver" });
const receiptCase = (description: string, body: unknown, approverKeys = true): Case => ({
  description,
  body: pretty(body),
  keys: "desk",
  approverKeys,
  args: ARGS,
});

const reSpelled = JSON.stringify(spendApproved.decision, null, 1);
const cases: Record<string, Case> = {
  "decision-spend-approved": decisionCase("the person approved the desk's spend ask: signature and readable copy hold", spendApproved),
  "decision-pay-approved": decisionCase("an approved pay ask with the reference approver's ref", payApproved),
  "decision-denied": decisionCase("a denied spend ask", spendDenied),
  "decision-expired": decisionCase("an ask nobody decided: no recap hash, decided_at is its expiry", spendExpired),
  "decision-failed-interrupted": decisionCase("an approval whose step was interrupted by a restart", payFailed),
  "decision-retired-key": decisionCase("a record signed with a retired key still verifies", accountRetired),
  "decision-tamper-readable": decisionCase("approved turned into denied in the readable copy only", {
    ...spendApproved,
    decision: { ...spendApproved.decision, decision: "denied" },
  }),
  "decision-tamper-payload": decisionCase("approved turned into denied in the signed payload", {
    ...spendApproved,
    payload: encodeBase64url(Buffer.from(Buffer.from(spendApproved.payload, "base64url").toString("utf8").replace('"approved"', '"denied"'))),
  }),
  "decision-stranger-key": decisionCase(
    "a record signed by another approver's key",
    record({ approval_id: "STRANGER00", seq: 1, prev_sha256: null }, stranger),
  ),
  "decision-not-canonical": decisionCase("a record re-spelled with whitespace and signed again: not the one byte form", {
    ...signRaw(approverKey, reSpelled),
    decision: spendApproved.decision,
  }),
  "decision-with-desk-keys": { ...decisionCase("a decision record checked with the desk's keys: unknown kid", spendApproved), keys: "desk" },
  "receipt-approved-charged": receiptCase("a charged call the person approved: both signatures, and the decision binds this call", {
    result: RESULT,
    receipt: desk.sign(receipt({})),
  }),
  "receipt-approved-no-approver-keys": receiptCase(
    "the same without --approver-keys: the decision is called for and cannot be checked",
    { result: RESULT, receipt: desk.sign(receipt({})) },
    false,
  ),
  "receipt-denied": receiptCase("a call the person denied, refunded", {
    error: "APPROVAL_DENIED",
    receipt: desk.sign(receipt(refunded("refunded_denied", spendDenied))),
  }),
  "receipt-expired": receiptCase("a call nobody decided in time, refunded", {
    error: "APPROVAL_EXPIRED",
    receipt: desk.sign(receipt(refunded("refunded_expired", spendExpired))),
  }),
  "receipt-approval-other-params": receiptCase("a receipt whose decision approved other arguments", {
    result: RESULT,
    receipt: forgedReceipt(receipt({ params_sha256: paramsSha256({ ...ARGS, city: "Paris" }) })),
  }),
  "receipt-approval-other-price": receiptCase("a receipt charging more than the person approved", {
    result: RESULT,
    receipt: forgedReceipt(receipt({ price_mc: 900_000, amount_mc: 900_000 })),
  }),
  "receipt-denied-but-charged": receiptCase("a charged receipt carrying a denial", {
    result: RESULT,
    receipt: forgedReceipt(receipt({ approval: compactDecision(spendDenied) })),
  }),
  "receipt-approval-pay-ask": receiptCase("a receipt carrying the decision on a pay ask, not on a desk call", {
    result: RESULT,
    receipt: forgedReceipt(receipt({ approval: compactDecision(payApproved) })),
  }),
  "receipt-approval-stranger": receiptCase("a receipt carrying a decision signed by another approver", {
    result: RESULT,
    receipt: desk.sign(receipt({ approval: compactDecision(record({ approval_id: "STRANGER01", seq: 1, prev_sha256: null }, stranger)) })),
  }),
};

writeFileSync(join(DIR, "approver-jwks.json"), pretty(approverJwks));
writeFileSync(join(DIR, "export.jsonl"), `${chain.map((e) => JSON.stringify(e)).join("\n")}\n`);
const deskJwks = (await Bun.file(VECTOR_JWKS).json()) as unknown;
const approverKeys = ReceiptKeys.fromJwks(approverJwks);
for (const [name, c] of Object.entries(cases)) {
  const body = JSON.parse(c.body);
  const keys = c.keys === "approver" ? approverKeys : ReceiptKeys.fromJwks(deskJwks);
  const checks = isDecisionEnvelope(body) ? openDecision(body, keys).checks : verifyResponse(body, keys, c.args, c.approverKeys ? approverKeys : undefined);
  const vector = {
    description: c.description,
    ...(c.args === undefined ? {} : { args: JSON.stringify(c.args) }),
    keys: c.keys,
    approverKeys: c.approverKeys === true,
    exit: (checks.every((x) => x.ok) ? 0 : 1) as 0 | 1,
    stdout: checks.map(describeCheck),
    body: c.body,
  };
  writeFileSync(join(DIR, `${name}.vector`), formatVector(vector));
}
console.error(`wrote ${Object.keys(cases).length} vectors, approver-jwks.json and export.jsonl to ${DIR}`);
