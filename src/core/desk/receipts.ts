// What the desk recorded, as agents and the operator may read it: a receipt (visible to its own
// organization and the operator), a key's own receipts, a result held for a key that paid for
// it, the audit log and the receipts export.
import { type Envelope, resultSha256 } from "../receipt/index.ts";
import type { DeskContext } from "./context.ts";
import type { AuditEntry, AuditFilter, DeskKey, ReceiptRecord } from "./records.ts";

/** Who reads: the operator, or an agent's key (which sees its own organization's receipts only). */
export type Reader = "operator" | DeskKey;

/** The receipt, or null when there is none the reader may see: another org's answers as a missing one, so ids cannot be probed. */
export async function receiptFor(d: DeskContext, id: string, reader: Reader): Promise<ReceiptRecord | null> {
  const receipt = await d.ledger.records.receipt(id);
  if (receipt === null || (reader !== "operator" && receipt.orgId !== reader.orgId)) return null;
  return receipt;
}

/** A key's own receipts since `sinceMs`, in chain order, and which of them hold a result it can still fetch. */
export async function keyReceipts(d: DeskContext, key: DeskKey, sinceMs: number, limit: number): Promise<{ receipts: ReceiptRecord[]; held: Set<string> }> {
  const receipts = await d.ledger.records.keyReceipts(key.id, sinceMs, limit);
  const held = await d.ledger.records.heldAmong(
    receipts.map((r) => r.id),
    d.now(),
  );
  return { receipts, held };
}

/**
 * The result a key paid for and did not receive, with its receipt, or null (delivered, expired,
 * or another key's: all answer alike). Checked against the receipt's result_sha256 before it
 * leaves: a held row that does not match is a fault of the desk, thrown.
 */
export async function heldResultFor(d: DeskContext, key: DeskKey, receiptId: string): Promise<{ result: Record<string, unknown>; receipt: Envelope } | null> {
  const held = await d.ledger.records.heldResult(receiptId, d.now());
  const record = held === null ? null : await d.ledger.records.receipt(receiptId);
  if (held === null || record === null || held.keyId !== key.id || record.keyId !== key.id) return null;
  const receipt = JSON.parse(record.envelope) as Envelope;
  if (resultSha256(held.result) !== receipt.receipt.result_sha256) throw new Error(`held result of receipt ${receiptId} does not match its result_sha256`);
  return { result: held.result, receipt };
}

export function audit(d: DeskContext, filter: AuditFilter): Promise<AuditEntry[]> {
  return d.ledger.records.audit(filter);
}

/**
 * Receipts per page of an export read on the desk's own thread (PostgreSQL): ~30 KB of envelopes
 * at a time, whatever the ledger holds, read and written in a fraction of a millisecond, so the
 * calls served between two pages wait no longer than that. Larger pages left more garbage behind
 * the stream (desk RSS during a whole export: +47 MB at 100 a page against +35 MB at 20, in a
 * test of the stream alone).
 */
export const EXPORT_PAGE = 20;

/** The export's NDJSON bytes, a chunk per pull (RecordStore.exportChunks); `signal` ends a wait for a place. */
export function exportReceipts(d: DeskContext, filter: { orgId: string | null; sinceMs: number | null }, signal?: AbortSignal): AsyncIterable<Uint8Array> {
  return d.ledger.records.exportChunks(filter, signal);
}

/** Export chunks made on the calling thread from a ledger's pages: one page each. */
export async function* chunksOfPages(pages: AsyncIterable<ReceiptRecord[]>): AsyncGenerator<Uint8Array> {
  const encoder = new TextEncoder();
  for await (const page of pages) yield encoder.encode(page.map((r) => `${r.envelope}\n`).join(""));
}
