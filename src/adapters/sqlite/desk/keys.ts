// Organizations and agent keys in the SQLite desk ledger. A key's secret is stored only as its
// lookup prefix and SHA-256; a presented secret is compared in constant time.
import { periodOf } from "../../../core/desk/period.ts";
import { DEFAULT_THRESHOLDS } from "../../../core/finance/alerts.ts";
import { type KeyStore, LedgerConflict, type OrgStore } from "../../../core/desk/ports.ts";
import type { DeskKey, KeyPatch, NewKey, Org } from "../../../core/desk/records.ts";
import { constantTimeEqual } from "../../../core/desk/secrets.ts";
import { isConstraint, SPENT_IN_PERIOD, type Sql } from "./connection.ts";
import { type KeyRow, keyOf, type OrgRow, orgOf } from "./rows.ts";

export class SqliteOrgs implements OrgStore {
  constructor(private readonly sql: Sql) {}

  /** Also runs inside the sandbox's grant transaction. */
  createNow(org: Org): void {
    this.sql.db.query("INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)").run(org.id, org.name, org.createdAt);
  }

  async create(org: Org): Promise<void> {
    this.createNow(org);
  }

  async get(id: string): Promise<Org | null> {
    const row = this.sql.db.query("SELECT id, name, created_at FROM orgs WHERE id = ?").get(id) as OrgRow | null;
    return row === null ? null : orgOf(row);
  }

  async list(): Promise<Org[]> {
    return (this.sql.db.query("SELECT id, name, created_at FROM orgs ORDER BY created_at, id").all() as OrgRow[]).map(orgOf);
  }
}

export class SqliteKeys implements KeyStore {
  constructor(private readonly sql: Sql) {}

  /** Also runs inside the sandbox's grant transaction. */
  createNow(k: NewKey): void {
    this.sql.db
      .query(
        `INSERT INTO keys (id, org_id, name, lookup, secret_sha256, budget_mc, spent_mc, reset, period, allow, prices, expires_at, created_at, alert_thresholds,
           approve_above_mc)
         VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        k.id,
        k.orgId,
        k.name,
        k.lookup,
        k.secretSha256,
        k.budgetMc,
        k.reset,
        k.period,
        JSON.stringify(k.allow),
        JSON.stringify(k.prices),
        k.expiresAt,
        k.now,
        JSON.stringify(k.alertThresholds ?? DEFAULT_THRESHOLDS),
        k.approveAboveMc ?? null,
      );
  }

  async create(k: NewKey): Promise<void> {
    this.createNow(k);
  }

  private row(id: string): KeyRow | null {
    return this.sql.db.query("SELECT * FROM keys WHERE id = ?").get(id) as KeyRow | null;
  }

  async get(id: string): Promise<DeskKey | null> {
    const row = this.row(id);
    return row === null ? null : keyOf(row);
  }

  async find(lookup: string, secretSha256: Uint8Array): Promise<DeskKey | null> {
    const row = this.sql.db.query("SELECT * FROM keys WHERE lookup = ?").get(lookup) as KeyRow | null;
    if (row === null) return null;
    return constantTimeEqual(new Uint8Array(row.secret_sha256), secretSha256) ? keyOf(row) : null;
  }

  async list(orgId: string | null): Promise<DeskKey[]> {
    const rows = (
      orgId === null
        ? this.sql.db.query("SELECT * FROM keys ORDER BY created_at, id").all()
        : this.sql.db.query("SELECT * FROM keys WHERE org_id = ? ORDER BY created_at, id").all(orgId)
    ) as KeyRow[];
    return rows.map(keyOf);
  }

  /**
   * The row is rolled into the period at `now` first, as the next reservation would roll it, so
   * the CHECK (spent <= budget) compares the budget with this period's spend and never with
   * yesterday's.
   */
  async patch(id: string, patch: KeyPatch, now: number): Promise<DeskKey> {
    return this.sql.immediate(() => {
      const key = this.row(id);
      if (key === null) throw new LedgerConflict("MISSING");
      try {
        this.sql.db
          .query(
            `UPDATE keys SET name = :name, budget_mc = :budget, allow = :allow, prices = :prices, expires_at = :expires, alert_thresholds = :thresholds,
               approve_above_mc = :approveAbove,
               spent_mc = CASE WHEN :period >= period THEN ${SPENT_IN_PERIOD} ELSE spent_mc END,
               period = CASE WHEN :period >= period THEN :period ELSE period END
             WHERE id = :id`,
          )
          .run({
            name: patch.name ?? key.name,
            budget: patch.budgetMc ?? key.budget_mc,
            allow: patch.allow === undefined ? key.allow : JSON.stringify(patch.allow),
            prices: patch.prices === undefined ? key.prices : JSON.stringify(patch.prices),
            expires: patch.expiresAt === undefined ? key.expires_at : patch.expiresAt,
            thresholds: patch.alertThresholds === undefined ? key.alert_thresholds : JSON.stringify(patch.alertThresholds),
            approveAbove: patch.approveAboveMc === undefined ? key.approve_above_mc : patch.approveAboveMc,
            period: periodOf(key.reset, now),
            id,
          });
      } catch (err) {
        if (isConstraint(err)) throw new LedgerConflict("OVER_BUDGET");
        throw err;
      }
      return keyOf(this.row(id)!);
    });
  }

  async rotate(id: string, lookup: string, secretSha256: Uint8Array): Promise<boolean> {
    return this.sql.db.query("UPDATE keys SET lookup = ?, secret_sha256 = ? WHERE id = ?").run(lookup, secretSha256, id).changes === 1;
  }

  async revoke(id: string, now: number): Promise<boolean> {
    return this.sql.db.query("UPDATE keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?").run(now, id).changes === 1;
  }
}
