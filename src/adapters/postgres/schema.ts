// The desk ledger's schema in PostgreSQL, as versioned migrations. It holds what the SQLite
// ledger holds (orgs, keys, spend, reservations, receipts, audit, upstreams, tools, signing keys,
// meta, the sandbox, held results) and what several nodes on one database need: node leases, the
// node of each reservation and signing key, a receipt chain head per key, a catalog version.
// Never edit a migration that has shipped: append a new one.
//
// Conventions: money is bigint millicents; a time the desk's clock gives (created_at, issued_at,
// expires_at of a key ...) is bigint milliseconds, as in SQLite and the receipts; a time only
// the database may judge (a node's lease) is timestamptz from the database's own clock, so nodes
// whose clocks disagree still agree on whose lease has run out. Strings compared or sorted by the
// ledger (periods, hours, names) are COLLATE "C": byte order, as SQLite compares, whatever the
// database's locale. JSON the desk passes on unchanged (a tool's input schema and listing) is
// text, because jsonb would reorder its keys.
import type { SQL } from "bun";
import { rowMatches } from "../../core/desk/check-receipt.ts";
import type { ReceiptOutcome } from "../../core/desk/outcomes.ts";
import { envelopeText, readableReceipt, sha256Hex, signedOf } from "../../core/receipt/index.ts";
import { SCHEMA } from "./connection.ts";

/** One SQL script, and for rows SQL alone cannot convert a step run after it in the same transaction. */
export type Migration = { name: string; sql: string; convert?: (tx: SQL) => Promise<void> };

