// Statements: figures computed from signed receipts and budget records, checked against sums
// worked out by hand; the signed document; the verifier on good and damaged exports; and a
// property test: random histories verify, and any single mutation fails.
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { type OrgRecord, openOrgRecord, orgChainProblems, orgRecordProblem, signOrgRecord } from "../../src/core/finance/org-records.ts";
import {
  computeStatement,
  parseStatementPeriod,
  type Statement,
  StatementError,
  type StatementFields,
  signStatement,
  statementProblem,
} from "../../src/core/finance/statement.ts";
import { verifyStatement } from "../../src/core/finance/statement-verify.ts";
import { generateSigningKey, jwksOf, loadSigner, ReceiptKeys, sha256Hex } from "../../src/core/receipt/index.ts";
import { exportLines, type HistoryEvent, orgHistory } from "../helpers/org-history.ts";

const key = generateSigningKey();
const signer = loadSigner(key.privatePem);
const jwks = jwksOf(key.publicJwk);
const keys = ReceiptKeys.fromJwks(jwks);
const ORG = "org_0123456789abcdef";
const A = "key_aaaaaaaaaaaaaaaa";
const B = "key_bbbbbbbbbbbbbbbb";

// A prepaid organization (reset none), two keys, October to December 2026.
const EVENTS: HistoryEvent[] = [
  { kind: "record", at: "2026-10-01T00:00:00.000Z", type: "budget_set", budget: 100_000 },
  { kind: "receipt", key: A, at: "2026-10-15T10:00:00.000Z", outcome: "charged", tool: "t1", price: 10_000, upstream: 2_000 },
  { kind: "receipt", key: B, at: "2026-11-01T00:00:00.000Z", outcome: "charged", tool: "t2", price: 5_000, upstream: 6_000 },
  { kind: "receipt", key: A, at: "2026-11-05T08:00:00.000Z", outcome: "refunded_timeout", tool: "t1", price: 3_000, upstream: 2_000 },
  { kind: "record", at: "2026-11-10T09:30:00.000Z", type: "topup", amount: 50_000, reference: "stripe:cs_test_123" },
  { kind: "receipt", key: A, at: "2026-11-20T12:00:00.000Z", outcome: "refused_budget", tool: "t1", price: 1_000, upstream: 500 },
  { kind: "receipt", key: B, at: "2026-11-30T23:59:59.999Z", outcome: "charged", tool: "t1", price: 2_000, upstream: 500 },
  { kind: "receipt", key: A, at: "2026-12-01T00:00:00.000Z", outcome: "charged", tool: "t1", price: 1_000, upstream: 500 },
  { kind: "record", at: "2026-12-02T00:00:00.000Z", type: "topup", amount: 20_000 },
];
const prepaid = orgHistory(signer, ORG, "none", { [A]: "daily", [B]: "monthly" }, EVENTS);

function statementOf(h: typeof prepaid, period: string, issued_at: string): StatementFields {
  return computeStatement({ id: "stmt_0000000000000001", org_id: h.orgId, period, issued_at, records: h.records, receipts: h.receipts });
}

describe("periods", () => {
  test("YYYY-MM and real YYYY-MM-DD dates, with their UTC start and end", () => {
    expect(parseStatementPeriod("2026-11")).toEqual({ period: "2026-11", kind: "month", start: "2026-11-01T00:00:00.000Z", end: "2026-12-01T00:00:00.000Z" });
    expect(parseStatementPeriod("2026-12")?.end).toBe("2027-01-01T00:00:00.000Z");
    expect(parseStatementPeriod("2028-02-29")).toEqual({
      period: "2028-02-29",
      kind: "day",
      start: "2028-02-29T00:00:00.000Z",
      end: "2028-03-01T00:00:00.000Z",
    });
    for (const bad of ["2026-13", "2026-02-30", "2027-02-29", "2026-1", "2026-11-1", "none", "2026-11-01T00"]) expect(parseStatementPeriod(bad)).toBeNull();
  });
});

