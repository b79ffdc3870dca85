// The organization's budget records (version 1): every change of an org's budget is a signed
// record in one chain per org, like a key's receipts (9.5), so a statement's balances can be
// recomputed by anyone holding the desk's JWKS. Two types:
//   topup       money paid in (POST /admin/orgs/{id}/topups, or a Stripe payment): adds
//               amount_mc; `reference` is its idempotency key
//   budget_set  the operator set the budget (PATCH /admin/orgs/{id}): budget_mc is the new
//               budget, null for unlimited
// Each record carries the budget after it, so the chain alone tells the budget at any time.
import { hashJson } from "../receipt/hash.ts";
import type { ReceiptSigner } from "../receipt/sign.ts";
import { printable, type ReceiptKeys } from "../receipt/verify.ts";
import { isArkErrors, schemas } from "../schema/ark.ts";
import { openDocument, type SignedDocument, signDocument } from "./signed-document.ts";

export const ORG_RECORD_VERSION = 1;

export const ISO_MS = /^\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])T([01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}Z$/;

/** The fields finance documents share (org records and statements), built on first use. */
export const financeFields = schemas(({ type }) => {
  const money = type("number").narrow((n, ctx) => (Number.isSafeInteger(n) && n >= 0) || ctx.mustBe("a safe integer >= 0"));
  return {
    text200: type("string").narrow((s, ctx) => (s.length >= 1 && s.length <= 200) || ctx.mustBe("a string of 1-200 characters")),
    isoMs: type("string").narrow((s, ctx) => ISO_MS.test(s) || ctx.mustBe("RFC 3339 UTC with milliseconds")),
    money,
    signedMoney: type("number").narrow((n, ctx) => Number.isSafeInteger(n) || ctx.mustBe("a safe integer")),
    count: money,
    hex64: type("string").narrow((s, ctx) => /^[0-9a-f]{64}$/.test(s) || ctx.mustBe("64 lowercase hex")),
  };
});

const orgRecordSchema = schemas(({ type }) => {
  const { text200, isoMs, money, hex64 } = financeFields();
  // A reference is shown to operators and finance: printable ASCII only, so it cannot carry
  // control sequences or bidi marks into a terminal or a spreadsheet.
  const reference = type("string").narrow((s, ctx) => /^[\x21-\x7e]{1,200}$/.test(s) || ctx.mustBe("1-200 printable ASCII characters without spaces"));
  const common = {
    "+": "reject",
    v: "1",
    id: text200,
    kid: text200,
    issued_at: isoMs,
    org_id: text200,
    reset: type("'none' | 'daily' | 'monthly'"),
    seq: type("number.integer >= 1").narrow((n, ctx) => Number.isSafeInteger(n) || ctx.mustBe("a safe integer")),
    prev_sha256: hex64.or("null"),
  } as const;
  const Topup = type({ ...common, type: "'topup'", amount_mc: money.narrow((n, ctx) => n >= 1 || ctx.mustBe("at least 1")), budget_mc: money, reference });
  const BudgetSet = type({ ...common, type: "'budget_set'", amount_mc: "0", budget_mc: money.or("null"), reference: "null" });
  return Topup.or(BudgetSet);
});

export type OrgRecord = ReturnType<typeof orgRecordSchema>["infer"];
export type OrgRecordFields = Omit<OrgRecord, "v" | "kid">;
export type OrgRecordEnvelope = SignedDocument<"record", OrgRecord>;

/** Field order of the readable copy. */
export const ORG_RECORD_FIELDS = [
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
] as const satisfies readonly (keyof OrgRecord)[];

/** Null when `value` is a v1 org record, else the first problem (`field must be …`). */
export function orgRecordProblem(value: unknown): string | null {
  const out = orgRecordSchema()(value);
  if (isArkErrors(out)) return printable(out.summary.split("\n")[0]!);
  const r = out as OrgRecord;
  if ((r.seq === 1) !== (r.prev_sha256 === null)) return "prev_sha256 must be null exactly when seq is 1";
  return null;
}

/** Signs a record (v and kid set here); throws RangeError for one that breaks a rule. */
export function signOrgRecord(signer: Pick<ReceiptSigner, "kid" | "signBytes">, fields: OrgRecordFields): OrgRecordEnvelope {
  const source = { ...fields, v: ORG_RECORD_VERSION, kid: signer.kid } as Record<string, unknown>;
  const problem = orgRecordProblem(source);
  if (problem !== null) throw new RangeError(`refusing to sign an invalid org record: ${problem}`);
  const record = {} as Record<string, unknown>;
  for (const field of ORG_RECORD_FIELDS) record[field] = source[field];
  return signDocument(signer, "record", record as OrgRecord);
}

export type OpenedOrgRecord = { ok: true; record: OrgRecord; payloadSha256: string } | { ok: false; problem: string };

/** Opens a record envelope (signature, canonical payload, readable copy). */
export function openOrgRecord(envelope: unknown, keys: ReceiptKeys): OpenedOrgRecord {
  const opened = openDocument<OrgRecord>(envelope, "record", keys, orgRecordProblem);
  return opened.ok ? { ok: true, record: opened.doc, payloadSha256: opened.payloadSha256 } : opened;
}

/** seq and prev_sha256 for the org's next record (the hash of the previous payload = of its canonical JSON). */
export function recordLinkAfter(previous: OrgRecord | null): { seq: number; prev_sha256: string | null } {
  return previous === null ? { seq: 1, prev_sha256: null } : { seq: previous.seq + 1, prev_sha256: hashJson(previous) };
}

/**
 * The rules that tie an org's records together, in seq order: one org, seq 1, 2, … with each
 * prev_sha256 the hash of the previous payload, issued_at never going back, one reset for the
 * whole chain, a budget_set first, each top-up's budget_mc = the previous budget + amount_mc
 * (never on an unlimited budget), and each reference used once. Returns every break found.
 */
export function orgChainProblems(records: readonly { record: OrgRecord; payloadSha256: string }[], orgId: string): string[] {
  const problems: string[] = [];
  const references = new Set<string>();
  let previous: { record: OrgRecord; payloadSha256: string } | null = null;
  for (let i = 0; i < records.length; i++) {
    const r = records[i]!.record;
    const where = `records[${i}] (seq ${r.seq})`;
    if (r.org_id !== orgId) problems.push(`${where}: belongs to another organization`);
    const expectedSeq = previous === null ? 1 : previous.record.seq + 1;
    if (r.seq !== expectedSeq) problems.push(`${where}: expected seq ${expectedSeq} (a record is missing or out of order)`);
    else if (previous !== null && r.prev_sha256 !== previous.payloadSha256)
      problems.push(`${where}: prev_sha256 differs from the hash of seq ${previous.record.seq}`);
    if (previous === null && r.type !== "budget_set") problems.push(`${where}: the first record of an organization sets its budget`);
    if (previous !== null) {
      const p = previous.record;
      if (r.issued_at < p.issued_at) problems.push(`${where}: issued_at goes back before seq ${p.seq}`);
      if (r.reset !== p.reset) problems.push(`${where}: reset changes from ${p.reset} to ${r.reset} (it is fixed with the first record)`);
      if (r.type === "topup") {
        if (p.budget_mc === null) problems.push(`${where}: a top-up on an unlimited budget`);
        else if (r.budget_mc !== p.budget_mc + r.amount_mc) problems.push(`${where}: budget_mc ${r.budget_mc} is not ${p.budget_mc} + ${r.amount_mc}`);
      }
    }
    if (r.type === "topup") {
      if (references.has(r.reference)) problems.push(`${where}: reference used by an earlier top-up`);
      references.add(r.reference);
    }
    previous = records[i]!;
  }
  return problems;
}
