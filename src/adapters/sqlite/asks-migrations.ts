// The ask ledger's schema. The rules that make it trustworthy live here, in SQLite itself, so
// that raw SQL on the file (a debugging session, a future bug, another tool) cannot change an
// ask, overturn a decision, decide late or reuse an id: the code only adds friendly answers.
//
// Never edit a migration that has shipped: append a new one.
import type { Migration } from "./database.ts";

/** 10 characters of Crockford base32: digits and A-Z without I, L, O, U. */
const CROCKFORD_ID = (column: string) => `length(${column}) = 10 AND ${column} NOT GLOB '*[^0-9A-HJKMNP-TV-Z]*'`;

/** A handle: a lowercase letter, then up to 31 of [a-z0-9-]. */
const HANDLE = (column: string) => `length(${column}) BETWEEN 1 AND 32 AND ${column} GLOB '[a-z]*' AND ${column} NOT GLOB '*[^a-z0-9-]*'`;

const HEX = "[0-9a-f]".repeat(8);

const V1 = `
CREATE TABLE seen_ids (
  approval_id TEXT PRIMARY KEY NOT NULL CHECK (${CROCKFORD_ID("approval_id")}),
  seen_at     INTEGER NOT NULL
) STRICT;

CREATE TABLE asks (
  approval_id     TEXT PRIMARY KEY NOT NULL CHECK (${CROCKFORD_ID("approval_id")}),
  kind            TEXT NOT NULL CHECK (kind IN ('pay', 'account')),
  merchant        TEXT,
  -- the decimal string exactly as validated; never a float, a sign or an exponent
  amount          TEXT CHECK (amount GLOB '[0-9]*' AND amount NOT GLOB '*[^0-9.]*'
                              AND amount NOT GLOB '*.*.*' AND amount NOT GLOB '*.'),
  currency        TEXT CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
  card_handle     TEXT CHECK (${HANDLE("card_handle")}),
  checkout_url    TEXT CHECK (checkout_url GLOB 'https://?*'),
  provider_url    TEXT CHECK (provider_url GLOB 'https://?*'),
  identity_handle TEXT CHECK (${HANDLE("identity_handle")}),
  reason          TEXT,
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  CHECK (expires_at > created_at),
  -- a pay ask has every pay field and no account field, and the reverse
  CHECK (kind <> 'pay' OR (merchant IS NOT NULL AND amount IS NOT NULL AND currency IS NOT NULL
         AND card_handle IS NOT NULL AND checkout_url IS NOT NULL
         AND provider_url IS NULL AND identity_handle IS NULL)),
  CHECK (kind <> 'account' OR (provider_url IS NOT NULL AND merchant IS NULL AND amount IS NULL
         AND currency IS NULL AND card_handle IS NULL AND checkout_url IS NULL))
) STRICT;

CREATE TABLE decisions (
  approval_id TEXT PRIMARY KEY NOT NULL REFERENCES asks (approval_id),
  decision    TEXT NOT NULL CHECK (decision IN ('approved', 'denied')),
  decided_at  INTEGER NOT NULL,
  -- the reference approver's ref: demo- and 8 lowercase hex, on approvals only
  ref         TEXT CHECK (ref GLOB 'demo-${HEX}'),
  CHECK ((decision = 'approved') = (ref IS NOT NULL))
) STRICT;

-- countPending and listPending read pending asks by their expiry.
CREATE INDEX asks_by_expiry ON asks (expires_at);

-- An ask cannot change after it is made: blocks rewriting the amount, site or card an
-- approval was given for.
CREATE TRIGGER asks_no_update BEFORE UPDATE ON asks
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot change'); END;

CREATE TRIGGER asks_no_delete BEFORE DELETE ON asks
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot be deleted'); END;

-- INSERT OR REPLACE deletes the old row without firing DELETE triggers (unless the connection
-- turned recursive_triggers on), so every table also refuses an insert over an existing row.
CREATE TRIGGER asks_insert_once BEFORE INSERT ON asks
WHEN EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot be replaced'); END;

-- Every stored ask consumes its id for good; the seen_ids triggers refuse a second use even
-- if the ask row were ever gone (replay of an id the person already decided on).
CREATE TRIGGER asks_mark_seen AFTER INSERT ON asks
BEGIN INSERT INTO seen_ids (approval_id, seen_at) VALUES (NEW.approval_id, NEW.created_at); END;

CREATE TRIGGER seen_ids_insert_once BEFORE INSERT ON seen_ids
WHEN EXISTS (SELECT 1 FROM seen_ids WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: this approval_id was seen before'); END;

CREATE TRIGGER seen_ids_no_update BEFORE UPDATE ON seen_ids
BEGIN SELECT RAISE(ABORT, 'ask ledger: a seen id cannot change'); END;

CREATE TRIGGER seen_ids_no_delete BEFORE DELETE ON seen_ids
BEGIN SELECT RAISE(ABORT, 'ask ledger: a seen id cannot be deleted'); END;

-- A decision is final: no second decision (also not by INSERT OR REPLACE), no change, no delete.
CREATE TRIGGER decisions_insert_once BEFORE INSERT ON decisions
WHEN EXISTS (SELECT 1 FROM decisions WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

-- A decision needs a known ask that has not expired: an approval typed after the ask lapsed
-- must not count. Also holds on a connection that left foreign_keys off.
CREATE TRIGGER decisions_in_time BEFORE INSERT ON decisions
WHEN NOT EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id AND NEW.decided_at < expires_at)
BEGIN SELECT RAISE(ABORT, 'ask ledger: no decision on an unknown or expired ask'); END;
`;

