// The desk ledger's schema, as versioned migrations (PRAGMA user_version). Never edit a migration
// that has shipped: append a new one. The tests open ledgers through these same migrations.
import type { Database } from "bun:sqlite";
import { rowMatches } from "../../../core/desk/check-receipt.ts";
import type { ReceiptOutcome } from "../../../core/desk/outcomes.ts";
import { envelopeText, readableReceipt, sha256Hex, signedOf } from "../../../core/receipt/index.ts";
import { type Migration, LedgerOpenError } from "../database.ts";

const V1 = `
CREATE TABLE meta (
  name TEXT PRIMARY KEY,
  value TEXT NOT NULL
) STRICT;

CREATE TABLE orgs (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  created_at INTEGER NOT NULL
) STRICT;

CREATE TABLE upstreams (
  name TEXT PRIMARY KEY,
  url TEXT NOT NULL,
  sealed_headers TEXT,
  header_names TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  refreshed_at INTEGER NOT NULL
) STRICT;

CREATE TABLE tools (
  name TEXT PRIMARY KEY,
  upstream TEXT NOT NULL REFERENCES upstreams(name),
  upstream_tool TEXT NOT NULL,
  description TEXT NOT NULL,
  input_schema TEXT NOT NULL,
  price_mc INTEGER NOT NULL DEFAULT 0 CHECK (price_mc >= 0),
  upstream_cost_mc INTEGER NOT NULL DEFAULT 0 CHECK (upstream_cost_mc >= 0),
  active INTEGER NOT NULL DEFAULT 1 CHECK (active IN (0, 1))
) STRICT;

-- spent_mc is the spend of the key's current period; the CHECK makes spending above the budget
-- impossible whatever the code above it does.
CREATE TABLE keys (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL REFERENCES orgs(id),
  name TEXT NOT NULL,
  lookup TEXT NOT NULL UNIQUE,
  secret_sha256 BLOB NOT NULL,
  budget_mc INTEGER NOT NULL CHECK (budget_mc >= 0),
  spent_mc INTEGER NOT NULL DEFAULT 0,
  reset TEXT NOT NULL CHECK (reset IN ('none', 'daily', 'monthly')),
  period TEXT NOT NULL,
  allow TEXT NOT NULL,
  prices TEXT NOT NULL,
  expires_at INTEGER,
  revoked_at INTEGER,
  created_at INTEGER NOT NULL,
  fail_hour TEXT NOT NULL DEFAULT '',
  fail_count INTEGER NOT NULL DEFAULT 0,
  CHECK (spent_mc >= 0 AND spent_mc <= budget_mc)
) STRICT;
CREATE INDEX keys_org ON keys(org_id);

-- What each period of each key spent (reservations in flight included), kept after a reset so
-- a refund goes back to the period its reservation came from.
CREATE TABLE spend (
  key_id TEXT NOT NULL REFERENCES keys(id),
  period TEXT NOT NULL,
  spent_mc INTEGER NOT NULL CHECK (spent_mc >= 0),
  PRIMARY KEY (key_id, period)
) STRICT, WITHOUT ROWID;

CREATE TABLE reservations (
  id INTEGER PRIMARY KEY,
  key_id TEXT NOT NULL REFERENCES keys(id),
  org_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  period TEXT NOT NULL,
  price_mc INTEGER NOT NULL CHECK (price_mc >= 0),
  upstream_cost_mc INTEGER NOT NULL,
  params_sha256 TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('open', 'settled')),
  outcome TEXT,
  receipt_id TEXT
) STRICT;
CREATE INDEX reservations_open ON reservations(created_at) WHERE state = 'open';

CREATE TABLE receipts (
  id TEXT PRIMARY KEY,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  seq INTEGER NOT NULL CHECK (seq >= 1),
  issued_at INTEGER NOT NULL,
  tool TEXT NOT NULL,
  outcome TEXT NOT NULL,
  period TEXT NOT NULL,
  amount_mc INTEGER NOT NULL,
  kid TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  envelope TEXT NOT NULL,
  UNIQUE (key_id, seq)
) STRICT;
CREATE INDEX receipts_org ON receipts(org_id, issued_at);

CREATE TABLE audit (
  id INTEGER PRIMARY KEY,
  at INTEGER NOT NULL,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  tool TEXT NOT NULL,
  outcome TEXT NOT NULL,
  http_status INTEGER NOT NULL,
  price_mc INTEGER NOT NULL,
  upstream_cost_mc INTEGER NOT NULL,
  margin_mc INTEGER NOT NULL,
  receipt_id TEXT
) STRICT;
CREATE INDEX audit_org ON audit(org_id, at);
CREATE INDEX audit_key ON audit(key_id, at);

CREATE TABLE signing_keys (
  kid TEXT PRIMARY KEY,
  public_jwk TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  retired_at INTEGER
) STRICT;

-- Receipts and the audit log are append-only: a changed or deleted row would let someone rewrite
-- what an agent was charged. These fire for every writer, raw SQL included.
CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
`;