const V1 = `
CREATE TABLE meta (
  name text COLLATE "C" PRIMARY KEY,
  value text NOT NULL
);

-- One row per desk node; the lease is the database's word on whether the node is alive.
-- epoch grows each time the id registers again, so an old process cannot renew a new lease.
CREATE TABLE nodes (
  id text COLLATE "C" PRIMARY KEY,
  epoch bigint NOT NULL CHECK (epoch >= 1),
  started_at timestamptz NOT NULL,
  renewed_at timestamptz NOT NULL,
  expires_at timestamptz NOT NULL
);

CREATE TABLE orgs (
  id text COLLATE "C" PRIMARY KEY,
  name text NOT NULL,
  created_at bigint NOT NULL
);

CREATE TABLE upstreams (
  name text COLLATE "C" PRIMARY KEY,
  url text NOT NULL,
  sealed_headers text,
  header_names text[] NOT NULL,
  created_at bigint NOT NULL,
  refreshed_at bigint NOT NULL
);

CREATE TABLE tools (
  name text COLLATE "C" PRIMARY KEY,
  upstream text COLLATE "C" NOT NULL REFERENCES upstreams(name),
  upstream_tool text NOT NULL,
  description text NOT NULL,
  input_schema text NOT NULL CHECK (input_schema::json IS NOT NULL),
  listing text NOT NULL DEFAULT '{}' CHECK (listing::json IS NOT NULL),
  price_mc bigint NOT NULL DEFAULT 0 CHECK (price_mc >= 0),
  upstream_cost_mc bigint NOT NULL DEFAULT 0 CHECK (upstream_cost_mc >= 0),
  active boolean NOT NULL DEFAULT true
);

-- spent_mc is the spend of the key's current period; the CHECK makes spending above the budget
-- impossible whatever writes the row. receipt_seq and receipt_head_sha256 are the head of the
-- key's receipt chain: a receipt takes its seq by updating this row, whose lock every other
-- writer of the key's chain waits for, so concurrent nodes append one unbroken chain.
CREATE TABLE keys (
  id text COLLATE "C" PRIMARY KEY,
  org_id text COLLATE "C" NOT NULL REFERENCES orgs(id),
  name text NOT NULL,
  lookup text COLLATE "C" NOT NULL UNIQUE,
  secret_sha256 bytea NOT NULL,
  budget_mc bigint NOT NULL CHECK (budget_mc >= 0),
  spent_mc bigint NOT NULL DEFAULT 0,
  reset text NOT NULL CHECK (reset IN ('none', 'daily', 'monthly')),
  period text COLLATE "C" NOT NULL,
  allow text[] NOT NULL,
  prices jsonb NOT NULL CHECK (jsonb_typeof(prices) = 'object'),
  expires_at bigint,
  revoked_at bigint,
  created_at bigint NOT NULL,
  fail_hour text COLLATE "C" NOT NULL DEFAULT '',
  fail_count integer NOT NULL DEFAULT 0 CHECK (fail_count >= 0),
  receipt_seq bigint NOT NULL DEFAULT 0 CHECK (receipt_seq >= 0),
  receipt_head_sha256 text COLLATE "C",
  CONSTRAINT keys_spent_within_budget CHECK (spent_mc >= 0 AND spent_mc <= budget_mc)
);
CREATE INDEX keys_org ON keys(org_id);

-- What each period of each key spent (reservations in flight included), kept after a reset so
-- a refund goes back to the period its reservation came from.
CREATE TABLE spend (
  key_id text COLLATE "C" NOT NULL REFERENCES keys(id),
  period text COLLATE "C" NOT NULL,
  spent_mc bigint NOT NULL CHECK (spent_mc >= 0),
  PRIMARY KEY (key_id, period)
);

-- hour is the UTC hour the call was counted in against the failure limit (a charge takes the
-- count back in that hour); node_id is the node that took it, whose lease decides who may
-- refund it as abandoned.
CREATE TABLE reservations (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  key_id text COLLATE "C" NOT NULL REFERENCES keys(id),
  org_id text COLLATE "C" NOT NULL,
  node_id text COLLATE "C" NOT NULL REFERENCES nodes(id),
  tool text NOT NULL,
  period text COLLATE "C" NOT NULL,
  hour text COLLATE "C" NOT NULL,
  price_mc bigint NOT NULL CHECK (price_mc >= 0),
  upstream_cost_mc bigint NOT NULL CHECK (upstream_cost_mc >= 0),
  params_sha256 text NOT NULL,
  created_at bigint NOT NULL,
  state text NOT NULL CHECK (state IN ('open', 'settled')),
  outcome text,
  receipt_id text,
  CHECK ((state = 'open') = (outcome IS NULL AND receipt_id IS NULL))
);
CREATE INDEX reservations_open ON reservations(node_id, created_at) WHERE state = 'open';

-- n is the order receipts were written in (exports list them so; per key it follows seq).
CREATE TABLE receipts (
  n bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id text COLLATE "C" PRIMARY KEY,
  org_id text COLLATE "C" NOT NULL,
  key_id text COLLATE "C" NOT NULL,
  seq bigint NOT NULL CHECK (seq >= 1),
  issued_at bigint NOT NULL,
  tool text NOT NULL,
  outcome text NOT NULL,
  period text COLLATE "C" NOT NULL,
  amount_mc bigint NOT NULL CHECK (amount_mc >= 0),
  kid text NOT NULL,
  sha256 text COLLATE "C" NOT NULL,
  envelope text NOT NULL,
  UNIQUE (key_id, seq)
);
CREATE INDEX receipts_org ON receipts(org_id, issued_at);
CREATE INDEX receipts_key ON receipts(key_id, issued_at);

CREATE TABLE audit (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at bigint NOT NULL,
  org_id text COLLATE "C" NOT NULL,
  key_id text COLLATE "C" NOT NULL,
  tool text NOT NULL,
  outcome text NOT NULL,
  http_status integer NOT NULL CHECK (http_status BETWEEN 100 AND 599),
  price_mc bigint NOT NULL,
  upstream_cost_mc bigint NOT NULL,
  margin_mc bigint NOT NULL,
  receipt_id text
);
CREATE INDEX audit_org ON audit(org_id, at);
CREATE INDEX audit_key ON audit(key_id, at);

-- Every node's receipt keys, current and retired: each node's key set lists them all, so a
-- receipt from any node verifies with the key set fetched from any node.
CREATE TABLE signing_keys (
  kid text COLLATE "C" PRIMARY KEY,
  node_id text COLLATE "C" NOT NULL REFERENCES nodes(id),
  public_jwk text NOT NULL,
  created_at bigint NOT NULL,
  retired_at bigint
);
CREATE UNIQUE INDEX signing_keys_current ON signing_keys(node_id) WHERE retired_at IS NULL;

CREATE TABLE sandbox (
  id integer PRIMARY KEY CHECK (id = 1),
  tools text[] NOT NULL,
  budget_mc bigint NOT NULL CHECK (budget_mc >= 0),
  ttl_s integer NOT NULL CHECK (ttl_s > 0),
  keys_per_day integer NOT NULL DEFAULT 200 CHECK (keys_per_day >= 1),
  updated_at bigint NOT NULL
);

CREATE TABLE sandbox_grants (
  day text COLLATE "C" NOT NULL,
  network text COLLATE "C" NOT NULL,
  count integer NOT NULL CHECK (count >= 1),
  PRIMARY KEY (day, network)
);

-- n orders a key's held results, newest last (a key keeps its newest few).
CREATE TABLE held_results (
  n bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  receipt_id text COLLATE "C" PRIMARY KEY,
  key_id text COLLATE "C" NOT NULL,
  result text NOT NULL,
  held_until bigint NOT NULL
);
CREATE INDEX held_results_key ON held_results(key_id, held_until);
CREATE INDEX held_results_until ON held_results(held_until);

-- Receipts and the audit log are append-only: a changed or deleted row would let someone rewrite
-- what an agent was charged. The triggers refuse every UPDATE, DELETE and TRUNCATE through SQL,
-- whoever sends it; only the tables' owner can drop them (as anyone holding the SQLite file can
-- rewrite it), so the desk's role should not be the owner where that matters.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END $$;
CREATE TRIGGER receipts_append_only BEFORE UPDATE OR DELETE ON receipts FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER receipts_no_truncate BEFORE TRUNCATE ON receipts FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER audit_no_truncate BEFORE TRUNCATE ON audit FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();

-- The catalog's version: every statement that changes an upstream or a tool (its price
-- included) moves it, in the same transaction. Each node keeps the catalog in memory and reads
-- this one row at most once a second to learn it must reload.
CREATE TABLE catalog_version (
  id integer PRIMARY KEY CHECK (id = 1),
  version bigint NOT NULL
);
INSERT INTO catalog_version (id, version) VALUES (1, 1);
CREATE FUNCTION bump_catalog_version() RETURNS trigger LANGUAGE plpgsql SET search_path = ${SCHEMA} AS $$
BEGIN
  UPDATE catalog_version SET version = version + 1 WHERE id = 1;
  RETURN NULL;
END $$;
CREATE TRIGGER upstreams_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON upstreams FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
CREATE TRIGGER tools_catalog AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON tools FOR EACH STATEMENT EXECUTE FUNCTION bump_catalog_version();
`;

