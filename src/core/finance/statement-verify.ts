// Offline verification of a signed statement: its signature, its embedded budget records, the
// receipts export, each key's chain, and then every figure recomputed from the export and
// compared with the statement, each difference named. Pure over a JWKS and parsed JSON; the CLI
// (verify-receipt's statement mode) reads the files and prints these checks.
import type { Jwks } from "../receipt/sign.ts";
import type { Receipt } from "../receipt/types.ts";
import { openEnvelope, printable, ReceiptKeys } from "../receipt/verify.ts";
import { openOrgRecord, type OrgRecord, orgChainProblems } from "./org-records.ts";
import { openDocument } from "./signed-document.ts";
import { computeStatement, type Statement, StatementError, type StatementReceipt, statementProblem } from "./statement.ts";

export type StatementCheckName = "signature" | "records" | "receipts" | "chains" | "figures";

/** One check; `problems` lists every failure found (each a line of output). */
export type StatementCheck = { name: StatementCheckName; ok: boolean; detail: string; problems: string[] };

export type StatementVerdict = {
  ok: boolean;
  checks: StatementCheck[];
  /** The signed statement, when its signature held. */
  statement: Statement | null;
};

const NOT_CHECKED = "not checked: the statement's signature did not verify";

/**
 * Verifies `envelope` against `keys` and the receipts export (`exportLines`: one parsed JSON
 * value per line, receipts of other organizations allowed and ignored). `heldRecords` are
 * budget-record envelopes the reader holds (a top-up's answer): each must be in the statement.
 *
 * The export must hold every receipt of the org's keys from seq 1 up to the statement's chain
 * heads: the opening balance of a budget without reset depends on every earlier charge.
 */
export function verifyStatement(
  envelope: unknown,
  keys: ReceiptKeys | Jwks,
  exportLines: readonly unknown[],
  heldRecords: readonly unknown[] = [],
): StatementVerdict {
  const keySet = keys instanceof ReceiptKeys ? keys : ReceiptKeys.fromJwks(keys);
  const opened = openDocument<Statement>(envelope, "statement", keySet, statementProblem);
  if (!opened.ok) {
    const checks: StatementCheck[] = [{ name: "signature", ok: false, detail: opened.problem, problems: [opened.problem] }];
    for (const name of ["records", "receipts", "chains", "figures"] as const) checks.push({ name, ok: false, detail: NOT_CHECKED, problems: [] });
    return { ok: false, checks, statement: null };
  }
  const statement = opened.doc;
  const checks: StatementCheck[] = [{ name: "signature", ok: true, detail: `kid ${statement.kid}`, problems: [] }];

  const records = checkRecords(statement, keySet, heldRecords);
  checks.push(records.check);
  const receipts = checkReceipts(statement.org_id, keySet, exportLines);
  checks.push(receipts.check);
  checks.push(checkChains(receipts.byKey));
  checks.push(checkFigures(statement, records.opened, receipts.byKey));
  return { ok: checks.every((c) => c.ok), checks, statement };
}

function verdict(name: StatementCheckName, problems: string[], okDetail: string): StatementCheck {
  return problems.length === 0 ? { name, ok: true, detail: okDetail, problems } : { name, ok: false, detail: `${problems.length} problem(s)`, problems };
}

function checkRecords(statement: Statement, keys: ReceiptKeys, held: readonly unknown[]) {
  const problems: string[] = [];
  const opened: { envelope: Statement["records"][number]; record: OrgRecord; payloadSha256: string }[] = [];
  statement.records.forEach((envelope, i) => {
    const o = openOrgRecord(envelope, keys);
    if (o.ok) opened.push({ envelope, record: o.record, payloadSha256: o.payloadSha256 });
    else problems.push(`records[${i}]: ${printable(o.problem)}`);
  });
  if (problems.length === 0) problems.push(...orgChainProblems(opened, statement.org_id).map(printable));
  const inStatement = new Set(statement.records.map((r) => r.payload));
  held.forEach((envelope, i) => {
    const o = openOrgRecord(envelope, keys);
    if (!o.ok) problems.push(`held record ${i + 1}: ${printable(o.problem)}`);
    else if (
      o.record.org_id === statement.org_id &&
      o.record.issued_at < statement.covers_until &&
      !inStatement.has((envelope as { payload: string }).payload)
    ) {
      problems.push(`held record ${i + 1} (seq ${o.record.seq}, ${printable(o.record.id)}): issued before ${statement.covers_until} but not in the statement`);
    }
  });
  return { check: verdict("records", problems, `${opened.length} budget record(s), chain intact`), opened };
}

type ExportReceipt = StatementReceipt & { line: number };