// The public sandbox: its settings (one row while it is on) and the keys handed out per network
// and UTC day. The conditional upsert on sandbox_grants is the whole limit: no read-then-write.
const V2 = `
CREATE TABLE sandbox (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  tools TEXT NOT NULL,
  budget_mc INTEGER NOT NULL CHECK (budget_mc >= 0),
  ttl_s INTEGER NOT NULL CHECK (ttl_s > 0),
  updated_at INTEGER NOT NULL
) STRICT;

CREATE TABLE sandbox_grants (
  day TEXT NOT NULL,
  network TEXT NOT NULL,
  count INTEGER NOT NULL CHECK (count >= 1),
  PRIMARY KEY (day, network)
) STRICT, WITHOUT ROWID;
`;

// A cap on sandbox keys per UTC day across all networks: whoever holds many networks (an IPv6
// /48 holds 65,536 /64s) could otherwise take a budget per network. Counted in sandbox_grants
// under the network '*', which no real network is written as.
const V3 = `
ALTER TABLE sandbox ADD COLUMN keys_per_day INTEGER NOT NULL DEFAULT 200 CHECK (keys_per_day >= 1);
`;

// The answers of charged calls whose agent had disconnected before the answer could be written:
// kept a bounded time, so the agent can still fetch what it paid for (GET
// /v1/receipts/{id}/result). Only those calls are written here, never every result.
const V4 = `
CREATE TABLE held_results (
  receipt_id TEXT PRIMARY KEY,
  key_id TEXT NOT NULL,
  result TEXT NOT NULL,
  held_until INTEGER NOT NULL
) STRICT;
CREATE INDEX held_results_key ON held_results(key_id, held_until);
CREATE INDEX held_results_until ON held_results(held_until);
`;

// The fields of an upstream's tool listing that agents see unchanged (title, outputSchema,
// annotations, _meta), as one JSON object: a protocol revision that adds such a field needs no
// new column. Tools registered before this migration show them after a refresh.
const V5 = `
ALTER TABLE tools ADD COLUMN listing TEXT NOT NULL DEFAULT '{}';
`;

// REST upstreams and upstream credentials. An upstream has a kind; a REST one keeps where its
// OpenAPI document comes from (its URL, or the document itself, read again at refresh), and each
// of its tools the operation its requests are built from. A credential's settings (its type,
// token URL, client id: never a secret) sit on the upstream; its secrets and tokens are sealed
// fields, one row each, written and deleted field by field.
const V6 = `
ALTER TABLE upstreams ADD COLUMN kind TEXT NOT NULL DEFAULT 'mcp' CHECK (kind IN ('mcp', 'rest'));
ALTER TABLE upstreams ADD COLUMN auth TEXT;
ALTER TABLE upstreams ADD COLUMN openapi_url TEXT;
ALTER TABLE upstreams ADD COLUMN openapi TEXT;
ALTER TABLE tools ADD COLUMN operation TEXT;

CREATE TABLE upstream_credentials (
  upstream TEXT NOT NULL REFERENCES upstreams(name),
  field TEXT NOT NULL,
  sealed TEXT NOT NULL,
  PRIMARY KEY (upstream, field)
) STRICT, WITHOUT ROWID;
`;

// Calls that wait for a person (core/desk/approval.ts). A key's threshold; on a reservation, the
// spend ask sent for it (its approval id, the hash of the ask as sent, when the approver lets it
// expire), its stage (awaiting a decision, or claimed by the one repeat that used the approval,
// whose call started at claimed_at) and the signed decision it binds once claimed. An approval id
// names one reservation: the unique index is the "minted here, for this reservation" rule.
const V7 = `
ALTER TABLE keys ADD COLUMN approve_above_mc INTEGER CHECK (approve_above_mc IS NULL OR approve_above_mc >= 0);
ALTER TABLE reservations ADD COLUMN approval_id TEXT;
ALTER TABLE reservations ADD COLUMN ask_sha256 TEXT;
ALTER TABLE reservations ADD COLUMN approval_expires_at INTEGER;
ALTER TABLE reservations ADD COLUMN approval_stage TEXT CHECK (approval_stage IS NULL OR approval_stage IN ('awaiting', 'claimed'));
ALTER TABLE reservations ADD COLUMN approval TEXT;
ALTER TABLE reservations ADD COLUMN claimed_at INTEGER;
CREATE UNIQUE INDEX reservations_approval ON reservations(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX reservations_awaiting ON reservations(approval_expires_at) WHERE state = 'open' AND approval_stage = 'awaiting';
`;

