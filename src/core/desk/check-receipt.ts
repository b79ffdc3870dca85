// What `desk check` asks of each stored receipt on its own: its signature under a key the desk
// published, its readable copy, and its row against what was signed. Pure over a page of
// ledger rows, so it runs on any thread (adapters/threads); the chain across receipts is
// followed by the caller, in order, from the links answered here.
import { openEnvelope, printable, type Receipt, type ReceiptKeys } from "../receipt/index.ts";
import type { ReceiptRecord } from "./records.ts";

/** The signed fields a key's chain follows, and the SHA-256 of the payload bytes (what the next receipt's prev_sha256 holds). */
export type ChainLinkOf = Pick<Receipt, "key_id" | "seq" | "prev_sha256"> & { sha256: string };

/** One receipt checked: its chain link (null when the payload is unreadable: its problems say why) and what is wrong with it. */
export type CheckedReceipt = { link: ChainLinkOf | null; problems: string[] };

/** checkReceipt over a page, in its order. */
export function checkReceipts(rows: readonly ReceiptRecord[], keys: ReceiptKeys): CheckedReceipt[] {
  return rows.map((row) => checkReceipt(row, keys));
}

/** One ledger row: its envelope opened under `keys`, and every column held against the signed receipt. */
export function checkReceipt(row: ReceiptRecord, keys: ReceiptKeys): CheckedReceipt {
  const where = () => `receipt ${printable(row.id)} (key ${printable(row.keyId)} seq ${row.seq})`;
  let envelope: unknown;
  try {
    envelope = JSON.parse(row.envelope);
  } catch {
    return { link: null, problems: [`${where()}: envelope is not JSON`] };
  }
  const problems: string[] = [];
  const opened = openEnvelope(envelope, keys);
  for (const c of opened.checks) if (!c.ok) problems.push(`${where()}: ${c.name} ${c.detail ?? ""}`.trim());
  const s = opened.signed;
  // Every column is read as if it were the receipt (org_id decides which keys may fetch it,
  // sha256 is what the next receipt chains to): each must be what was signed.
  if (s !== null && !rowMatches(row, s, opened.payloadSha256)) problems.push(`receipt ${printable(row.id)}: the ledger row differs from the signed receipt`);
  const link = s === null || opened.payloadSha256 === null ? null : { key_id: s.key_id, seq: s.seq, prev_sha256: s.prev_sha256, sha256: opened.payloadSha256 };
  return { link, problems };
}

/** Whether every column of a receipt row is what was signed (desk check, and a migration converting old rows). */
export function rowMatches(row: Omit<ReceiptRecord, "envelope">, s: Receipt, payloadSha256: string | null): boolean {
  return (
    s.id === row.id &&
    s.org_id === row.orgId &&
    s.key_id === row.keyId &&
    s.seq === row.seq &&
    Date.parse(s.issued_at) === row.issuedAt &&
    s.tool === row.tool &&
    s.outcome === row.outcome &&
    s.period === row.period &&
    s.amount_mc === row.amountMc &&
    s.kid === row.kid &&
    payloadSha256 === row.sha256
  );
}