describe("the figures, against sums worked out by hand", () => {
  test("a closed month of a prepaid organization", () => {
    const s = statementOf(prepaid, "2026-11", "2026-12-05T00:00:00.000Z");
    const [, r2, r3, r4, r5] = prepaid.receipts.map((r) => r.receipt);
    expect(s).toMatchObject({
      period_start: "2026-11-01T00:00:00.000Z",
      period_end: "2026-12-01T00:00:00.000Z",
      covers_until: "2026-12-01T00:00:00.000Z",
      closed: true,
      reset: "none",
      opening_budget_mc: 100_000,
      closing_budget_mc: 150_000,
      opening_balance_mc: 90_000, // 100,000 − October's 10,000
      closing_balance_mc: 133_000, // 90,000 + 50,000 − 7,000
      topups: { count: 1, amount_mc: 50_000 },
      budget_changes: { count: 0, raised_mc: 0, lowered_mc: 0 },
      charges: { calls: 2, amount_mc: 7_000, upstream_cost_mc: 6_500, margin_mc: 500 },
      refunds: { calls: 1, price_mc: 3_000 },
      refusals: { calls: 1 },
      receipts: { count: 4, first: { id: r2!.id, issued_at: "2026-11-01T00:00:00.000Z" }, last: { id: r5!.id, issued_at: "2026-11-30T23:59:59.999Z" } },
    });
    expect(s.tools).toEqual([
      {
        tool: "t1",
        calls: 3,
        charged_calls: 1,
        charged_mc: 2_000,
        upstream_cost_mc: 500,
        margin_mc: 1_500,
        refunded_calls: 1,
        refunded_price_mc: 3_000,
        refused_calls: 1,
      },
      {
        tool: "t2",
        calls: 1,
        charged_calls: 1,
        charged_mc: 5_000,
        upstream_cost_mc: 6_000,
        margin_mc: -1_000,
        refunded_calls: 0,
        refunded_price_mc: 0,
        refused_calls: 0,
      },
    ]);
    // Key A's head is its November refusal (seq 3): its December charge (seq 4) is after the period.
    expect(s.chains).toEqual([
      { key_id: A, seq: 3, sha256: prepaid.receipts[4 - 1]!.payloadSha256 },
      { key_id: B, seq: 2, sha256: prepaid.receipts[5 - 1]!.payloadSha256 },
    ]);
    expect(r3!.outcome).toBe("refunded_timeout");
    expect(r4!.outcome).toBe("refused_budget");
    expect(s.records.map((r) => r.record.seq)).toEqual([1, 2]);
  });

  test("an open month covers until the statement's time and says so", () => {
    const s = statementOf(prepaid, "2026-11", "2026-11-15T12:00:00.000Z");
    expect(s).toMatchObject({
      covers_until: "2026-11-15T12:00:00.000Z",
      closed: false,
      closing_budget_mc: 150_000,
      closing_balance_mc: 135_000, // 150,000 − 10,000 − 5,000
      charges: { calls: 1, amount_mc: 5_000, upstream_cost_mc: 6_000, margin_mc: -1_000 },
      receipts: { count: 2 },
    });
    expect(s.chains.map((c) => [c.key_id, c.seq])).toEqual([
      [A, 2],
      [B, 1],
    ]);
  });

  test("a monthly budget opens each month in full; a day of it opens with the month's charges so far", () => {
    const h = orgHistory(signer, ORG, "monthly", {}, [
      { kind: "record", at: "2026-10-01T00:00:00.000Z", type: "budget_set", budget: 100_000 },
      { kind: "receipt", key: A, at: "2026-10-20T00:00:00.000Z", outcome: "charged", tool: "t1", price: 30_000, upstream: 0 },
      { kind: "receipt", key: A, at: "2026-11-03T00:00:00.000Z", outcome: "charged", tool: "t1", price: 10_000, upstream: 0 },
      { kind: "record", at: "2026-11-04T00:00:00.000Z", type: "budget_set", budget: 80_000 },
      { kind: "receipt", key: A, at: "2026-11-05T10:00:00.000Z", outcome: "charged", tool: "t1", price: 4_000, upstream: 0 },
    ]);
    expect(statementOf(h, "2026-11", "2026-12-01T00:00:00.000Z")).toMatchObject({
      opening_balance_mc: 100_000,
      closing_balance_mc: 66_000, // 80,000 − 14,000
      budget_changes: { count: 1, raised_mc: 0, lowered_mc: 20_000 },
    });
    expect(statementOf(h, "2026-11-05", "2026-11-06T00:00:00.000Z")).toMatchObject({
      opening_budget_mc: 80_000,
      opening_balance_mc: 70_000, // 80,000 − the 10,000 of 3 November
      closing_balance_mc: 66_000,
      charges: { amount_mc: 4_000 },
    });
  });

  test("an organization without a budget: balances null; a daily budget refuses a monthly statement", () => {
    const h = orgHistory(signer, ORG, "none", {}, [
      { kind: "receipt", key: A, at: "2026-11-03T00:00:00.000Z", outcome: "charged", tool: "t1", price: 700, upstream: 100 },
    ]);
    expect(statementOf(h, "2026-11", "2026-12-01T00:00:00.000Z")).toMatchObject({
      reset: null,
      opening_budget_mc: null,
      opening_balance_mc: null,
      closing_balance_mc: null,
      charges: { calls: 1, amount_mc: 700 },
    });
    const daily = orgHistory(signer, ORG, "daily", {}, [{ kind: "record", at: "2026-10-01T00:00:00.000Z", type: "budget_set", budget: 1_000 }]);
    expect(() => statementOf(daily, "2026-11", "2026-12-01T00:00:00.000Z")).toThrow(StatementError);
    expect(statementOf(daily, "2026-11-02", "2026-12-01T00:00:00.000Z").opening_balance_mc).toBe(1_000);
    expect(() => statementOf(prepaid, "2026-11", "2026-10-31T00:00:00.000Z")).toThrow("the period has not begun");
  });
});