// An org's receipts in rowid order (an index on org_id alone ends with the rowid), so an org's
// export goes a page at a time through its own receipts, never the whole table.
const RECEIPTS_BY_ORG = `
CREATE INDEX receipts_by_org ON receipts(org_id);
`;

// Organization budgets (SPEC 8.16): the org's spend in its latest period beside its budget
// (under the same CHECK as a key's), the spend of every period kept so a refund goes back to the
// period it was reserved from, the org period each reservation drew on, and the signed budget
// records of each org (append-only, one chain per org, each top-up reference once).
const V9 = `
CREATE TABLE org_budgets (
  org_id TEXT PRIMARY KEY REFERENCES orgs(id),
  budget_mc INTEGER CHECK (budget_mc IS NULL OR budget_mc >= 0),
  reset TEXT NOT NULL CHECK (reset IN ('none', 'daily', 'monthly')),
  period TEXT NOT NULL,
  spent_mc INTEGER NOT NULL DEFAULT 0,
  CHECK (spent_mc >= 0 AND (budget_mc IS NULL OR spent_mc <= budget_mc))
) STRICT;

CREATE TABLE org_spend (
  org_id TEXT NOT NULL REFERENCES orgs(id),
  period TEXT NOT NULL,
  spent_mc INTEGER NOT NULL CHECK (spent_mc >= 0),
  PRIMARY KEY (org_id, period)
) STRICT, WITHOUT ROWID;

ALTER TABLE reservations ADD COLUMN org_period TEXT;

CREATE TABLE org_records (
  org_id TEXT NOT NULL REFERENCES orgs(id),
  seq INTEGER NOT NULL CHECK (seq >= 1),
  id TEXT NOT NULL UNIQUE,
  type TEXT NOT NULL CHECK (type IN ('topup', 'budget_set')),
  issued_at INTEGER NOT NULL,
  amount_mc INTEGER NOT NULL CHECK (amount_mc >= 0),
  budget_mc INTEGER,
  reference TEXT,
  sha256 TEXT NOT NULL,
  envelope TEXT NOT NULL,
  PRIMARY KEY (org_id, seq),
  UNIQUE (org_id, reference)
) STRICT;
CREATE TRIGGER org_records_no_update BEFORE UPDATE ON org_records BEGIN SELECT RAISE(ABORT, 'budget records are append-only'); END;
CREATE TRIGGER org_records_no_delete BEFORE DELETE ON org_records BEGIN SELECT RAISE(ABORT, 'budget records are append-only'); END;
`;

// Budget alerts (SPEC 8.17): the settled charges of each key and org period (what thresholds
// are measured against; an open reservation may still be refunded), the thresholds of each key
// and org, and the alert outbox: one row per (scope, subject, period, threshold, budget),
// written in the transaction of the charge or refusal that raised it, whatever the concurrency.
// A lease is its own column beside the next attempt, so a restarted desk (the only one on its
// data directory) can free the leases of the process that died.
const V10 = `
ALTER TABLE spend ADD COLUMN charged_mc INTEGER NOT NULL DEFAULT 0 CHECK (charged_mc >= 0);
UPDATE spend SET charged_mc = coalesce(
  (SELECT sum(r.amount_mc) FROM receipts r WHERE r.key_id = spend.key_id AND r.period = spend.period AND r.outcome = 'charged'), 0);
ALTER TABLE org_spend ADD COLUMN charged_mc INTEGER NOT NULL DEFAULT 0 CHECK (charged_mc >= 0);
ALTER TABLE keys ADD COLUMN alert_thresholds TEXT NOT NULL DEFAULT '[80,100]';
ALTER TABLE orgs ADD COLUMN alert_thresholds TEXT NOT NULL DEFAULT '[80,100]';

CREATE TABLE alerts (
  id TEXT PRIMARY KEY,
  scope TEXT NOT NULL CHECK (scope IN ('key', 'org')),
  subject_id TEXT NOT NULL,
  org_id TEXT NOT NULL,
  key_id TEXT NOT NULL,
  period TEXT NOT NULL,
  threshold_pct INTEGER NOT NULL CHECK (threshold_pct BETWEEN 1 AND 100),
  budget_mc INTEGER NOT NULL,
  body TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  next_at INTEGER NOT NULL,
  leased_until INTEGER,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT,
  delivered_at INTEGER,
  gave_up_at INTEGER,
  UNIQUE (scope, subject_id, period, threshold_pct, budget_mc)
) STRICT;
CREATE INDEX alerts_due ON alerts(next_at) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX alerts_org ON alerts(org_id, created_at);
-- What an alert says is fixed once written (its id is what receivers dedupe on): only its
-- delivery state changes, and nothing deletes one.
CREATE TRIGGER alerts_fixed BEFORE UPDATE OF id, scope, subject_id, org_id, key_id, period, threshold_pct, budget_mc, body, created_at ON alerts
  BEGIN SELECT RAISE(ABORT, 'an alert is fixed once written'); END;
CREATE TRIGGER alerts_no_delete BEFORE DELETE ON alerts BEGIN SELECT RAISE(ABORT, 'alerts are kept'); END;
`;

