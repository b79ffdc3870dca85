// The audit log's answer (core/desk/audit-log.ts): a receipted call's entry read out of its
// signed payload, the merge of the two branches in one fixed order, and what desk check says of
// an audit row kept beside its receipt.
import { describe, expect, test } from "bun:test";
import { auditOfReceipt, keptAuditProblem, mergeAudit } from "../../src/core/desk/audit-log.ts";
import type { AuditEntry } from "../../src/core/desk/records.ts";
import { canonicalJson } from "../../src/core/receipt/index.ts";

const T0 = Date.parse("2026-11-30T10:00:00.000Z");

const payload = (fields: Record<string, unknown> = {}) =>
  canonicalJson({
    v: 1,
    id: "rcpt_1",
    kid: "k",
    issued_at: new Date(T0).toISOString(),
    org_id: "org_a",
    key_id: "key_a",
    tool: "up__echo",
    outcome: "charged",
    http_status: 200,
    price_mc: 1_000,
    amount_mc: 1_000,
    upstream_cost_mc: 400,
    remaining_mc: 0,
    period: "none",
    params_sha256: "a".repeat(64),
    result_sha256: "b".repeat(64),
    seq: 1,
    prev_sha256: null,
    ...fields,
  });

const entry = (at: number, receiptId: string | null, outcome: AuditEntry["outcome"] = "charged"): AuditEntry => ({
  at,
  orgId: "org_a",
  keyId: "key_a",
  tool: "up__echo",
  outcome,
  httpStatus: 200,
  priceMc: 1_000,
  upstreamCostMc: 400,
  marginMc: outcome === "charged" ? 600 : 0,
  receiptId,
});

describe("a receipted call's entry", () => {
  test("every column from the payload, at the receipt's issue time; the margin only when charged", () => {
    expect(auditOfReceipt(payload(), T0)).toEqual(entry(T0, "rcpt_1"));
    expect(auditOfReceipt(payload({ outcome: "refunded_upstream_error", http_status: 502, amount_mc: 0, result_sha256: null }), T0 + 5)).toEqual({
      ...entry(T0 + 5, "rcpt_1", "refunded_upstream_error"),
      httpStatus: 502,
    });
  });
});

describe("the merge", () => {
  test("by at; at one millisecond the receipt's entry first; each branch in its own order; cut to the limit", () => {
    const signed = [entry(1, "r1"), entry(3, "r3"), entry(3, "r3b"), entry(9, "r9")];
    const table = [entry(0, null), entry(3, null), entry(4, null)];
    const ids = (es: AuditEntry[]) => es.map((e) => e.receiptId ?? `t${e.at}`);
    expect(ids(mergeAudit(signed, table, 100))).toEqual(["t0", "r1", "r3", "r3b", "t3", "t4", "r9"]);
    expect(ids(mergeAudit(signed, table, 4))).toEqual(["t0", "r1", "r3", "r3b"]);
    expect(ids(mergeAudit([], table, 2))).toEqual(["t0", "t3"]);
    // A clock that stepped back in one branch: its order is kept, the merge still fixed.
    expect(ids(mergeAudit([entry(5, "r5"), entry(2, "r2")], [entry(3, null)], 10))).toEqual(["t3", "r5", "r2"]);
  });
});

describe("desk check of a kept audit row", () => {
  const receipt = { payload: payload(), issuedAt: T0 };
  test("stamped at or before its receipt and otherwise the same: nothing to say", () => {
    expect(keptAuditProblem({ entry: entry(T0, "rcpt_1"), receipt })).toBeNull();
    expect(keptAuditProblem({ entry: entry(T0 - 3, "rcpt_1"), receipt })).toBeNull();
  });
  test("each column that differs is named; a stamp after the receipt, and a missing receipt, too", () => {
    expect(keptAuditProblem({ entry: { ...entry(T0, "rcpt_1"), marginMc: 7, tool: "up__\u202eother" }, receipt })).toBe(
      'audit row of receipt rcpt_1: tool "up__\\u{202e}other", its receipt derives "up__echo"; margin_mc 7, its receipt derives 600',
    );
    expect(keptAuditProblem({ entry: entry(T0 + 1, "rcpt_1"), receipt })).toBe(
      "audit row of receipt rcpt_1: at 2026-11-30T10:00:00.001Z, after its receipt was issued at 2026-11-30T10:00:00.000Z",
    );
    expect(keptAuditProblem({ entry: entry(T0, "rcpt_gone"), receipt: null })).toBe("audit row of receipt rcpt_gone: no such receipt");
  });
});