/** 1-64 of [A-Za-z0-9_-]: the ids the desk mints, a ref. */
const SAFE_REF = (column: string) => `length(${column}) BETWEEN 1 AND 64 AND ${column} NOT GLOB '*[^A-Za-z0-9_-]*'`;
const HEX64 = (column: string) => `length(${column}) = 64 AND ${column} NOT GLOB '*[^0-9a-f]*'`;
const PAY_FIELDS = ["merchant", "amount", "currency", "card_handle", "checkout_url"];
const ACCOUNT_FIELDS = ["provider_url", "identity_handle"];
const SPEND_FIELDS = ["reservation_id", "tool", "price_mc", "key_id", "key_name", "org_id", "org_name", "params_sha256", "preview", "preview_cut"];
const allNull = (columns: string[]) => columns.map((c) => `${c} IS NULL`).join(" AND ");
const noneNull = (columns: string[]) => columns.map((c) => `${c} IS NOT NULL`).join(" AND ");

// Version 2: the desk's spend asks, the `failed` state and a step's own ref, the step that an
// approval runs (recorded before it runs), and the signed decision records with their keys.
// SQLite cannot change a CHECK in place: asks and decisions are rebuilt under new names, their
// rows copied, the old tables dropped (with their triggers) and the new ones renamed.
const V2 = `
CREATE TABLE asks_v2 (
  approval_id     TEXT PRIMARY KEY NOT NULL CHECK (${CROCKFORD_ID("approval_id")}),
  kind            TEXT NOT NULL CHECK (kind IN ('pay', 'account', 'spend')),
  merchant        TEXT,
  amount          TEXT CHECK (amount GLOB '[0-9]*' AND amount NOT GLOB '*[^0-9.]*'
                              AND amount NOT GLOB '*.*.*' AND amount NOT GLOB '*.'),
  currency        TEXT CHECK (length(currency) = 3 AND currency NOT GLOB '*[^A-Z]*'),
  card_handle     TEXT CHECK (${HANDLE("card_handle")}),
  checkout_url    TEXT CHECK (checkout_url GLOB 'https://?*'),
  provider_url    TEXT CHECK (provider_url GLOB 'https://?*'),
  identity_handle TEXT CHECK (${HANDLE("identity_handle")}),
  reason          TEXT,
  reservation_id  TEXT CHECK (${SAFE_REF("reservation_id")}),
  tool            TEXT CHECK (length(tool) BETWEEN 4 AND 162 AND tool GLOB '[a-z]*__?*' AND tool NOT GLOB '*[^A-Za-z0-9_.-]*'),
  -- whole millicents, 1 to 10^10: never a float
  price_mc        INTEGER CHECK (price_mc BETWEEN 1 AND 10000000000),
  key_id          TEXT CHECK (${SAFE_REF("key_id")}),
  key_name        TEXT CHECK (length(key_name) <= 200),
  org_id          TEXT CHECK (${SAFE_REF("org_id")}),
  org_name        TEXT CHECK (length(org_name) BETWEEN 1 AND 200),
  params_sha256   TEXT CHECK (${HEX64("params_sha256")}),
  preview         TEXT CHECK (length(preview) BETWEEN 1 AND 500),
  preview_cut     INTEGER CHECK (preview_cut IN (0, 1)),
  created_at      INTEGER NOT NULL,
  expires_at      INTEGER NOT NULL,
  CHECK (expires_at > created_at),
  -- each kind has its own fields and none of another's
  CHECK (kind <> 'pay' OR (${noneNull(PAY_FIELDS)} AND ${allNull([...ACCOUNT_FIELDS, ...SPEND_FIELDS])})),
  CHECK (kind <> 'account' OR (provider_url IS NOT NULL AND ${allNull([...PAY_FIELDS, ...SPEND_FIELDS])})),
  CHECK (kind <> 'spend' OR (${noneNull(SPEND_FIELDS)} AND ${allNull([...PAY_FIELDS, ...ACCOUNT_FIELDS, "reason"])}))
) STRICT;

INSERT INTO asks_v2 (approval_id, kind, merchant, amount, currency, card_handle, checkout_url,
                     provider_url, identity_handle, reason, created_at, expires_at)
SELECT approval_id, kind, merchant, amount, currency, card_handle, checkout_url,
       provider_url, identity_handle, reason, created_at, expires_at FROM asks;

CREATE TABLE decisions_v2 (
  approval_id TEXT PRIMARY KEY NOT NULL REFERENCES asks_v2 (approval_id),
  decision    TEXT NOT NULL CHECK (decision IN ('approved', 'denied', 'failed')),
  decided_at  INTEGER NOT NULL,
  -- which ref goes with which decision and kind: decisions_ref_rule
  ref         TEXT CHECK (${SAFE_REF("ref")}),
  CHECK (decision <> 'denied' OR ref IS NULL),
  CHECK (decision <> 'failed' OR ref IN ('exit_status', 'bad_first_line', 'output_too_large', 'timeout', 'spawn_failed', 'interrupted'))
) STRICT;

INSERT INTO decisions_v2 (approval_id, decision, decided_at, ref)
SELECT approval_id, decision, decided_at, ref FROM decisions;

DROP TABLE decisions;
DROP TABLE asks;
ALTER TABLE asks_v2 RENAME TO asks;
ALTER TABLE decisions_v2 RENAME TO decisions;

CREATE INDEX asks_by_expiry ON asks (expires_at);

CREATE TRIGGER asks_no_update BEFORE UPDATE ON asks
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot change'); END;

CREATE TRIGGER asks_no_delete BEFORE DELETE ON asks
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot be deleted'); END;

CREATE TRIGGER asks_insert_once BEFORE INSERT ON asks
WHEN EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask cannot be replaced'); END;

CREATE TRIGGER asks_mark_seen AFTER INSERT ON asks
BEGIN INSERT INTO seen_ids (approval_id, seen_at) VALUES (NEW.approval_id, NEW.created_at); END;

-- The step behind an approval, recorded before it runs: its row is the promise that it runs at
-- most once. Made only on a pending pay or account ask, before its expiry, never changed.
CREATE TABLE steps (
  approval_id  TEXT PRIMARY KEY NOT NULL REFERENCES asks (approval_id),
  started_at   INTEGER NOT NULL,
  -- the recap the person approved on, for the decision record made when the step ends
  recap_sha256 TEXT NOT NULL CHECK (${HEX64("recap_sha256")})
) STRICT;

CREATE TRIGGER steps_insert_once BEFORE INSERT ON steps
WHEN EXISTS (SELECT 1 FROM steps WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: a step runs once'); END;

CREATE TRIGGER steps_no_update BEFORE UPDATE ON steps
BEGIN SELECT RAISE(ABORT, 'ask ledger: a step record cannot change'); END;

CREATE TRIGGER steps_no_delete BEFORE DELETE ON steps
BEGIN SELECT RAISE(ABORT, 'ask ledger: a step record cannot be deleted'); END;

CREATE TRIGGER steps_on_pending BEFORE INSERT ON steps
WHEN NOT EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id AND kind IN ('pay', 'account')
                 AND NEW.started_at < expires_at)
  OR EXISTS (SELECT 1 FROM decisions WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: a step starts only on a pending pay or account ask'); END;

CREATE TRIGGER decisions_insert_once BEFORE INSERT ON decisions
WHEN EXISTS (SELECT 1 FROM decisions WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

CREATE TRIGGER decisions_no_update BEFORE UPDATE ON decisions
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

CREATE TRIGGER decisions_no_delete BEFORE DELETE ON decisions
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision is final'); END;

CREATE TRIGGER decisions_in_time BEFORE INSERT ON decisions
WHEN NOT EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id AND NEW.decided_at < expires_at)
BEGIN SELECT RAISE(ABORT, 'ask ledger: no decision on an unknown or expired ask'); END;

-- After a step: approved with the step's own ref (never a demo- one) or failed, at the time the
-- person approved. Without one: a spend ask is approved with no ref (the desk makes the call), a
-- pay or account ask with the reference approver's demo- ref; or denied. (A NULL anywhere in the
-- rule counts as a refusal.)
CREATE TRIGGER decisions_ref_rule BEFORE INSERT ON decisions
WHEN NOT coalesce(CASE
  WHEN EXISTS (SELECT 1 FROM steps WHERE approval_id = NEW.approval_id) THEN
    NEW.decision IN ('approved', 'failed') AND NEW.ref IS NOT NULL AND NEW.ref NOT GLOB 'demo-*'
    AND NEW.decided_at = (SELECT started_at FROM steps WHERE approval_id = NEW.approval_id)
  WHEN NEW.decision = 'denied' THEN 1
  WHEN (SELECT kind FROM asks WHERE approval_id = NEW.approval_id) = 'spend' THEN
    NEW.decision = 'approved' AND NEW.ref IS NULL
  ELSE NEW.decision = 'approved' AND NEW.ref GLOB 'demo-${HEX}'
END, 0)
BEGIN SELECT RAISE(ABORT, 'ask ledger: this decision or ref does not go with this ask'); END;

-- The signed decision records: one per ask at most, in one chain (seq 1, 2, 3, ... with no gap),
-- made in the transaction of the decision they sign, never changed.
CREATE TABLE decision_records (
  seq            INTEGER PRIMARY KEY NOT NULL CHECK (seq >= 1),
  approval_id    TEXT NOT NULL UNIQUE REFERENCES asks (approval_id),
  kid            TEXT NOT NULL,
  -- the canonical JSON that was signed (its UTF-8 bytes are the envelope's payload)
  payload        TEXT NOT NULL CHECK (json_valid(payload)),
  signature      TEXT NOT NULL CHECK (length(signature) = 86 AND signature NOT GLOB '*[^A-Za-z0-9_-]*'),
  payload_sha256 TEXT NOT NULL CHECK (${HEX64("payload_sha256")})
) STRICT;

CREATE TRIGGER decision_records_no_update BEFORE UPDATE ON decision_records
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision record cannot change'); END;

CREATE TRIGGER decision_records_no_delete BEFORE DELETE ON decision_records
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision record cannot be deleted'); END;

CREATE TRIGGER decision_records_insert_once BEFORE INSERT ON decision_records
WHEN EXISTS (SELECT 1 FROM decision_records WHERE seq = NEW.seq OR approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision record is made once'); END;

-- The chain has no gaps, and a record says what the ledger holds: its id, its seq, and the
-- decision stored for the ask (expired: none stored, no step, and the ask has expired).
CREATE TRIGGER decision_records_in_chain BEFORE INSERT ON decision_records
WHEN NEW.seq <> coalesce((SELECT max(seq) FROM decision_records), 0) + 1
  OR json_extract(NEW.payload, '$.seq') IS NOT NEW.seq
  OR json_extract(NEW.payload, '$.approval_id') IS NOT NEW.approval_id
  OR json_extract(NEW.payload, '$.kid') IS NOT NEW.kid
  OR json_extract(NEW.payload, '$.verb') IS NOT (SELECT kind FROM asks WHERE approval_id = NEW.approval_id)
  OR json_extract(NEW.payload, '$.decision') IS NOT coalesce(
       (SELECT decision FROM decisions WHERE approval_id = NEW.approval_id),
       CASE WHEN NOT EXISTS (SELECT 1 FROM steps WHERE approval_id = NEW.approval_id) THEN 'expired' END)
  OR (json_extract(NEW.payload, '$.decision') = 'expired'
      AND json_extract(NEW.payload, '$.decided_at') IS NOT
          strftime('%Y-%m-%dT%H:%M:%fZ', (SELECT expires_at FROM asks WHERE approval_id = NEW.approval_id) / 1000.0, 'unixepoch'))
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision record must follow the chain and match its decision'); END;

-- Every public key that ever signed a record, so a rotated key keeps verifying old records.
CREATE TABLE decision_keys (
  kid           TEXT PRIMARY KEY NOT NULL,
  x             TEXT NOT NULL CHECK (length(x) = 43 AND x NOT GLOB '*[^A-Za-z0-9_-]*'),
  first_used_at INTEGER NOT NULL
) STRICT;

CREATE TRIGGER decision_keys_no_update BEFORE UPDATE ON decision_keys
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision key cannot change'); END;

CREATE TRIGGER decision_keys_no_delete BEFORE DELETE ON decision_keys
BEGIN SELECT RAISE(ABORT, 'ask ledger: a decision key cannot be deleted'); END;
`;