// What is signed, stored once (SPEC 8.2, RELIABILITY "Storage per call"): a receipt row is
// its canonical payload text, its 64-byte signature, the payload's SHA-256 (the next link's
// prev_sha256) and its issue time; every other column is read out of the payload itself (virtual
// generated columns, indexed where the queries need them), so no column can say other than what
// was signed. The envelope is derived when read (core/receipt/stored.ts); a converted row whose
// envelope text is not exactly the derived one keeps its text. Settled reservations are pruned in
// housekeeping (money.ts pruneSettled) once nothing reads them: what desk check and a first org
// budget need of them is folded, in the deleting transaction, into settled_pruned.
const V11 = `
CREATE TABLE receipts_signed (
  payload TEXT NOT NULL,
  signature BLOB NOT NULL CHECK (length(signature) = 64),
  sha256 BLOB NOT NULL CHECK (length(sha256) = 32),
  issued_at INTEGER NOT NULL,
  envelope TEXT,
  id TEXT NOT NULL AS (json_extract(payload, '$.id')) VIRTUAL,
  org_id TEXT NOT NULL AS (json_extract(payload, '$.org_id')) VIRTUAL,
  key_id TEXT NOT NULL AS (json_extract(payload, '$.key_id')) VIRTUAL,
  seq INTEGER NOT NULL AS (json_extract(payload, '$.seq')) VIRTUAL,
  tool TEXT NOT NULL AS (json_extract(payload, '$.tool')) VIRTUAL,
  outcome TEXT NOT NULL AS (json_extract(payload, '$.outcome')) VIRTUAL,
  period TEXT NOT NULL AS (json_extract(payload, '$.period')) VIRTUAL,
  amount_mc INTEGER NOT NULL AS (json_extract(payload, '$.amount_mc')) VIRTUAL,
  kid TEXT NOT NULL AS (json_extract(payload, '$.kid')) VIRTUAL
) STRICT;

CREATE TABLE settled_pruned (
  org_id TEXT NOT NULL,
  -- the org period the reservations drew on; '' for none
  org_period TEXT NOT NULL,
  -- the UTC day they were made on (a first org budget counts the charges of its period so far)
  day TEXT NOT NULL,
  settled INTEGER NOT NULL CHECK (settled >= 0),
  charged_mc INTEGER NOT NULL CHECK (charged_mc >= 0),
  PRIMARY KEY (org_id, org_period, day)
) STRICT, WITHOUT ROWID;
CREATE INDEX reservations_prunable ON reservations(created_at) WHERE state = 'settled' AND approval_id IS NULL;
`;

/** Indexes and triggers of the receipts table, made after its rows are in. */
const V11_RECEIPTS_AFTER = `
DROP TABLE receipts;
ALTER TABLE receipts_signed RENAME TO receipts;
CREATE UNIQUE INDEX receipts_id ON receipts(id);
CREATE UNIQUE INDEX receipts_chain ON receipts(key_id, seq);
CREATE INDEX receipts_by_org ON receipts(org_id);
CREATE TRIGGER receipts_no_update BEFORE UPDATE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
CREATE TRIGGER receipts_no_delete BEFORE DELETE ON receipts BEGIN SELECT RAISE(ABORT, 'receipts are append-only'); END;
`;