describe("budget records", () => {
  test("a top-up record reads strictly and opens under the JWKS", () => {
    const topup = prepaid.records[1]!.envelope;
    expect(topup.record).toMatchObject({
      v: 1,
      type: "topup",
      org_id: ORG,
      amount_mc: 50_000,
      budget_mc: 150_000,
      reference: "stripe:cs_test_123",
      seq: 2,
      kid: signer.kid,
    });
    expect(Object.keys(topup.record)).toEqual([
      "v",
      "type",
      "id",
      "kid",
      "issued_at",
      "org_id",
      "amount_mc",
      "budget_mc",
      "reset",
      "reference",
      "seq",
      "prev_sha256",
    ]);
    expect(openOrgRecord(topup, keys)).toMatchObject({ ok: true });
    const tampered = { ...topup, record: { ...topup.record, amount_mc: 60_000 } };
    expect(openOrgRecord(tampered, keys)).toEqual({ ok: false, problem: "the readable record differs from the signed payload" });
    expect(openOrgRecord(topup, ReceiptKeys.fromJwks(jwksOf(generateSigningKey().publicJwk)))).toEqual({
      ok: false,
      problem: "unknown kid (not in the key set)",
    });
    for (const bad of [
      { ...topup.record, amount_mc: 0 },
      { ...topup.record, reference: "has space" },
      { ...topup.record, reference: null },
      { ...topup.record, extra: 1 },
      { ...topup.record, type: "refund" },
      { ...topup.record, seq: 1 },
    ]) {
      expect(orgRecordProblem(bad)).not.toBeNull();
    }
    expect(() => signOrgRecord(signer, { ...topup.record, amount_mc: -5 })).toThrow(RangeError);
  });

  test("the org chain: seq and hashes, one org, time forward, one reset, a budget first, top-ups that add up, each reference once", () => {
    const opened = prepaid.records.map((r) => ({ record: r.record, payloadSha256: sha256Hex(Buffer.from(r.envelope.payload, "base64url")) }));
    expect(orgChainProblems(opened, ORG)).toEqual([]);
    const [first, second, third] = opened as [(typeof opened)[0], (typeof opened)[0], (typeof opened)[0]];
    const bent = (patch: Record<string, unknown>) => ({ record: { ...second.record, ...patch } as typeof second.record, payloadSha256: second.payloadSha256 });
    expect(orgChainProblems([first, third], ORG)).toEqual([
      "records[1] (seq 3): expected seq 2 (a record is missing or out of order)",
      "records[1] (seq 3): budget_mc 170000 is not 100000 + 20000",
    ]);
    expect(orgChainProblems([first, bent({ budget_mc: 150_001 })], ORG)).toEqual(["records[1] (seq 2): budget_mc 150001 is not 100000 + 50000"]);
    expect(orgChainProblems([first, bent({ reset: "monthly" })], ORG)).toEqual([
      "records[1] (seq 2): reset changes from none to monthly (it is fixed with the first record)",
    ]);
    expect(orgChainProblems([first, bent({ issued_at: "2026-09-01T00:00:00.000Z" })], ORG)).toEqual(["records[1] (seq 2): issued_at goes back before seq 1"]);
    expect(orgChainProblems([first, bent({ prev_sha256: "0".repeat(64) })], ORG)).toEqual(["records[1] (seq 2): prev_sha256 differs from the hash of seq 1"]);
    expect(orgChainProblems([first, second], "org_zzzzzzzzzzzzzzzz")).toHaveLength(2);
    expect(orgChainProblems([{ ...second, record: { ...second.record, seq: 1, prev_sha256: null } }], ORG)).toEqual([
      "records[0] (seq 1): the first record of an organization sets its budget",
    ]);
    const again = { ...third, record: { ...third.record, reference: second.record.type === "topup" ? second.record.reference : "" } as typeof third.record };
    expect(orgChainProblems([first, second, again], ORG)).toEqual(["records[2] (seq 3): reference used by an earlier top-up"]);
  });

  test("a receipt's signature is never a record's, nor the reverse", () => {
    const receipt = prepaid.envelopes[0]!;
    expect(openOrgRecord({ ...receipt, record: receipt.receipt }, keys).ok).toBe(false);
  });
});