// REST upstreams and upstream credentials (as SQLite's V6). An upstream has a kind; a REST one
// keeps where its OpenAPI document comes from (its URL, or the document itself, read again at
// refresh), and each of its tools the operation its requests are built from. A credential's
// settings (never a secret) sit on the upstream; its secrets and tokens are sealed fields, one
// row each, written and deleted field by field, committed durably (synchronous_commit stays on).
const V2 = `
ALTER TABLE upstreams ADD COLUMN kind text NOT NULL DEFAULT 'mcp' CHECK (kind IN ('mcp', 'rest'));
ALTER TABLE upstreams ADD COLUMN auth text CHECK (auth IS NULL OR auth::json IS NOT NULL);
ALTER TABLE upstreams ADD COLUMN openapi_url text;
ALTER TABLE upstreams ADD COLUMN openapi text CHECK (openapi IS NULL OR openapi::json IS NOT NULL);
ALTER TABLE tools ADD COLUMN operation text CHECK (operation IS NULL OR operation::json IS NOT NULL);

CREATE TABLE upstream_credentials (
  upstream text COLLATE "C" NOT NULL REFERENCES upstreams(name),
  field text COLLATE "C" NOT NULL,
  sealed text NOT NULL,
  PRIMARY KEY (upstream, field)
);
`;

// Calls that wait for a person (core/desk/approval.ts), as in SQLite's migration 7: a key's
// threshold; on a reservation, the spend ask sent for it, its stage (awaiting a decision, or
// claimed by the one repeat that used the approval, on the node that claimed it, whose call
// started at claimed_at) and the signed decision it binds once claimed. An approval id names one
// reservation.
const V3 = `
ALTER TABLE keys ADD COLUMN approve_above_mc bigint CHECK (approve_above_mc IS NULL OR approve_above_mc >= 0);
ALTER TABLE reservations ADD COLUMN approval_id text COLLATE "C";
ALTER TABLE reservations ADD COLUMN ask_sha256 text;
ALTER TABLE reservations ADD COLUMN approval_expires_at bigint;
ALTER TABLE reservations ADD COLUMN approval_stage text CHECK (approval_stage IS NULL OR approval_stage IN ('awaiting', 'claimed'));
ALTER TABLE reservations ADD COLUMN approval text CHECK (approval IS NULL OR approval::json IS NOT NULL);
ALTER TABLE reservations ADD COLUMN claimed_at bigint;
CREATE UNIQUE INDEX reservations_approval ON reservations(approval_id) WHERE approval_id IS NOT NULL;
CREATE INDEX reservations_awaiting ON reservations(approval_expires_at) WHERE state = 'open' AND approval_stage = 'awaiting';
`;