type LegacyReceiptRow = {
  rowid: number;
  id: string;
  org_id: string;
  key_id: string;
  seq: number;
  issued_at: number;
  tool: string;
  outcome: string;
  period: string;
  amount_mc: number;
  kid: string;
  sha256: string;
  envelope: string;
};

/**
 * Moves every receipt to the stored-once form, in rowid order (the export's order). A row whose
 * columns say other than its payload is refused, not converted: converting it would erase what
 * desk check would have named.
 */
function convertReceipts(db: Database): void {
  const insert = db.query("INSERT INTO receipts_signed (rowid, payload, signature, sha256, issued_at, envelope) VALUES (?, ?, ?, ?, ?, ?)");
  const page = db.query("SELECT rowid, * FROM receipts WHERE rowid > ? ORDER BY rowid LIMIT 1000");
  for (let after = 0; ; ) {
    const rows = page.all(after) as LegacyReceiptRow[];
    if (rows.length === 0) break;
    for (const r of rows) {
      const signed = signedOf(JSON.parse(r.envelope) as { payload: string; signature: string });
      const receipt = readableReceipt(signed.payload);
      const same =
        rowMatches(
          {
            id: r.id,
            orgId: r.org_id,
            keyId: r.key_id,
            seq: r.seq,
            issuedAt: r.issued_at,
            tool: r.tool,
            outcome: r.outcome as ReceiptOutcome,
            period: r.period,
            amountMc: r.amount_mc,
            kid: r.kid,
            sha256: r.sha256,
          },
          receipt,
          sha256Hex(signed.payload),
        ) && signed.signature.length === 64;
      if (!same) throw new LedgerOpenError(`receipt ${JSON.stringify(r.id)} differs from what was signed: run desk check with the version that wrote it`);
      const derived = envelopeText(signed);
      insert.run(r.rowid, signed.payload, signed.signature, Buffer.from(r.sha256, "hex"), r.issued_at, derived === r.envelope ? null : r.envelope);
    }
    after = rows[rows.length - 1]!.rowid;
  }
  db.run(V11_RECEIPTS_AFTER);
}

// A receipted call's audit entry is read out of its receipt (core/desk/audit-log.ts; SPEC 8.2):
// the audit table keeps the calls without a receipt. An audit row whose receipt says exactly what
// it says (at = issued_at, and every other column as the receipt derives it) is deleted, the
// append-only trigger lifted for this transaction only; a row that says anything else is kept
// and answered as it is. audit_receipt finds the kept rows, so their receipts are not answered
// twice. No row naming a receipt is written after this migration: a trigger refuses one, since an
// inserted row would stand in for its receipt's signed entry (hiding or re-dating that call).
const V12 = `
DROP TRIGGER audit_no_delete;
DELETE FROM audit WHERE receipt_id IS NOT NULL AND EXISTS (
  SELECT 1 FROM receipts r WHERE r.id = audit.receipt_id
    AND r.issued_at = audit.at AND r.org_id = audit.org_id AND r.key_id = audit.key_id AND r.tool = audit.tool
    AND r.outcome = audit.outcome AND json_extract(r.payload, '$.http_status') = audit.http_status
    AND json_extract(r.payload, '$.price_mc') = audit.price_mc AND json_extract(r.payload, '$.upstream_cost_mc') = audit.upstream_cost_mc
    AND audit.margin_mc = CASE WHEN r.outcome = 'charged' THEN audit.price_mc - audit.upstream_cost_mc ELSE 0 END);
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE INDEX audit_receipt ON audit(receipt_id) WHERE receipt_id IS NOT NULL;
CREATE TRIGGER audit_no_receipt_rows BEFORE INSERT ON audit WHEN NEW.receipt_id IS NOT NULL
  BEGIN SELECT RAISE(ABORT, 'a receipted call is audited by its receipt'); END;
`;

export const DESK_MIGRATIONS: readonly Migration[] = [
  { name: "desk ledger", sql: V1 },
  { name: "desk sandbox", sql: V2 },
  { name: "desk sandbox daily cap", sql: V3 },
  { name: "desk held results", sql: V4 },
  { name: "desk tool listing fields", sql: V5 },
  { name: "desk rest upstreams and credentials", sql: V6 },
  { name: "desk approvals", sql: V7 },
  { name: "desk receipts by org", sql: RECEIPTS_BY_ORG },
  { name: "desk org budgets", sql: V9 },
  { name: "desk budget alerts", sql: V10 },
  { name: "desk receipts stored once, settled reservations pruned", sql: V11, convert: convertReceipts },
  { name: "desk audit of receipted calls read from their receipts", sql: V12 },
];
