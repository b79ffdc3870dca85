// Organizations and agent keys in the PostgreSQL desk ledger. Read from the database on every
// request (no cache), so a revocation or a budget change made through any node applies to the
// next call on every node. A key's secret is stored only as its lookup prefix and SHA-256; a
// presented secret is compared in constant time.
import type { SQL } from "bun";
import { periodOf } from "../../core/desk/period.ts";
import { type KeyStore, LedgerConflict, LedgerUnavailable, type OrgStore } from "../../core/desk/ports.ts";
import type { DeskKey, KeyPatch, NewKey, Org } from "../../core/desk/records.ts";
import { constantTimeEqual } from "../../core/desk/secrets.ts";
import { DEFAULT_THRESHOLDS } from "../../core/finance/alerts.ts";
import type { Db } from "./db.ts";
import { classifyFailure, violatedConstraint } from "./errors.ts";
import type { NodeSession } from "./node.ts";
import { type KeyRow, keyOf, type OrgRow, orgOf, percentagesOf } from "./rows.ts";

const KEY_COLUMNS =
  "id, org_id, name, lookup, secret_sha256, budget_mc, spent_mc, reset, period, allow, prices, expires_at, revoked_at, created_at, fail_hour, fail_count, alert_thresholds, approve_above_mc";

/** Inserts an org (also inside the sandbox's grant transaction). */
export function insertOrg(sql: SQL, org: Org) {
  return sql`INSERT INTO orgs (id, name, created_at) VALUES (${org.id}, ${org.name}, ${BigInt(org.createdAt)}::bigint)`;
}

/** Inserts a key (also inside the sandbox's grant transaction). */
export function insertKey(sql: SQL, k: NewKey) {
  return sql`
    INSERT INTO keys (id, org_id, name, lookup, secret_sha256, budget_mc, spent_mc, reset, period, allow, prices, expires_at, created_at, alert_thresholds,
                      approve_above_mc)
    VALUES (${k.id}, ${k.orgId}, ${k.name}, ${k.lookup}, ${Buffer.from(k.secretSha256)}, ${BigInt(k.budgetMc)}::bigint, 0, ${k.reset}, ${k.period},
            ${[...k.allow]}::text[], ${{ ...k.prices }}::jsonb, ${k.expiresAt === null ? null : BigInt(k.expiresAt)}::bigint, ${BigInt(k.now)}::bigint,
            ${[...(k.alertThresholds ?? DEFAULT_THRESHOLDS)]}::integer[],
            ${k.approveAboveMc === undefined || k.approveAboveMc === null ? null : BigInt(k.approveAboveMc)}::bigint)`;
}

/** A unique or primary key taken: EXISTS. Anything else stays what it was. */
function conflictOf(err: unknown): unknown {
  return classifyFailure(err) === "constraint" && /_pkey$|_key$/.test(violatedConstraint(err) ?? "") ? new LedgerConflict("EXISTS") : err;
}

export class PostgresOrgs implements OrgStore {
  constructor(private readonly db: Db) {}

  async create(org: Org): Promise<void> {
    await this.db.run((sql) => insertOrg(sql, org)).catch((err) => Promise.reject(conflictOf(err)));
  }

  async get(id: string): Promise<Org | null> {
    const [row] = (await this.db.run((sql) => sql`SELECT id, name, created_at FROM orgs WHERE id = ${id}`)) as OrgRow[];
    return row === undefined ? null : orgOf(row);
  }

  async list(): Promise<Org[]> {
    return ((await this.db.run((sql) => sql`SELECT id, name, created_at FROM orgs ORDER BY created_at, id`)) as OrgRow[]).map(orgOf);
  }
}

export class PostgresKeys implements KeyStore {
  constructor(
    private readonly db: Db,
    private readonly node: NodeSession | null,
  ) {}

  async create(k: NewKey): Promise<void> {
    await this.db.run((sql) => insertKey(sql, k)).catch((err) => Promise.reject(conflictOf(err)));
  }

  async get(id: string): Promise<DeskKey | null> {
    const [row] = (await this.db.run((sql) => sql.unsafe(`SELECT ${KEY_COLUMNS} FROM keys WHERE id = $1`, [id]))) as KeyRow[];
    return row === undefined ? null : keyOf(row);
  }