function checkReceipts(orgId: string, keys: ReceiptKeys, lines: readonly unknown[]) {
  const problems: string[] = [];
  const byKey = new Map<string, ExportReceipt[]>();
  let others = 0;
  lines.forEach((line, i) => {
    const o = openEnvelope(line, keys);
    const failed = o.checks.find((c) => !c.ok);
    if (failed || o.signed === null || o.payloadSha256 === null) {
      problems.push(`line ${i + 1}: ${failed?.name.replace("_", " ") ?? "envelope"}: ${failed?.detail ?? "unreadable"}`);
      return;
    }
    const r: Receipt = o.signed;
    if (r.org_id !== orgId) {
      others++;
      return;
    }
    const list = byKey.get(r.key_id) ?? [];
    list.push({ receipt: r, payloadSha256: o.payloadSha256, line: i + 1 });
    byKey.set(r.key_id, list);
  });
  let mine = 0;
  for (const list of byKey.values()) mine += list.length;
  const detail = `${mine} receipt(s) of ${byKey.size} key(s) verify${others > 0 ? `; ${others} of other organizations ignored` : ""}`;
  return { check: verdict("receipts", problems, detail), byKey };
}

/** Each key's receipts must run seq 1, 2, … with each prev_sha256 the hash of the one before. */
function checkChains(byKey: ReadonlyMap<string, readonly ExportReceipt[]>): StatementCheck {
  const problems: string[] = [];
  for (const [keyId, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.receipt.seq - b.receipt.seq);
    let previous: ExportReceipt | null = null;
    for (const item of sorted) {
      const expected = previous === null ? 1 : previous.receipt.seq + 1;
      const key = printable(keyId);
      if (item.receipt.seq < expected) problems.push(`key ${key}: seq ${item.receipt.seq} appears twice (line ${item.line})`);
      else if (item.receipt.seq > expected) {
        const missing = expected === item.receipt.seq - 1 ? `seq ${expected} is` : `seq ${expected}-${item.receipt.seq - 1} are`;
        problems.push(`key ${key}: ${missing} missing from the export (before line ${item.line})`);
      } else if (previous !== null && item.receipt.prev_sha256 !== previous.payloadSha256) {
        problems.push(`key ${key}: seq ${item.receipt.seq} (line ${item.line}) does not follow seq ${previous.receipt.seq}: prev_sha256 differs`);
      }
      if (previous === null || item.receipt.seq > previous.receipt.seq) previous = item;
    }
  }
  return verdict("chains", problems, `${byKey.size} chain(s) intact from seq 1`);
}

function checkFigures(
  statement: Statement,
  records: { envelope: Statement["records"][number]; record: OrgRecord }[],
  byKey: ReadonlyMap<string, readonly ExportReceipt[]>,
): StatementCheck {
  let recomputed: ReturnType<typeof computeStatement>;
  try {
    recomputed = computeStatement({
      id: statement.id,
      org_id: statement.org_id,
      period: statement.period,
      issued_at: statement.issued_at,
      records,
      receipts: [...byKey.values()].flat(),
    });
  } catch (err) {
    if (!(err instanceof StatementError)) throw err;
    return { name: "figures", ok: false, detail: "cannot be recomputed", problems: [err.message] };
  }
  const problems: string[] = [];
  const { records: _r, ...mine } = recomputed;
  for (const [field, value] of Object.entries(mine)) diff(field, (statement as Record<string, unknown>)[field], value, problems);
  const closed = statement.closed ? "closed" : `OPEN: the period had not ended when the statement was made; it covers until ${statement.covers_until}`;
  return verdict("figures", problems, `every figure matches the receipts (${statement.period}, ${closed})`);
}

const KEYED: Record<string, string> = { tools: "tool", chains: "key_id" };
const show = (v: unknown) => (v === undefined ? "nothing" : printable(JSON.stringify(v)));

/** Every place where the statement (`said`) and the recomputation (`found`) differ, by path. */
function diff(path: string, said: unknown, found: unknown, out: string[]): void {
  const keyName = KEYED[path];
  if (keyName !== undefined && Array.isArray(said) && Array.isArray(found)) {
    const index = (list: unknown[]) => new Map(list.map((x) => [String((x as Record<string, unknown>)[keyName]), x]));
    const a = index(said);
    const b = index(found);
    for (const [k, v] of a) {
      if (!b.has(k)) out.push(`${path}[${printable(k)}]: in the statement, not in the receipts`);
      else diff(`${path}[${printable(k)}]`, v, b.get(k), out);
    }
    for (const k of b.keys()) if (!a.has(k)) out.push(`${path}[${printable(k)}]: in the receipts, not in the statement`);
    if (a.size === b.size && [...a.keys()].join("\n") !== [...b.keys()].join("\n")) out.push(`${path}: not in order`);
    return;
  }
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
  if (isObj(said) && isObj(found)) {
    for (const k of new Set([...Object.keys(said), ...Object.keys(found)])) diff(`${path}.${k}`, said[k], found[k], out);
    return;
  }
  if (JSON.stringify(said) !== JSON.stringify(found)) out.push(`${path}: the statement says ${show(said)}, the receipts give ${show(found)}`);
}
