// The ask ledger's schema. The rules that make it trustworthy live here, in SQLite itself, so
// that raw SQL on the file (a debugging session, a future bug, another tool) cannot change an
// ask, overturn a decision, decide late or reuse an id: the code only adds friendly answers.
//
// Never edit a migration that has shipped: append a new one.
import type { Migration } from "./database.ts";

/** 10 characters of Crockford base32: digits and A-Z without I, L, O, U. */
const CROCKFORD_ID = (column: string) =>
  `length(${column}) = 10 AND ${column} NOT GLOB '*[^0-9A-HJKMNP-TV-Z]*'`;

/** A handle: a lowercase letter, then up to 31 of [a-z0-9-]. */
const HANDLE = (column: string) =>
  `length(${column}) BETWEEN 1 AND 32 AND ${column} GLOB '[a-z]*' AND ${column} NOT GLOB '*[^a-z0-9-]*'`;

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

export const ASK_LEDGER_MIGRATIONS: readonly Migration[] = [{ name: "asks, decisions, seen ids", sql: V1 }];