  /** The clearing path's first read: a node that does not hold its lease takes no call. */
  async find(lookup: string, secretSha256: Uint8Array): Promise<DeskKey | null> {
    if (this.node !== null && this.node.lease() === null) throw new LedgerUnavailable("lease not held");
    const [row] = (await this.db.run((sql) => sql.unsafe(`SELECT ${KEY_COLUMNS} FROM keys WHERE lookup = $1`, [lookup]))) as KeyRow[];
    if (row === undefined) return null;
    return constantTimeEqual(new Uint8Array(row.secret_sha256), secretSha256) ? keyOf(row) : null;
  }

  async list(orgId: string | null): Promise<DeskKey[]> {
    const rows = (await this.db.run((sql) =>
      orgId === null
        ? sql.unsafe(`SELECT ${KEY_COLUMNS} FROM keys ORDER BY created_at, id`)
        : sql.unsafe(`SELECT ${KEY_COLUMNS} FROM keys WHERE org_id = $1 ORDER BY created_at, id`, [orgId]),
    )) as KeyRow[];
    return rows.map(keyOf);
  }

  /**
   * Under the key row's lock, the row is rolled into the period at `now` first, as the next
   * reservation would roll it, so the CHECK (spent <= budget) compares the budget with this
   * period's spend and never with yesterday's.
   */
  async patch(id: string, patch: KeyPatch, now: number): Promise<DeskKey> {
    try {
      return await this.db.tx(async (tx) => {
        const [key] = (await tx.unsafe(`SELECT ${KEY_COLUMNS} FROM keys WHERE id = $1 FOR UPDATE`, [id])) as KeyRow[];
        if (key === undefined) throw new LedgerConflict("MISSING");
        const period = periodOf(key.reset, now);
        const expires = patch.expiresAt === undefined ? key.expires_at : patch.expiresAt === null ? null : BigInt(patch.expiresAt);
        const approveAbove = patch.approveAboveMc === undefined ? key.approve_above_mc : patch.approveAboveMc === null ? null : BigInt(patch.approveAboveMc);
        const [row] = (await tx`
          UPDATE keys SET name = ${patch.name ?? key.name},
                 budget_mc = ${patch.budgetMc === undefined ? key.budget_mc : BigInt(patch.budgetMc)}::bigint,
                 allow = ${patch.allow === undefined ? key.allow : [...patch.allow]}::text[],
                 prices = ${patch.prices === undefined ? key.prices : { ...patch.prices }}::jsonb,
                 expires_at = ${expires}::bigint,
                 alert_thresholds = ${[...(patch.alertThresholds ?? percentagesOf(key.alert_thresholds))]}::integer[],
                 approve_above_mc = ${approveAbove}::bigint,
                 spent_mc = CASE WHEN ${period} >= period THEN (CASE WHEN period = ${period} THEN spent_mc ELSE 0 END) ELSE spent_mc END,
                 period = CASE WHEN ${period} >= period THEN ${period} ELSE period END
           WHERE id = ${id}
          RETURNING id, org_id, name, lookup, secret_sha256, budget_mc, spent_mc, reset, period, allow, prices, expires_at, revoked_at,
                    created_at, fail_hour, fail_count, alert_thresholds, approve_above_mc`) as KeyRow[];
        return keyOf(row!);
      });
    } catch (err) {
      if (classifyFailure(err) === "constraint" && violatedConstraint(err) === "keys_spent_within_budget") throw new LedgerConflict("OVER_BUDGET");
      throw err;
    }
  }

  async rotate(id: string, lookup: string, secretSha256: Uint8Array): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE keys SET lookup = ${lookup}, secret_sha256 = ${Buffer.from(secretSha256)} WHERE id = ${id} RETURNING id`,
    );
    return rows.length === 1;
  }

  async revoke(id: string, now: number): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`UPDATE keys SET revoked_at = coalesce(revoked_at, ${BigInt(now)}::bigint) WHERE id = ${id} RETURNING id`);
    return rows.length === 1;
  }
}
