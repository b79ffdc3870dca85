// Receipts of version 2: a desk receipt that carries the approver's signed decision. The desk's
// signer refuses one whose decision does not bind the call; the readers take a version 2
// receipt only with its approval, and the outcomes of a denial or an expiry only in version 2;
// the browser's verifier says it cannot check the decision, so such a receipt never passes there.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { DecisionFields } from "../../src/core/decision/record.ts";
import { decisionSigner } from "../../src/core/decision/sign.ts";
import { approvalChecks } from "../../src/core/decision/verify.ts";
import {
  canonicalJson,
  canonicalReceipt,
  describeCheck,
  envelopeText,
  generateSigningKey,
  jwksOf,
  loadSigner,
  openEnvelope,
  openStored,
  paramsSha256,
  type Receipt,
  ReceiptInvalidError,
  type ReceiptFields,
  ReceiptKeys,
  readableReceipt,
  receiptProblem,
  resultSha256,
  signedOf,
  verifyResponse,
} from "../../src/core/receipt/index.ts";
import { importJwksWeb, verifyResponseWeb } from "../../src/core/receipt/verify-web.ts";
import { RECAP, TEST_KEY } from "../helpers/decision-signer.ts";
import { DECISION_VECTOR_DIR, readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

const desk = loadSigner(generateSigningKey().privatePem);
const approver = decisionSigner(TEST_KEY);
const APPROVER_JWKS = jwksOf(TEST_KEY.publicJwk());
const DESK_JWKS = jwksOf(desk.publicJwk());
const ARGS = { q: "forecast", days: 2 };
const RESULT = { content: [{ type: "text", text: "rain" }] };
const SPEND = { reservation_id: "res_1", tool: "wx__forecast", price_mc: 150_000, key_id: "key_1", org_id: "org_1", params_sha256: paramsSha256(ARGS) };

function decision(over: Partial<DecisionFields> = {}) {
  const env = approver.sign({
    seq: 1,
    prev_sha256: null,
    approval_id: "K7Q2M4XZ3A",
    verb: "spend",
    ask_sha256: "a".repeat(64),
    recap_sha256: RECAP,
    decision: "approved",
    ref: null,
    decided_at: "2026-11-30T09:00:00.000Z",
    recorded_at: "2026-11-30T09:00:00.000Z",
    spend: SPEND,
    ...over,
  }).envelope;
  return { payload: env.payload, signature: env.signature, kid: env.kid };
}

function fields(over: Partial<ReceiptFields> = {}): ReceiptFields {
  return {
    id: "rcpt_1",
    issued_at: "2026-11-30T09:00:01.000Z",
    org_id: "org_1",
    key_id: "key_1",
    tool: "wx__forecast",
    outcome: "charged",
    http_status: 200,
    price_mc: 150_000,
    amount_mc: 150_000,
    upstream_cost_mc: 0,
    remaining_mc: 0,
    period: "none",
    params_sha256: paramsSha256(ARGS),
    result_sha256: resultSha256(RESULT),
    seq: 1,
    prev_sha256: null,
    approval: decision(),
    ...over,
  };
}

describe("the desk's signer", () => {
  test("a receipt with an approval is version 2, its approval last in the readable copy", () => {
    const env = desk.sign(fields());
    expect(env.receipt.v).toBe(2);
    expect(Object.keys(env.receipt).at(-1)).toBe("approval");
    expect(canonicalReceipt(env.receipt)).toBe(canonicalJson(env.receipt));
    expect(Buffer.from(env.payload, "base64url").toString("utf8")).toBe(canonicalJson(env.receipt));
    const { approval: _, ...v1 } = fields();
    expect(desk.sign(v1).receipt.v).toBe(1);
  });

  test("it refuses an approval that does not bind the call, naming why", () => {
    const refused = (over: Partial<ReceiptFields>) => () => desk.sign(fields(over));
    expect(refused({ params_sha256: paramsSha256({ q: "other" }) })).toThrow("approval: the decision is on another call (params_sha256 differ)");
    expect(refused({ tool: "wx__other" })).toThrow("(tool differ)");
    expect(refused({ price_mc: 150_001, amount_mc: 150_001 })).toThrow("(price_mc differ)");
    expect(refused({ key_id: "key_2" })).toThrow("(key_id differ)");
    expect(refused({ org_id: "org_2" })).toThrow("(org_id differ)");
    expect(refused({ approval: decision({ decision: "denied" }) })).toThrow("the decision is denied, and a receipt charged needs one approved");
    expect(refused({ outcome: "refunded_denied", amount_mc: 0, result_sha256: null })).toThrow(
      "the decision is approved, and a receipt refunded_denied needs one denied",
    );
    expect(refused({ approval: decision({ verb: "pay", ref: "demo-3e40a688", spend: null }) })).toThrow("the decision is on a pay ask");
    expect(refused({ issued_at: "2026-11-30T08:59:59.999Z" })).toThrow("the decision was made after the receipt was issued");
    expect(refused({ approval: { ...decision(), kid: "someone" } })).toThrow("approval: the signed kid differs from the envelope kid");
    expect(refused({ approval: { ...decision(), payload: "eyJ9" } })).toThrow(ReceiptInvalidError);
  });

  test("denials and expiries are refunded receipts of version 2 only", () => {
    const denied = desk.sign(
      fields({ outcome: "refunded_denied", http_status: 403, amount_mc: 0, result_sha256: null, approval: decision({ decision: "denied" }) }),
    );
    expect(denied.receipt).toMatchObject({ v: 2, outcome: "refunded_denied" });
    const { approval: _, ...v1 } = fields({ outcome: "refunded_denied", amount_mc: 0, result_sha256: null });
    expect(() => desk.sign(v1)).toThrow("outcome: a denial or an expiry needs a receipt of version 2");
  });
});

describe("the readers", () => {
  const v2 = desk.sign(fields()).receipt as Record<string, unknown>;
  test("a version 2 receipt needs its approval, a version 1 receipt has none", () => {
    expect(receiptProblem(v2)).toBeNull();
    const { approval: _, ...noApproval } = v2;
    expect(receiptProblem(noApproval)).toBe("approval: missing");
    expect(receiptProblem({ ...noApproval, v: 1, approval: v2.approval })).toBe("approval: unknown field");
    expect(receiptProblem({ ...v2, v: 3 })).toBe("v: invalid value");
    expect(receiptProblem({ ...v2, approval: { ...(v2.approval as object), extra: 1 } })).toBe("approval: invalid value");
    expect(receiptProblem({ ...v2, approval: { ...(v2.approval as object), signature: "short" } })).toBe("approval: invalid value");
  });

  test("verifyResponse checks both signatures and the binding; without the approver's keys it fails", () => {
    const body = { result: RESULT, receipt: desk.sign(fields()) };
    expect(verifyResponse(body, DESK_JWKS, ARGS, APPROVER_JWKS).map(describeCheck)).toEqual([
      `ok   signature (kid ${desk.kid})`,
      "ok   readable copy",
      "ok   result (matches result_sha256)",
      "ok   params (matches params_sha256)",
      `ok   approver signature (kid ${TEST_KEY.kid})`,
      "ok   approval (K7Q2M4XZ3A approved by a person, for this call (seq 1))",
    ]);
    const without = verifyResponse(body, DESK_JWKS, ARGS);
    expect(without.filter((c) => !c.ok).map((c) => c.name)).toEqual(["approver_signature", "approval"]);
    // The desk's keys are not the approver's: a decision checked with them fails.
    expect(
      verifyResponse(body, DESK_JWKS, ARGS, DESK_JWKS)
        .filter((c) => !c.ok)
        .map((c) => c.name),
    ).toEqual(["approver_signature", "approval"]);
  });

  test("a version 1 receipt calls for no approval check", () => {
    const { approval: _, ...v1 } = fields();
    expect(approvalChecks(desk.sign(v1).receipt as Receipt, ReceiptKeys.fromJwks(APPROVER_JWKS))).toEqual([]);
  });
});

describe("the browser's verifier", () => {
  test("it says it cannot check the decision, and the receipt does not pass there", async () => {
    const keys = await importJwksWeb(DESK_JWKS);
    const checks = await verifyResponseWeb({ result: RESULT, receipt: desk.sign(fields()) }, keys, ARGS);
    expect(checks.map(describeCheck).at(-1)).toBe("FAILED approval: not checked here: verify the receipt with ask-only verify-receipt --approver-keys");
    expect(checks.slice(0, -1).every((c) => c.ok)).toBe(true);
  });

  test("on the decision vectors it never passes what the library fails", async () => {
    const keys = await importJwksWeb(JSON.parse(readFileSync(VECTOR_JWKS, "utf8")));
    for (const v of readVectors(DECISION_VECTOR_DIR).filter((x) => x.name.startsWith("receipt-"))) {
      const checks = await verifyResponseWeb(JSON.parse(v.body), keys, v.args === undefined ? undefined : JSON.parse(v.args));
      expect({ name: v.name, passes: checks.every((c) => c.ok) }).toEqual({ name: v.name, passes: false });
    }
  });
});

describe("a receipt stored once (payload and signature)", () => {
  test("the envelope derived from what is stored is the signer's, byte for byte, in version 1 and 2", () => {
    const { approval: _, ...v1 } = fields();
    for (const env of [
      desk.sign(fields()),
      desk.sign({ ...v1, tool: 'wx__\u00e9t\u00e9 "q"\n', outcome: "refused_budget", amount_mc: 0, result_sha256: null }),
    ]) {
      const stored = signedOf(env);
      expect(stored.signature).toHaveLength(64);
      expect(envelopeText(stored)).toBe(JSON.stringify(env));
      expect(readableReceipt(stored.payload)).toEqual(env.receipt);
    }
  });

  test("desk check's reading of a stored receipt (openStored) gives what the derived envelope gives, on good and broken rows", () => {
    const keys = ReceiptKeys.fromJwks(DESK_JWKS);
    const other = loadSigner(generateSigningKey().privatePem);
    const { approval: _, ...v1 } = fields();
    const good = signedOf(desk.sign(fields()));
    const rows = [
      good,
      signedOf(desk.sign({ ...v1, tool: 'wx__\u00e9t\u00e9 "q"\n', outcome: "refused_budget", amount_mc: 0, result_sha256: null })),
      { ...good, payload: good.payload.replace('"price_mc":150000', '"price_mc":1') },
      { ...good, payload: ` ${good.payload}` },
      { ...good, payload: good.payload.replace('"v":2', '"v":1') },
      { ...good, signature: new Uint8Array(64) },
      { ...good, signature: good.signature.subarray(0, 63) },
      signedOf(other.sign(fields())),
    ];
    for (const row of rows) {
      const derived = openEnvelope(JSON.parse(envelopeText(row)), keys);
      expect(openStored(row, keys)).toEqual(derived);
    }
    expect(rows.map((row) => openStored(row, keys).checks.every((c) => c.ok))).toEqual([true, true, false, false, false, false, false, false]);
    // A payload that is not JSON has no derived envelope at all: it fails, and is not read.
    expect(openStored({ ...good, payload: "{not json" }, keys)).toMatchObject({
      signed: null,
      payloadSha256: null,
      checks: [{ name: "signature", ok: false }, {}],
    });
  });

  test("a changed payload or signature derives an envelope that fails its checks", () => {
    const stored = signedOf(desk.sign(fields()));
    const forged = { ...stored, payload: stored.payload.replace('"price_mc":150000', '"price_mc":1') };
    const failed = (s: typeof stored) =>
      openEnvelope(JSON.parse(envelopeText(s)), ReceiptKeys.fromJwks(DESK_JWKS))
        .checks.filter((c) => !c.ok)
        .map((c) => c.name);
    expect(failed(stored)).toEqual([]);
    expect(failed(forged)).toContain("signature");
    expect(failed({ ...stored, signature: new Uint8Array(64) })).toContain("signature");
  });
});