// Version 3: the asks still awaiting a person, kept apart so that what the approver lists,
// counts and seals costs what is open, not what was ever decided. The table is derived: its rows
// come and go only by the triggers below, and raw SQL can neither hide an open ask (its expiry
// would then go unrecorded) nor add one.
const V3 = `
CREATE TABLE open_asks (
  approval_id TEXT PRIMARY KEY NOT NULL REFERENCES asks (approval_id),
  expires_at  INTEGER NOT NULL
) STRICT;

CREATE INDEX open_asks_by_expiry ON open_asks (expires_at);

-- every query by expiry goes through open_asks now
DROP INDEX asks_by_expiry;

INSERT INTO open_asks (approval_id, expires_at)
SELECT a.approval_id, a.expires_at FROM asks a
WHERE NOT EXISTS (SELECT 1 FROM decisions d WHERE d.approval_id = a.approval_id)
  AND NOT EXISTS (SELECT 1 FROM steps s WHERE s.approval_id = a.approval_id)
  AND NOT EXISTS (SELECT 1 FROM decision_records r WHERE r.approval_id = a.approval_id);

-- One trigger for both rows, so the id is marked seen first (a replayed id is refused as such).
DROP TRIGGER asks_mark_seen;
CREATE TRIGGER asks_mark_seen AFTER INSERT ON asks
BEGIN
  INSERT INTO seen_ids (approval_id, seen_at) VALUES (NEW.approval_id, NEW.created_at);
  INSERT INTO open_asks (approval_id, expires_at) VALUES (NEW.approval_id, NEW.expires_at);
END;

CREATE TRIGGER decisions_close AFTER INSERT ON decisions
BEGIN DELETE FROM open_asks WHERE approval_id = NEW.approval_id; END;

CREATE TRIGGER steps_close AFTER INSERT ON steps
BEGIN DELETE FROM open_asks WHERE approval_id = NEW.approval_id; END;

CREATE TRIGGER decision_records_close AFTER INSERT ON decision_records
BEGIN DELETE FROM open_asks WHERE approval_id = NEW.approval_id; END;

CREATE TRIGGER open_asks_as_stored BEFORE INSERT ON open_asks
WHEN NOT EXISTS (SELECT 1 FROM asks WHERE approval_id = NEW.approval_id AND expires_at = NEW.expires_at)
  OR EXISTS (SELECT 1 FROM decisions WHERE approval_id = NEW.approval_id)
  OR EXISTS (SELECT 1 FROM steps WHERE approval_id = NEW.approval_id)
  OR EXISTS (SELECT 1 FROM decision_records WHERE approval_id = NEW.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: only a stored, undecided ask is open'); END;

CREATE TRIGGER open_asks_no_update BEFORE UPDATE ON open_asks
BEGIN SELECT RAISE(ABORT, 'ask ledger: an open ask cannot change'); END;

CREATE TRIGGER open_asks_close_once_done BEFORE DELETE ON open_asks
WHEN NOT EXISTS (SELECT 1 FROM decisions WHERE approval_id = OLD.approval_id)
 AND NOT EXISTS (SELECT 1 FROM steps WHERE approval_id = OLD.approval_id)
 AND NOT EXISTS (SELECT 1 FROM decision_records WHERE approval_id = OLD.approval_id)
BEGIN SELECT RAISE(ABORT, 'ask ledger: an ask stays open until it is decided, started or recorded expired'); END;
`;

export const ASK_LEDGER_MIGRATIONS: readonly Migration[] = [
  { name: "asks, decisions, seen ids", sql: V1 },
  { name: "spend asks, steps, signed decision records", sql: V2 },
  { name: "open asks apart from decided ones", sql: V3 },
];