describe("the verifier", () => {
  const closedAt = "2026-12-05T00:00:00.000Z";
  const signedNov = signStatement(signer, statementOf(prepaid, "2026-11", closedAt));
  const lines = exportLines(prepaid.envelopes);
  const problemsOf = (v: ReturnType<typeof verifyStatement>) => v.checks.flatMap((c) => c.problems);

  test("a statement and the full export: every check passes", () => {
    const v = verifyStatement(signedNov, jwks, lines);
    expect(v.checks.map((c) => [c.name, c.ok, c.detail])).toEqual([
      ["signature", true, `kid ${signer.kid}`],
      ["records", true, "2 budget record(s), chain intact"],
      ["receipts", true, "6 receipt(s) of 2 key(s) verify"],
      ["chains", true, "2 chain(s) intact from seq 1"],
      ["figures", true, "every figure matches the receipts (2026-11, closed)"],
    ]);
    expect(v.ok).toBe(true);
    const open = verifyStatement(signStatement(signer, statementOf(prepaid, "2026-11", "2026-11-15T12:00:00.000Z")), jwks, lines);
    expect(open.ok).toBe(true);
    expect(open.checks[4]!.detail).toContain("OPEN: the period had not ended");
  });

  test("one receipt removed from the export fails, with a precise message", () => {
    // A middle one: the chain shows the gap and the figures the charge it held.
    const noMiddle = verifyStatement(
      signedNov,
      jwks,
      lines.filter((_, i) => i !== 1),
    );
    expect(noMiddle.ok).toBe(false);
    expect(problemsOf(noMiddle)).toEqual(
      expect.arrayContaining([
        `key ${B}: seq 1 is missing from the export (before line 4)`,
        "charges.amount_mc: the statement says 7000, the receipts give 2000",
        "tools[t2]: in the statement, not in the receipts",
      ]),
    );
    // The last of a key in the period: no gap, but its head and its figures differ.
    const noHead = verifyStatement(
      signedNov,
      jwks,
      lines.filter((_, i) => i !== 4),
    );
    expect(noHead.checks.find((c) => c.name === "chains")!.ok).toBe(true);
    expect(problemsOf(noHead)).toEqual(
      expect.arrayContaining([
        `chains[${B}].seq: the statement says 2, the receipts give 1`,
        "charges.amount_mc: the statement says 7000, the receipts give 5000",
      ]),
    );
    // One from before the period: the opening balance needs it.
    const noOctober = verifyStatement(
      signedNov,
      jwks,
      lines.filter((_, i) => i !== 0),
    );
    expect(problemsOf(noOctober)).toEqual(expect.arrayContaining(["opening_balance_mc: the statement says 90000, the receipts give 100000"]));
  });

  test("one figure changed (and the statement signed again) fails at exactly that figure", () => {
    const s = structuredClone(signedNov.statement) as Statement;
    s.tools[0]!.upstream_cost_mc += 1;
    const { v: _v, type: _t, kid: _k, ...fields } = s;
    const v = verifyStatement(signStatement(signer, fields), jwks, lines);
    expect(v.checks.map((c) => c.ok)).toEqual([true, true, true, true, false]);
    expect(problemsOf(v)).toEqual(["tools[t1].upstream_cost_mc: the statement says 501, the receipts give 500"]);
  });

  test("a reader's problem never carries a control character from the file to the terminal", () => {
    const problem = statementProblem({ ...signedNov.statement, closed: "\u001b[2J\u202e" });
    expect(problem).toContain("closed");
    expect(problem).not.toMatch(/[\u0000-\u001f\u007f-\uffff]/);
    expect(orgRecordProblem({ ...prepaid.records[0]!.record, org_id: 7, reset: "\u001b]0;x\u0007" })).not.toMatch(/[\u0000-\u001f\u007f-\uffff]/);
  });

  test("a statement changed without its signature fails the signature, and nothing else is called checked", () => {
    const v = verifyStatement({ ...signedNov, statement: { ...signedNov.statement, closing_balance_mc: 1 } }, jwks, lines);
    expect(v.checks.map((c) => [c.name, c.ok])).toEqual([
      ["signature", false],
      ["records", false],
      ["receipts", false],
      ["chains", false],
      ["figures", false],
    ]);
    expect(v.checks[0]!.detail).toBe("the readable statement differs from the signed payload");
    expect(verifyStatement(signedNov, jwksOf(generateSigningKey().publicJwk), lines).checks[0]!.detail).toBe("unknown kid (not in the key set)");
  });

  test("other organizations' receipts and receipts after the period are ignored; a forged or repeated line is not", () => {
    const other = orgHistory(signer, "org_zzzzzzzzzzzzzzzz", "none", {}, [
      { kind: "receipt", key: "key_cccccccccccccccc", at: "2026-11-02T00:00:00.000Z", outcome: "charged", tool: "t1", price: 9, upstream: 0 },
    ]);
    const mixed = [...exportLines(other.envelopes), ...lines];
    const v = verifyStatement(signedNov, jwks, mixed);
    expect(v.ok).toBe(true);
    expect(v.checks[2]!.detail).toBe("6 receipt(s) of 2 key(s) verify; 1 of other organizations ignored");

    const forged = structuredClone(lines) as { receipt: { amount_mc: number } }[];
    forged[1]!.receipt.amount_mc = 1;
    expect(problemsOf(verifyStatement(signedNov, jwks, forged))).toContain("line 2: readable copy: differs from signed payload at amount_mc");
    expect(problemsOf(verifyStatement(signedNov, jwks, [...lines, lines[2]]))).toContain(`key ${A}: seq 2 appears twice (line 7)`);
  });

  test("budget records: a damaged embedded record, or a held top-up the statement left out, fails", () => {
    const s = structuredClone(signedNov.statement) as Statement;
    s.records[1] = { ...s.records[1]!, record: { ...s.records[1]!.record, amount_mc: 1 } as OrgRecord };
    const { v: _v, type: _t, kid: _k, ...fields } = s;
    expect(problemsOf(verifyStatement(signStatement(signer, fields), jwks, lines))).toContain(
      "records[1]: the readable record differs from the signed payload",
    );

    const missing = signOrgRecord(signer, {
      ...prepaid.records[1]!.record,
      id: "orec_elsewhere",
      issued_at: "2026-11-11T00:00:00.000Z",
      reference: "stripe:cs_other",
    });
    expect(problemsOf(verifyStatement(signedNov, jwks, lines, [missing]))).toEqual([
      "held record 1 (seq 2, orec_elsewhere): issued before 2026-12-01T00:00:00.000Z but not in the statement",
    ]);
    expect(verifyStatement(signedNov, jwks, lines, [prepaid.records[1]!.envelope]).ok).toBe(true);
  });
});