// Organization budgets (as SQLite's "desk org budgets"): the org's spend in its latest period
// beside its budget, under a CHECK as a key's; the spend of every org period, so a refund goes
// back to the period it was reserved from; the org period each reservation drew on; and each
// org's signed budget records (append-only, one chain per org, a top-up's reference once).
const V4 = `
CREATE TABLE org_budgets (
  org_id text COLLATE "C" PRIMARY KEY REFERENCES orgs(id),
  budget_mc bigint CHECK (budget_mc IS NULL OR budget_mc >= 0),
  reset text NOT NULL CHECK (reset IN ('none', 'daily', 'monthly')),
  period text COLLATE "C" NOT NULL,
  spent_mc bigint NOT NULL DEFAULT 0,
  CONSTRAINT org_budgets_spent_within_budget CHECK (spent_mc >= 0 AND (budget_mc IS NULL OR spent_mc <= budget_mc))
);

CREATE TABLE org_spend (
  org_id text COLLATE "C" NOT NULL REFERENCES orgs(id),
  period text COLLATE "C" NOT NULL,
  spent_mc bigint NOT NULL CHECK (spent_mc >= 0),
  PRIMARY KEY (org_id, period)
);

ALTER TABLE reservations ADD COLUMN org_period text COLLATE "C";
CREATE INDEX reservations_org ON reservations(org_id, created_at);

CREATE TABLE org_records (
  org_id text COLLATE "C" NOT NULL REFERENCES orgs(id),
  seq bigint NOT NULL CHECK (seq >= 1),
  id text COLLATE "C" NOT NULL UNIQUE,
  type text NOT NULL CHECK (type IN ('topup', 'budget_set')),
  issued_at bigint NOT NULL,
  amount_mc bigint NOT NULL CHECK (amount_mc >= 0),
  budget_mc bigint,
  reference text,
  sha256 text COLLATE "C" NOT NULL,
  envelope text NOT NULL,
  PRIMARY KEY (org_id, seq),
  UNIQUE (org_id, reference)
);
CREATE TRIGGER org_records_append_only BEFORE UPDATE OR DELETE ON org_records FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER org_records_no_truncate BEFORE TRUNCATE ON org_records FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
`;

// Budget alerts (as SQLite's "desk budget alerts"): the settled charges of each key and org
// period, the thresholds of each key and org, and the alert outbox, one row per (scope, subject,
// period, threshold, budget) written in the charge's or refusal's own transaction. A lease names
// the node that holds it, so a restarted node frees its own dead attempts and never another
// live node's; n orders alerts written at one moment.
const V5 = `
ALTER TABLE spend ADD COLUMN charged_mc bigint NOT NULL DEFAULT 0 CHECK (charged_mc >= 0);
UPDATE spend SET charged_mc = coalesce(
  (SELECT sum(r.amount_mc) FROM receipts r WHERE r.key_id = spend.key_id AND r.period = spend.period AND r.outcome = 'charged'), 0);
ALTER TABLE org_spend ADD COLUMN charged_mc bigint NOT NULL DEFAULT 0 CHECK (charged_mc >= 0);
ALTER TABLE keys ADD COLUMN alert_thresholds integer[] NOT NULL DEFAULT '{80,100}';
ALTER TABLE orgs ADD COLUMN alert_thresholds integer[] NOT NULL DEFAULT '{80,100}';

CREATE TABLE alerts (
  n bigint GENERATED ALWAYS AS IDENTITY UNIQUE,
  id text COLLATE "C" PRIMARY KEY,
  scope text NOT NULL CHECK (scope IN ('key', 'org')),
  subject_id text COLLATE "C" NOT NULL,
  org_id text COLLATE "C" NOT NULL,
  key_id text COLLATE "C" NOT NULL,
  period text COLLATE "C" NOT NULL,
  threshold_pct integer NOT NULL CHECK (threshold_pct BETWEEN 1 AND 100),
  budget_mc bigint NOT NULL,
  body text NOT NULL,
  created_at bigint NOT NULL,
  next_at bigint NOT NULL,
  leased_until bigint,
  leased_by text COLLATE "C",
  attempts integer NOT NULL DEFAULT 0,
  last_error text,
  delivered_at bigint,
  gave_up_at bigint,
  UNIQUE (scope, subject_id, period, threshold_pct, budget_mc)
);
CREATE INDEX alerts_due ON alerts(next_at) WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX alerts_org ON alerts(org_id, created_at);
-- What an alert says is fixed once written (receivers dedupe on its id): only its delivery
-- state changes, and nothing deletes one.
CREATE FUNCTION alert_fixed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF (NEW.n, NEW.id, NEW.scope, NEW.subject_id, NEW.org_id, NEW.key_id, NEW.period, NEW.threshold_pct, NEW.budget_mc, NEW.body, NEW.created_at)
     IS DISTINCT FROM (OLD.n, OLD.id, OLD.scope, OLD.subject_id, OLD.org_id, OLD.key_id, OLD.period, OLD.threshold_pct, OLD.budget_mc, OLD.body, OLD.created_at) THEN
    RAISE EXCEPTION 'an alert is fixed once written' USING ERRCODE = 'integrity_constraint_violation';
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER alerts_fixed BEFORE UPDATE ON alerts FOR EACH ROW EXECUTE FUNCTION alert_fixed();
CREATE TRIGGER alerts_no_delete BEFORE DELETE ON alerts FOR EACH ROW EXECUTE FUNCTION refuse_change();
CREATE TRIGGER alerts_no_truncate BEFORE TRUNCATE ON alerts FOR EACH STATEMENT EXECUTE FUNCTION refuse_change();
`;

