// An in-memory AlertOutbox with the port's exact semantics (due, lease, delivered, given up), for
// the delivery loop's tests. The ledger's adapters must behave the same: the contract suite in
// alert-outbox-contract.ts runs against this one and against them.
import type { AlertOutbox, OutboxAlert } from "../../src/core/finance/alert-outbox.ts";

export type MemoryAlertRow = {
  id: string;
  body: string;
  attempts: number;
  nextAtMs: number;
  createdAtMs: number;
  order: number;
  deliveredAtMs: number | null;
  gaveUpAtMs: number | null;
  lastError: string | null;
};

export class MemoryAlertOutbox implements AlertOutbox {
  readonly rows = new Map<string, MemoryAlertRow>();
  private order = 0;

  /** What the charge's transaction does: the alert is due at once. */
  add(id: string, body: string, atMs: number): void {
    if (this.rows.has(id)) throw new Error(`alert ${id} exists`);
    this.rows.set(id, {
      id,
      body,
      attempts: 0,
      nextAtMs: atMs,
      createdAtMs: atMs,
      order: this.order++,
      deliveredAtMs: null,
      gaveUpAtMs: null,
      lastError: null,
    });
  }

  async claimDue(nowMs: number, limit: number, leaseUntilMs: number): Promise<OutboxAlert[]> {
    const due = [...this.rows.values()]
      .filter((r) => r.deliveredAtMs === null && r.gaveUpAtMs === null && r.nextAtMs <= nowMs)
      .sort((a, b) => a.createdAtMs - b.createdAtMs || a.order - b.order)
      .slice(0, limit);
    for (const r of due) r.nextAtMs = leaseUntilMs;
    return due.map((r) => ({ id: r.id, body: r.body, attempts: r.attempts }));
  }

  async markDelivered(id: string, atMs: number): Promise<void> {
    const r = this.row(id);
    r.deliveredAtMs = atMs;
  }

  async markAttempt(id: string, atMs: number, nextAtMs: number | null, error: string): Promise<void> {
    const r = this.row(id);
    r.attempts += 1;
    r.lastError = error;
    if (nextAtMs === null) r.gaveUpAtMs = atMs;
    else r.nextAtMs = nextAtMs;
  }

  private row(id: string): MemoryAlertRow {
    const r = this.rows.get(id);
    if (!r) throw new Error(`no alert ${id}`);
    return r;
  }
}