describe("property: random histories verify, and any single mutation fails", () => {
  const KEYS = [A, B, "key_cccccccccccccccc"];
  const OUTCOMES = [
    "charged",
    "charged",
    "charged",
    "refunded_upstream_error",
    "refunded_timeout",
    "refused_budget",
    "refused_not_allowed",
    "refunded_abandoned",
  ] as const;
  const START = Date.parse("2026-10-20T00:00:00.000Z");
  const SPAN = 45 * 86_400_000;

  const eventArb = fc.oneof(
    {
      weight: 6,
      arbitrary: fc.record({
        kind: fc.constant("receipt" as const),
        key: fc.constantFrom(...KEYS),
        outcome: fc.constantFrom(...OUTCOMES),
        tool: fc.constantFrom("t1", "t2", "t3"),
        price: fc.integer({ min: 0, max: 5000 }),
        upstream: fc.integer({ min: 0, max: 3000 }),
        t: fc.integer({ min: 0, max: SPAN }),
      }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant("topup" as const), amount: fc.integer({ min: 1, max: 50_000 }), t: fc.integer({ min: 0, max: SPAN }) }),
    },
    {
      weight: 1,
      arbitrary: fc.record({ kind: fc.constant("set" as const), budget: fc.integer({ min: 0, max: 200_000 }), t: fc.integer({ min: 0, max: SPAN }) }),
    },
  );

  const historyArb = fc.record({
    reset: fc.constantFrom("none" as const, "monthly" as const, "daily" as const),
    events: fc.array(eventArb, { minLength: 1, maxLength: 40 }),
    daily: fc.boolean(),
    issuedOffset: fc.integer({ min: 0, max: SPAN + 86_400_000 }),
  });

  function build(h: typeof historyArb extends fc.Arbitrary<infer T> ? T : never) {
    const sorted = [...h.events].sort((x, y) => x.t - y.t);
    const events: HistoryEvent[] = [{ kind: "record", at: new Date(START - 86_400_000).toISOString(), type: "budget_set", budget: 100_000 }];
    for (const e of sorted) {
      const at = new Date(START + e.t).toISOString();
      if (e.kind === "receipt") events.push({ kind: "receipt", key: e.key, at, outcome: e.outcome, tool: e.tool, price: e.price, upstream: e.upstream });
      else if (e.kind === "topup") events.push({ kind: "record", at, type: "topup", amount: e.amount });
      else events.push({ kind: "record", at, type: "budget_set", budget: e.budget });
    }
    const history = orgHistory(signer, ORG, h.reset, {}, events);
    const issuedAt = new Date(START + h.issuedOffset).toISOString();
    // A daily budget has daily statements only.
    const period = h.daily || h.reset === "daily" ? issuedAt.slice(0, 10) : "2026-11";
    const issued = issuedAt < `${period.length === 7 ? "2026-11-01" : period}T00:00:00.000Z` ? "2026-12-20T00:00:00.000Z" : issuedAt;
    const fields = computeStatement({ id: "stmt_prop", org_id: ORG, period, issued_at: issued, records: history.records, receipts: history.receipts });
    return { history, fields, envelope: signStatement(signer, fields) };
  }

  test("compute → sign → verify passes, with or without the receipts after the statement; the balance identity holds", () => {
    fc.assert(
      fc.property(historyArb, (h) => {
        const { history, fields, envelope } = build(h);
        const v = verifyStatement(envelope, keys, exportLines(history.envelopes));
        if (!v.ok) return false;
        const heads = new Map(fields.chains.map((c) => [c.key_id, c.seq]));
        const covered = history.envelopes.filter((e) => e.receipt.seq <= (heads.get(e.receipt.key_id) ?? 0));
        if (!verifyStatement(envelope, keys, exportLines(covered)).ok) return false;
        if (fields.opening_balance_mc === null || fields.closing_balance_mc === null) return true;
        const { topups, budget_changes: b, charges } = fields;
        return fields.closing_balance_mc === fields.opening_balance_mc + topups.amount_mc + b.raised_mc - b.lowered_mc - charges.amount_mc;
      }),
      { numRuns: 60 },
    );
  });

  test("removing any receipt the statement covers fails", () => {
    fc.assert(
      fc.property(historyArb, fc.nat(), (h, pick) => {
        const { history, envelope } = build(h);
        const heads = new Map(envelope.statement.chains.map((c) => [c.key_id, c.seq]));
        const inScope = history.envelopes.map((e, i) => [e, i] as const).filter(([e]) => e.receipt.seq <= (heads.get(e.receipt.key_id) ?? 0));
        fc.pre(inScope.length > 0);
        const drop = inScope[pick % inScope.length]![1];
        return !verifyStatement(envelope, keys, exportLines(history.envelopes.filter((_, i) => i !== drop))).ok;
      }),
      { numRuns: 60 },
    );
  });

  test("changing any figure (and signing again) fails, naming that figure", () => {
    type Leaf = { path: (string | number)[]; value: number | boolean | null };
    const leaves = (value: unknown, path: (string | number)[] = []): Leaf[] => {
      if (typeof value === "number" || typeof value === "boolean" || value === null) return [{ path, value }];
      if (Array.isArray(value)) return value.flatMap((v, i) => leaves(v, [...path, i]));
      if (typeof value === "object") return Object.entries(value as object).flatMap(([k, v]) => leaves(v, [...path, k]));
      return [];
    };
    fc.assert(
      fc.property(historyArb, fc.nat(), (h, pick) => {
        const { history, fields } = build(h);
        const { records: _r, id: _i, ...figures } = fields;
        const all = leaves(figures);
        const leaf = all[pick % all.length]!;
        const changed = structuredClone(fields) as unknown as Record<string | number, unknown>;
        let at: Record<string | number, unknown> = changed;
        for (const step of leaf.path.slice(0, -1)) at = at[step] as Record<string | number, unknown>;
        const last = leaf.path[leaf.path.length - 1]!;
        at[last] = typeof leaf.value === "boolean" ? !leaf.value : leaf.value === null ? 0 : leaf.value + 1;
        let envelope: ReturnType<typeof signStatement>;
        try {
          envelope = signStatement(signer, changed as unknown as StatementFields);
        } catch (err) {
          // A change the signer refuses (a count made negative, a null reset made 0) never becomes a statement.
          return err instanceof StatementError;
        }
        const v = verifyStatement(envelope, keys, exportLines(history.envelopes));
        const top = String(leaf.path[0]);
        return !v.ok && v.checks.flatMap((c) => c.problems).some((p) => p.startsWith(top));
      }),
      { numRuns: 150 },
    );
  });
});