// What is signed, stored once (as SQLite's migration 11): a receipt row keeps its canonical
// payload text and 64-byte signature beside the columns the queries filter on; its tool, kid and
// hash are read out of the payload, and the envelope is derived when read (core/receipt/stored.ts).
// A converted row whose envelope text is not exactly the derived one keeps its text. Settled
// reservations are pruned in housekeeping once nothing reads them; what desk check and a first org
// budget need of them is folded, in the deleting statement, into settled_pruned.
const V6 = `
ALTER TABLE receipts ADD COLUMN payload text, ADD COLUMN signature bytea CHECK (octet_length(signature) = 64);
ALTER TABLE receipts ALTER COLUMN envelope DROP NOT NULL;
DROP INDEX receipts_key;

CREATE TABLE settled_pruned (
  org_id text COLLATE "C" NOT NULL,
  org_period text COLLATE "C" NOT NULL,
  day text COLLATE "C" NOT NULL,
  settled bigint NOT NULL CHECK (settled >= 0),
  charged_mc bigint NOT NULL CHECK (charged_mc >= 0),
  PRIMARY KEY (org_id, org_period, day)
);
CREATE INDEX reservations_prunable ON reservations(created_at) WHERE state = 'settled' AND approval_id IS NULL;
`;

const V6_AFTER = `
ALTER TABLE receipts ALTER COLUMN payload SET NOT NULL, ALTER COLUMN signature SET NOT NULL;
ALTER TABLE receipts DROP COLUMN tool, DROP COLUMN kid, DROP COLUMN sha256;
`;

/**
 * Moves every receipt to the stored-once form, a page at a time in write order. A row whose
 * columns say other than its payload is refused, not converted: converting it would erase what
 * desk check would have named. The append-only trigger is off for this transaction only.
 */
async function convertReceipts(tx: SQL): Promise<void> {
  await tx`ALTER TABLE receipts DISABLE TRIGGER receipts_append_only`;
  for (let after = 0n; ; ) {
    const rows = (await tx`
      SELECT n, id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope
        FROM receipts WHERE n > ${after}::bigint ORDER BY n LIMIT 1000`) as {
      n: bigint;
      id: string;
      org_id: string;
      key_id: string;
      seq: bigint;
      issued_at: bigint;
      tool: string;
      outcome: string;
      period: string;
      amount_mc: bigint;
      kid: string;
      sha256: string;
      envelope: string;
    }[];
    if (rows.length === 0) break;
    const ns: string[] = [];
    const payloads: string[] = [];
    const signatures: string[] = [];
    const envelopes: (string | null)[] = [];
    for (const r of rows) {
      const signed = signedOf(JSON.parse(r.envelope) as { payload: string; signature: string });
      const receipt = readableReceipt(signed.payload);
      const same =
        rowMatches(
          {
            id: r.id,
            orgId: r.org_id,
            keyId: r.key_id,
            seq: Number(r.seq),
            issuedAt: Number(r.issued_at),
            tool: r.tool,
            outcome: r.outcome as ReceiptOutcome,
            period: r.period,
            amountMc: Number(r.amount_mc),
            kid: r.kid,
            sha256: r.sha256,
          },
          receipt,
          sha256Hex(signed.payload),
        ) && signed.signature.length === 64;
      if (!same) throw new Error(`receipt ${JSON.stringify(r.id)} differs from what was signed: run desk check with the version that wrote it`);
      const derived = envelopeText(signed, receipt);
      ns.push(String(r.n));
      payloads.push(signed.payload);
      signatures.push(Buffer.from(signed.signature).toString("hex"));
      envelopes.push(derived === r.envelope ? null : r.envelope);
    }
    await tx`
      UPDATE receipts r SET payload = c.payload, signature = decode(c.signature, 'hex'), envelope = c.envelope
        FROM (SELECT unnest(${ns}::bigint[]) AS n, unnest(${payloads}::text[]) AS payload, unnest(${signatures}::text[]) AS signature,
                     unnest(${envelopes}::text[]) AS envelope) c
       WHERE r.n = c.n`;
    after = rows[rows.length - 1]!.n;
  }
  await tx`ALTER TABLE receipts ENABLE TRIGGER receipts_append_only`;
  await tx.unsafe(V6_AFTER);
}

