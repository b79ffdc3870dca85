// The decision vectors (test/vectors/decisions/) against the library: the approver's decision
// records, their export and chain, and desk receipts of version 2 carrying a decision. The same
// files go through the binary in test/e2e/verify-decisions.test.ts.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { DecisionChain, openDecision } from "../../src/core/decision/verify.ts";
import { describeCheck, ReceiptKeys, verifyResponse } from "../../src/core/receipt/index.ts";
import { isDecisionEnvelope } from "../../src/core/receipt/shapes.ts";
import { DECISION_VECTOR_DIR, DECISION_VECTOR_EXPORT, DECISION_VECTOR_JWKS, readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

const approverJwks = JSON.parse(readFileSync(DECISION_VECTOR_JWKS, "utf8"));
const deskJwks = JSON.parse(readFileSync(VECTOR_JWKS, "utf8"));
const vectors = readVectors(DECISION_VECTOR_DIR);

describe("decision vectors through the library", () => {
  test("the set covers records, receipts that carry one, and their forgeries", () => {
    const names = vectors.map((v) => v.name);
    for (const name of [
      "decision-spend-approved",
      "decision-expired",
      "decision-tamper-payload",
      "decision-tamper-readable",
      "receipt-approved-charged",
      "receipt-denied",
      "receipt-expired",
      "receipt-approval-other-params",
      "receipt-approved-no-approver-keys",
    ]) {
      expect(names).toContain(`${name}.vector`);
    }
    expect(vectors.filter((v) => v.exit === 0).length).toBeGreaterThanOrEqual(8);
    expect(vectors.filter((v) => v.exit === 1).length).toBeGreaterThanOrEqual(8);
  });

  for (const v of vectors) {
    test(`${v.name}: ${v.description}`, () => {
      const body = JSON.parse(v.body);
      const keys = ReceiptKeys.fromJwks(v.keys === "approver" ? approverJwks : deskJwks);
      const checks = isDecisionEnvelope(body)
        ? openDecision(body, keys).checks
        : verifyResponse(body, keys, v.args === undefined ? undefined : JSON.parse(v.args), v.approverKeys ? approverJwks : undefined);
      expect(checks.map(describeCheck)).toEqual(v.stdout);
      expect(checks.every((c) => c.ok) ? 0 : 1).toBe(v.exit);
    });
  }
});

describe("the approver's chain through an export", () => {
  const lines = readFileSync(DECISION_VECTOR_EXPORT, "utf8")
    .trimEnd()
    .split("\n")
    .map((l) => JSON.parse(l));
  const keys = ReceiptKeys.fromJwks(approverJwks);
  const follow = (records: unknown[]) => {
    const chain = new DecisionChain();
    records.forEach((r, i) => {
      const opened = openDecision(r, keys);
      expect(opened.checks.every((c) => c.ok)).toBe(true);
      chain.add(i + 1, opened.signed, opened.payloadSha256);
    });
    return chain.failures.map((f) => `${f.index}: ${f.detail}`);
  };

  test("the export as written is one intact chain from seq 1", () => {
    expect(lines.length).toBe(6);
    expect(follow(lines)).toEqual([]);
  });
  test("a record left out shows at the next one", () => {
    expect(follow([lines[0], lines[2], lines[3], lines[4], lines[5]])).toEqual(["2: seq 3 after seq 1; expected seq 2 (a record is missing or out of order)"]);
  });
  test("two records swapped show where the order breaks", () => {
    expect(follow([lines[0], lines[2], lines[1], ...lines.slice(3)])).toEqual([
      "2: seq 3 after seq 1; expected seq 2 (a record is missing or out of order)",
      "3: seq 2 after seq 3; expected seq 4 (a record is missing or out of order)",
      "4: seq 4 after seq 2; expected seq 3 (a record is missing or out of order)",
    ]);
  });
  test("the first record left out: the chain must start at seq 1", () => {
    expect(follow(lines.slice(1))).toEqual(["1: seq 2 as the first record; expected seq 1 (a record is missing or out of order)"]);
  });
  test("a record given twice is a second record for its ask", () => {
    expect(follow([...lines, lines[5]])).toContainEqual("7: a second record for ask RET1RED000");
  });
});