// Indexes the query-plan test (test/integration/postgres-query-plans.test.ts) asks for. An org's
// export pages by n within the org, so each page reads the rows it returns rather than every
// receipt of the org again; (org_id, n) serves what (org_id, issued_at) served (an org's rows,
// from a time on), so it takes that index's place and a receipt costs no more bytes. The newest
// page of the whole alert log is read from its index rather than sorted from the whole table; a
// node freeing its own delivery leases at start finds them among the leased alerts only.
const V7_PLAN_INDEXES = `
CREATE INDEX receipts_org_n ON receipts(org_id, n);
DROP INDEX IF EXISTS receipts_org;
CREATE INDEX alerts_created ON alerts(created_at, n);
CREATE INDEX alerts_leased ON alerts(leased_by) WHERE leased_until IS NOT NULL;
`;

// A receipted call's audit entry is read out of its receipt (as SQLite's migration 12): the audit
// table keeps the calls without a receipt. An audit row whose receipt says exactly what it says
// (at = issued_at, and every other column as the receipt derives it) is deleted, the append-only
// trigger off for this transaction only; a row that says anything else is kept and answered as
// it is. audit_receipt finds the kept rows, so their receipts are not answered twice; it sorts
// as receipts.id does ("C"), or a comparison with it could not use the index. No row naming a
// receipt is written after this migration: a trigger refuses one, since an inserted row would
// stand in for its receipt's signed entry (hiding or re-dating that call).
const V8_AUDIT_FROM_RECEIPTS = `
ALTER TABLE audit DISABLE TRIGGER audit_append_only;
DELETE FROM audit a USING receipts r
 WHERE a.receipt_id = r.id AND a.at = r.issued_at AND a.org_id = r.org_id AND a.key_id = r.key_id
   AND a.tool = (r.payload::jsonb ->> 'tool') AND a.outcome = r.outcome
   AND a.http_status = (r.payload::jsonb ->> 'http_status')::integer
   AND a.price_mc = (r.payload::jsonb ->> 'price_mc')::bigint AND a.upstream_cost_mc = (r.payload::jsonb ->> 'upstream_cost_mc')::bigint
   AND a.margin_mc = CASE WHEN r.outcome = 'charged' THEN a.price_mc - a.upstream_cost_mc ELSE 0 END;
ALTER TABLE audit ENABLE TRIGGER audit_append_only;
CREATE INDEX audit_receipt ON audit(receipt_id COLLATE "C") WHERE receipt_id IS NOT NULL;
CREATE FUNCTION refuse_receipt_audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'a receipted call is audited by its receipt'; END $$;
CREATE TRIGGER audit_no_receipt_rows BEFORE INSERT ON audit FOR EACH ROW WHEN (NEW.receipt_id IS NOT NULL)
  EXECUTE FUNCTION refuse_receipt_audit_row();
`;

export const POSTGRES_MIGRATIONS: readonly Migration[] = [
  { name: "desk ledger", sql: V1 },
  { name: "desk rest upstreams and credentials", sql: V2 },
  { name: "desk approvals", sql: V3 },
  { name: "desk org budgets", sql: V4 },
  { name: "desk budget alerts", sql: V5 },
  { name: "desk receipts stored once, settled reservations pruned", sql: V6, convert: convertReceipts },
  { name: "desk plan indexes", sql: V7_PLAN_INDEXES },
  { name: "desk audit of receipted calls read from their receipts", sql: V8_AUDIT_FROM_RECEIPTS },
];
