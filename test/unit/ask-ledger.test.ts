// The ask ledger on real SQLite with the production migrations. The schema's triggers are
// attacked through raw SQL on the same file, and each attack is shown to succeed once its
// trigger is dropped, so every assertion here can fail.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AccountAsk, PayAsk, SpendAsk } from "../../src/core/asks.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { ASK_LEDGER_MIGRATIONS } from "../../src/adapters/sqlite/asks-migrations.ts";
import { LedgerOpenError } from "../../src/adapters/sqlite/database.ts";
import { RECAP, TEST_KEY, TEST_SIGNER } from "../helpers/decision-signer.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

const T0 = Date.UTC(2026, 0, 15, 12, 0, 0);
const TEN_MIN = 600_000;
const OPTS = { ttlMs: TEN_MIN, maxPending: 50 };
const ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/** A distinct valid approval id for each n. */
function idOf(n: number): string {
  let s = "";
  for (let i = 0; i < 10; i++, n = Math.floor(n / 32)) s = ALPHABET[n % 32] + s;
  return s;
}

function pay(approval_id: string, extra: Partial<PayAsk> = {}): PayAsk {
  return { kind: "pay", approval_id, ...PAY_FIELDS, ...extra };
}

const ACCOUNT: AccountAsk = {
  kind: "account",
  approval_id: "M4XZ3AK7Q2",
  provider_url: "https://provider.example/signup",
  identity_handle: "work",
  reason: "a sandbox account",
};

const SPEND: SpendAsk = {
  kind: "spend",
  approval_id: "SPEND00000",
  reservation_id: "res_1",
  tool: "everything__echo",
  price_mc: 1500,
  key_id: "key_0123456789abcdef",
  key_name: "research-agent",
  org_id: "org_0123456789abcdef",
  org_name: "acme",
  params_sha256: "a".repeat(64),
  preview: '{"message":"hi"}',
  preview_cut: true,
};

class TestClock {
  ms = T0;
  readonly now = () => new Date(this.ms);
}

function openMemory(clock = new TestClock()) {
  return { clock, ledger: AskLedger.open(":memory:", clock.now, TEST_SIGNER) };
}

function mustCreate(ledger: AskLedger, ask: PayAsk | AccountAsk | SpendAsk, opts = OPTS) {
  const result = ledger.create(ask, opts);
  if (!result.ok) throw new Error(`create ${ask.approval_id}: ${result.code}`);
  return result.stored;
}

describe("create, get, list, count", () => {
  test("stores a pay ask and an account ask as given, pending until created + ttl", () => {
    const { clock, ledger } = openMemory();
    const payAsk = pay("K7Q2M4XZ3A", { reason: "renew the domain" });
    const created = mustCreate(ledger, payAsk);
    expect(created).toEqual({ ask: payAsk, created_at: new Date(T0), expires_at: new Date(T0 + TEN_MIN), state: "pending" });
    clock.ms += 1;
    mustCreate(ledger, ACCOUNT);

    expect(ledger.get("K7Q2M4XZ3A")).toEqual(created);
    expect(ledger.get(ACCOUNT.approval_id)?.ask).toEqual(ACCOUNT);
    expect(ledger.get("ZZZZZZZZZZ")).toBeUndefined();
    expect(ledger.countPending()).toBe(2);
    expect(ledger.listPending().map((s) => s.ask.approval_id)).toEqual(["K7Q2M4XZ3A", ACCOUNT.approval_id]);
    ledger.close();
  });

  test("absent optional fields stay absent, and the amount stays the validated string", () => {
    const { ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A", { amount: "1900", currency: "JPY" }));
    mustCreate(ledger, { kind: "account", approval_id: "M4XZ3AK7Q2", provider_url: "https://p.example/" });
    const stored = ledger.get("K7Q2M4XZ3A")!.ask as PayAsk;
    expect(stored.amount).toBe("1900");
    expect(Object.keys(stored)).not.toContain("reason");
    expect(Object.keys(ledger.get("M4XZ3AK7Q2")!.ask).sort()).toEqual(["approval_id", "kind", "provider_url"]);
    ledger.close();
  });

  test("list is oldest first, whatever the id order", () => {
    const { clock, ledger } = openMemory();
    for (const id of ["ZZZZZZZZZ1", "0000000001", "MMMMMMMMMM"]) {
      mustCreate(ledger, pay(id));
      clock.ms += 10;
    }
    expect(ledger.listPending().map((s) => s.ask.approval_id)).toEqual(["ZZZZZZZZZ1", "0000000001", "MMMMMMMMMM"]);
    ledger.close();
  });
});

describe("replay", () => {
  test("an id is refused after it was stored, whatever the new ask says or its old state", () => {
    const { clock, ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A"));
    expect(ledger.create(pay("K7Q2M4XZ3A", { amount: "1.00" }), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    expect(ledger.create({ ...ACCOUNT, approval_id: "K7Q2M4XZ3A" }, OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });

    mustCreate(ledger, pay("0000000001"));
    expect(ledger.decide("0000000001", "denied", { recapSha256: RECAP }).ok).toBe(true);
    expect(ledger.create(pay("0000000001"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });

    clock.ms += TEN_MIN;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("expired");
    expect(ledger.create(pay("K7Q2M4XZ3A"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    expect((ledger.get("K7Q2M4XZ3A")!.ask as PayAsk).amount).toBe("19.00");
    ledger.close();
  });

  test("replay wins over the pending cap", () => {
    const { ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A"), { ttlMs: TEN_MIN, maxPending: 1 });
    expect(ledger.create(pay("K7Q2M4XZ3A"), { ttlMs: TEN_MIN, maxPending: 1 })).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    ledger.close();
  });

  test("a restart keeps ids refused, pending asks pending until their first expiry, decisions final", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    const clock = new TestClock();
    const first = AskLedger.open(path, clock.now, TEST_SIGNER);
    mustCreate(first, pay("K7Q2M4XZ3A"));
    mustCreate(first, pay("0000000001"));
    first.decide("0000000001", "approved", { ref: "demo-3e40a688", recapSha256: RECAP });
    first.close();

    clock.ms += TEN_MIN - 1;
    const second = AskLedger.open(path, clock.now, TEST_SIGNER);
    expect(second.create(pay("K7Q2M4XZ3A"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    expect(second.create(pay("0000000001"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    expect(second.get("K7Q2M4XZ3A")).toMatchObject({ state: "pending", expires_at: new Date(T0 + TEN_MIN) });
    expect(second.get("0000000001")).toMatchObject({ state: "approved", ref: "demo-3e40a688", decided_at: new Date(T0) });
    expect(second.decide("0000000001", "denied", { recapSha256: RECAP })).toEqual({ ok: false, reason: "decided" });
    clock.ms += 1;
    expect(second.get("K7Q2M4XZ3A")?.state).toBe("expired");
    second.close();
  });
});

describe("pending cap", () => {
  test("exactly maxPending creates succeed; expired and decided asks do not count", () => {
    const { clock, ledger } = openMemory();
    const cap = { ttlMs: 1000, maxPending: 3 };
    for (let n = 0; n < 3; n++) expect(ledger.create(pay(idOf(n)), cap).ok).toBe(true);
    expect(ledger.create(pay(idOf(3)), cap)).toEqual({ ok: false, code: "PENDING_LIMIT" });
    expect(ledger.countPending()).toBe(3);

    clock.ms += 999;
    expect(ledger.create(pay(idOf(3)), cap)).toEqual({ ok: false, code: "PENDING_LIMIT" });
    clock.ms += 1;
    expect(ledger.countPending()).toBe(0);
    // An id refused by the cap was never stored, so it is not consumed (section 6).
    for (let n = 3; n < 6; n++) expect(ledger.create(pay(idOf(n)), cap).ok).toBe(true);
    expect(ledger.create(pay(idOf(6)), cap)).toEqual({ ok: false, code: "PENDING_LIMIT" });

    expect(ledger.decide(idOf(3), "denied", { recapSha256: RECAP }).ok).toBe(true);
    expect(ledger.countPending()).toBe(2);
    expect(ledger.create(pay(idOf(6)), cap).ok).toBe(true);
    ledger.close();
  });

  test("a cap of 0 refuses every ask, and bad options are a programming error", () => {
    const { ledger } = openMemory();
    expect(ledger.create(pay(idOf(1)), { ttlMs: 1000, maxPending: 0 })).toEqual({ ok: false, code: "PENDING_LIMIT" });
    expect(() => ledger.create(pay(idOf(1)), { ttlMs: 0, maxPending: 5 })).toThrow(RangeError);
    expect(() => ledger.create(pay(idOf(1)), { ttlMs: 1.5, maxPending: 5 })).toThrow(RangeError);
    expect(() => ledger.create(pay(idOf(1)), { ttlMs: 1000, maxPending: -1 })).toThrow(RangeError);
    expect(ledger.get(idOf(1))).toBeUndefined();
    ledger.close();
  });
});

describe("expiry and decisions", () => {
  test("a pending ask reads expired from its expiry on, by the injected clock only", () => {
    const { clock, ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A"), { ttlMs: 1000, maxPending: 5 });
    clock.ms = T0 + 999;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    clock.ms = T0 + 1000;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("expired");
    expect(ledger.listPending()).toEqual([]);
    expect(ledger.countPending()).toBe(0);
    // The clock going back shows it pending again: the ledger holds no clock of its own.
    clock.ms = T0;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    ledger.close();
  });

  test("deciding after expiry is refused and writes nothing", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    const clock = new TestClock();
    const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
    mustCreate(ledger, pay("K7Q2M4XZ3A"), { ttlMs: 1000, maxPending: 5 });
    clock.ms = T0 + 1000;
    expect(ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-3e40a688", recapSha256: RECAP })).toEqual({ ok: false, reason: "expired" });
    expect(ledger.decide("K7Q2M4XZ3A", "denied", { recapSha256: RECAP })).toEqual({ ok: false, reason: "expired" });
    expect(ledger.get("K7Q2M4XZ3A")).toEqual({
      ask: pay("K7Q2M4XZ3A"),
      created_at: new Date(T0),
      expires_at: new Date(T0 + 1000),
      state: "expired",
    });
    ledger.close();
    const raw = new Database(path);
    expect(raw.query("SELECT count(*) AS n FROM decisions").get()).toEqual({ n: 0 });
    raw.close();
  });

  test("approve and deny record the decision, its time and the ref; a second decision changes nothing", () => {
    const { clock, ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A"));
    mustCreate(ledger, ACCOUNT);
    clock.ms += 5000;
    const approved = ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-3e40a688", recapSha256: RECAP });
    expect(approved).toMatchObject({
      ok: true,
      stored: {
        ask: pay("K7Q2M4XZ3A"),
        created_at: new Date(T0),
        expires_at: new Date(T0 + TEN_MIN),
        state: "approved",
        decided_at: new Date(T0 + 5000),
        ref: "demo-3e40a688",
      },
    });
    const denied = ledger.decide(ACCOUNT.approval_id, "denied", { recapSha256: RECAP });
    expect(denied.ok && denied.stored.state).toBe("denied");
    expect(denied.ok && "ref" in denied.stored).toBe(false);

    clock.ms += 1000;
    expect(ledger.decide("K7Q2M4XZ3A", "denied", { recapSha256: RECAP })).toEqual({ ok: false, reason: "decided" });
    expect(ledger.decide("K7Q2M4XZ3A", "approved", { ref: "demo-ffffffff", recapSha256: RECAP })).toEqual({ ok: false, reason: "decided" });
    expect(ledger.decide(ACCOUNT.approval_id, "approved", { ref: "demo-ffffffff", recapSha256: RECAP })).toEqual({ ok: false, reason: "decided" });
    expect(ledger.get("K7Q2M4XZ3A")).toEqual(approved.ok ? approved.stored : undefined);
    // A decided ask stays decided past its expiry.
    clock.ms += TEN_MIN;
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("approved");
    expect(ledger.decide("ZZZZZZZZZZ", "denied", { recapSha256: RECAP })).toEqual({ ok: false, reason: "unknown" });
    ledger.close();
  });

  test("a ref goes with an approval only, in the demo- form; a bad one writes nothing", () => {
    const { ledger } = openMemory();
    mustCreate(ledger, pay("K7Q2M4XZ3A"));
    expect(() => ledger.decide("K7Q2M4XZ3A", "approved", { recapSha256: RECAP })).toThrow(TypeError);
    expect(() => ledger.decide("K7Q2M4XZ3A", "denied", { ref: "demo-3e40a688", recapSha256: RECAP })).toThrow(TypeError);
    for (const ref of ["demo-3E40A688", "demo-3e40a68", "demo-3e40a6881", "4111111111111111", "x"]) {
      expect(() => ledger.decide("K7Q2M4XZ3A", "approved", { ref, recapSha256: RECAP })).toThrow(/CHECK constraint|does not go with this ask/);
    }
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    ledger.close();
  });
});

/** A ledger file holding a pending pay ask, an account ask, an approved ask and an expired one. */
function fixture(dir: string) {
  const path = join(dir, "asks.db");
  const clock = new TestClock();
  const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
  mustCreate(ledger, pay("PAYPAYPAY0", { reason: "renew the domain" }));
  mustCreate(ledger, ACCOUNT);
  mustCreate(ledger, pay("APPR0VED00"));
  ledger.decide("APPR0VED00", "approved", { ref: "demo-3e40a688", recapSha256: RECAP });
  mustCreate(ledger, pay("EXP1RED000"), { ttlMs: 1000, maxPending: 50 });
  mustCreate(ledger, SPEND);
  mustCreate(ledger, pay("STEPPED000"));
  ledger.startStep("STEPPED000", RECAP);
  ledger.finishStep("STEPPED000", { decision: "approved", ref: "PAY_0001" });
  mustCreate(ledger, pay("RVNN1NG000"));
  ledger.startStep("RVNN1NG000", RECAP);
  ledger.rememberKey(TEST_KEY.publicJwk());
  ledger.close();
  return { path, clock };
}

type Attack = { name: string; sql: string; refusedBy: string; guards: string[] };

const ASK_COLUMN_UPDATES: Record<string, string> = {
  approval_id: "UPDATE asks SET approval_id = 'ZZZZZZZZZZ' WHERE approval_id = 'PAYPAYPAY0'",
  kind: `UPDATE asks SET kind = 'account', merchant = NULL, amount = NULL, currency = NULL, card_handle = NULL,
         checkout_url = NULL, provider_url = 'https://evil.example/' WHERE approval_id = 'PAYPAYPAY0'`,
  merchant: "UPDATE asks SET merchant = 'Evil Shop' WHERE approval_id = 'PAYPAYPAY0'",
  amount: "UPDATE asks SET amount = '19000.00' WHERE approval_id = 'PAYPAYPAY0'",
  currency: "UPDATE asks SET currency = 'KWD' WHERE approval_id = 'PAYPAYPAY0'",
  card_handle: "UPDATE asks SET card_handle = 'card-9' WHERE approval_id = 'PAYPAYPAY0'",
  checkout_url: "UPDATE asks SET checkout_url = 'https://evil.example/pay' WHERE approval_id = 'PAYPAYPAY0'",
  provider_url: "UPDATE asks SET provider_url = 'https://evil.example/' WHERE approval_id = 'M4XZ3AK7Q2'",
  identity_handle: "UPDATE asks SET identity_handle = 'personal' WHERE approval_id = 'M4XZ3AK7Q2'",
  reason: "UPDATE asks SET reason = 'urgent, approve now' WHERE approval_id = 'PAYPAYPAY0'",
  created_at: "UPDATE asks SET created_at = created_at - 1 WHERE approval_id = 'PAYPAYPAY0'",
  // Reviving an expired ask so that a late approval would count.
  expires_at: "UPDATE asks SET expires_at = expires_at + 86400000 WHERE approval_id = 'EXP1RED000'",
  reservation_id: "UPDATE asks SET reservation_id = 'res_2' WHERE approval_id = 'SPEND00000'",
  tool: "UPDATE asks SET tool = 'everything__delete' WHERE approval_id = 'SPEND00000'",
  price_mc: "UPDATE asks SET price_mc = 1 WHERE approval_id = 'SPEND00000'",
  key_id: "UPDATE asks SET key_id = 'key_other' WHERE approval_id = 'SPEND00000'",
  key_name: "UPDATE asks SET key_name = 'trusted' WHERE approval_id = 'SPEND00000'",
  org_id: "UPDATE asks SET org_id = 'org_other' WHERE approval_id = 'SPEND00000'",
  org_name: "UPDATE asks SET org_name = 'other' WHERE approval_id = 'SPEND00000'",
  params_sha256: "UPDATE asks SET params_sha256 = printf('%.64c', 'b') WHERE approval_id = 'SPEND00000'",
  preview: "UPDATE asks SET preview = '{}' WHERE approval_id = 'SPEND00000'",
  preview_cut: "UPDATE asks SET preview_cut = 0 WHERE approval_id = 'SPEND00000'",
};

const ATTACKS: Attack[] = [
  ...Object.entries(ASK_COLUMN_UPDATES).map(([column, sql]) => ({
    name: `update asks.${column}`,
    sql,
    refusedBy: "an ask cannot change",
    guards: ["asks_no_update"],
  })),
  {
    name: "delete an ask",
    sql: "DELETE FROM asks WHERE approval_id = 'PAYPAYPAY0'",
    refusedBy: "an ask cannot be deleted",
    guards: ["asks_no_delete"],
  },
  {
    name: "replace an ask (REPLACE skips DELETE triggers)",
    sql: `INSERT OR REPLACE INTO asks (approval_id, kind, merchant, amount, currency, card_handle, checkout_url, created_at, expires_at)
          VALUES ('PAYPAYPAY0', 'pay', 'Evil Shop', '9999.00', 'EUR', 'card-2', 'https://evil.example/', ${T0}, ${T0 + TEN_MIN})`,
    refusedBy: "an ask cannot be replaced",
    guards: ["asks_insert_once", "seen_ids_insert_once"],
  },
  {
    name: "update a decision",
    sql: "UPDATE decisions SET decision = 'denied', ref = NULL WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision is final",
    guards: ["decisions_no_update"],
  },
  {
    name: "update a decision's ref",
    sql: "UPDATE decisions SET ref = 'demo-ffffffff' WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision is final",
    guards: ["decisions_no_update"],
  },
  {
    name: "delete a decision",
    sql: "DELETE FROM decisions WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision is final",
    guards: ["decisions_no_delete"],
  },
  {
    name: "replace a decision",
    sql: `INSERT OR REPLACE INTO decisions (approval_id, decision, decided_at, ref) VALUES ('APPR0VED00', 'denied', ${T0 + 1}, NULL)`,
    refusedBy: "a decision is final",
    guards: ["decisions_insert_once"],
  },
  {
    name: "decide an expired ask",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('EXP1RED000', 'approved', ${T0 + 5000}, 'demo-00000000')`,
    refusedBy: "no decision on an unknown or expired ask",
    guards: ["decisions_in_time"],
  },
  {
    name: "decide at the very instant of expiry",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('EXP1RED000', 'denied', ${T0 + 1000}, NULL)`,
    refusedBy: "no decision on an unknown or expired ask",
    guards: ["decisions_in_time"],
  },
  {
    name: "decide an unknown ask (foreign keys off on this connection)",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('ZZZZZZZZZZ', 'denied', ${T0}, NULL)`,
    refusedBy: "no decision on an unknown or expired ask",
    guards: ["decisions_in_time"],
  },
  {
    name: "run a step twice",
    sql: `INSERT OR REPLACE INTO steps (approval_id, started_at, recap_sha256) VALUES ('RVNN1NG000', ${T0 + 1}, '${"c".repeat(64)}')`,
    refusedBy: "a step runs once",
    guards: ["steps_insert_once"],
  },
  {
    name: "forget that a step started (it would run again)",
    sql: "DELETE FROM steps WHERE approval_id = 'RVNN1NG000'",
    refusedBy: "a step record cannot be deleted",
    guards: ["steps_no_delete"],
  },
  {
    name: "move a step's start",
    sql: "UPDATE steps SET started_at = started_at + 1 WHERE approval_id = 'RVNN1NG000'",
    refusedBy: "a step record cannot change",
    guards: ["steps_no_update"],
  },
  {
    name: "start a step on the desk's ask",
    sql: `INSERT INTO steps (approval_id, started_at, recap_sha256) VALUES ('SPEND00000', ${T0 + 1}, '${"c".repeat(64)}')`,
    refusedBy: "a step starts only on a pending pay or account ask",
    guards: ["steps_on_pending"],
  },
  {
    name: "start a step on a decided ask",
    sql: `INSERT INTO steps (approval_id, started_at, recap_sha256) VALUES ('APPR0VED00', ${T0 + 1}, '${"c".repeat(64)}')`,
    refusedBy: "a step starts only on a pending pay or account ask",
    guards: ["steps_on_pending"],
  },
  {
    name: "a reference ref after a step ran",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('RVNN1NG000', 'approved', ${T0}, 'demo-00000000')`,
    refusedBy: "this decision or ref does not go with this ask",
    guards: ["decisions_ref_rule"],
  },
  {
    name: "deny an ask whose step ran",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('RVNN1NG000', 'denied', ${T0}, NULL)`,
    refusedBy: "this decision or ref does not go with this ask",
    guards: ["decisions_ref_rule"],
  },
  {
    name: "fail an ask that ran no step",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('PAYPAYPAY0', 'failed', ${T0 + 1}, 'timeout')`,
    refusedBy: "this decision or ref does not go with this ask",
    guards: ["decisions_ref_rule"],
  },
  {
    name: "a ref on the desk's approval",
    sql: `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('SPEND00000', 'approved', ${T0 + 1}, 'demo-00000000')`,
    refusedBy: "this decision or ref does not go with this ask",
    guards: ["decisions_ref_rule"],
  },
  {
    name: "change a signed decision record",
    sql: "UPDATE decision_records SET payload = replace(payload, 'approved', 'denied') WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision record cannot change",
    guards: ["decision_records_no_update"],
  },
  {
    name: "delete a signed decision record",
    sql: "DELETE FROM decision_records WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision record cannot be deleted",
    guards: ["decision_records_no_delete"],
  },
  {
    name: "replace a signed decision record",
    sql: "INSERT OR REPLACE INTO decision_records SELECT * FROM decision_records WHERE approval_id = 'APPR0VED00'",
    refusedBy: "a decision record must follow the chain and match its decision",
    guards: ["decision_records_in_chain", "decision_records_insert_once"],
  },
  {
    name: "a record that leaves a gap in the chain",
    sql: `INSERT INTO decision_records (seq, approval_id, kid, payload, signature, payload_sha256)
          SELECT seq + 5, 'PAYPAYPAY0', kid, json_set(payload, '$.seq', seq + 5, '$.approval_id', 'PAYPAYPAY0', '$.decision', 'expired'),
                 signature, payload_sha256 FROM decision_records ORDER BY seq DESC LIMIT 1`,
    refusedBy: "a decision record must follow the chain and match its decision",
    guards: ["decision_records_in_chain"],
  },
  {
    name: "a record that says approved for a pending ask",
    sql: `INSERT INTO decision_records (seq, approval_id, kid, payload, signature, payload_sha256)
          SELECT seq + 1, 'PAYPAYPAY0', kid, json_set(payload, '$.seq', seq + 1, '$.approval_id', 'PAYPAYPAY0'),
                 signature, payload_sha256 FROM decision_records ORDER BY seq DESC LIMIT 1`,
    refusedBy: "a decision record must follow the chain and match its decision",
    guards: ["decision_records_in_chain"],
  },
  {
    name: "delete a decision key (old records would stop verifying)",
    sql: "DELETE FROM decision_keys",
    refusedBy: "a decision key cannot be deleted",
    guards: ["decision_keys_no_delete"],
  },
  {
    name: "change a decision key",
    sql: "UPDATE decision_keys SET x = printf('%.43c', 'A')",
    refusedBy: "a decision key cannot change",
    guards: ["decision_keys_no_update"],
  },
  {
    name: "delete a seen id",
    sql: "DELETE FROM seen_ids WHERE approval_id = 'PAYPAYPAY0'",
    refusedBy: "a seen id cannot be deleted",
    guards: ["seen_ids_no_delete"],
  },
  {
    name: "update a seen id",
    sql: "UPDATE seen_ids SET approval_id = 'ZZZZZZZZZZ' WHERE approval_id = 'PAYPAYPAY0'",
    refusedBy: "a seen id cannot change",
    guards: ["seen_ids_no_update"],
  },
  {
    name: "replace a seen id",
    sql: `INSERT OR REPLACE INTO seen_ids (approval_id, seen_at) VALUES ('PAYPAYPAY0', ${T0 + 1})`,
    refusedBy: "this approval_id was seen before",
    guards: ["seen_ids_insert_once"],
  },
];

describe("the schema refuses changes through raw SQL on the same file", () => {
  test("every column of asks has an update attack", () => {
    using tmp = tempDir();
    const { path } = fixture(tmp.path);
    const raw = new Database(path);
    const columns = (raw.query("SELECT name FROM pragma_table_info('asks')").all() as { name: string }[]).map((c) => c.name);
    raw.close();
    expect(columns.sort()).toEqual(Object.keys(ASK_COLUMN_UPDATES).sort());
  });

  for (const attack of ATTACKS) {
    test(`${attack.name}: refused, and allowed once ${attack.guards.join(" + ")} is dropped`, () => {
      using tmp = tempDir();
      const { path } = fixture(tmp.path);
      const raw = new Database(path);
      raw.run("PRAGMA busy_timeout = 5000");
      expect(() => raw.run(attack.sql)).toThrow(`ask ledger: ${attack.refusedBy}`);
      for (const trigger of attack.guards) raw.run(`DROP TRIGGER ${trigger}`);
      expect(raw.run(attack.sql).changes).toBeGreaterThan(0);
      raw.close();
    });
  }

  test("refused attacks leave the ledger as it was", () => {
    using tmp = tempDir();
    const { path, clock } = fixture(tmp.path);
    const before = AskLedger.open(path, clock.now, TEST_SIGNER);
    const ids = ["PAYPAYPAY0", ACCOUNT.approval_id, "APPR0VED00", "EXP1RED000", "SPEND00000", "STEPPED000", "RVNN1NG000"];
    const snapshot = ids.map((id) => [before.get(id), before.decisionRecord(id)]);
    const records = [...before.decisionRecords()];
    before.close();
    const raw = new Database(path);
    for (const attack of ATTACKS) expect(() => raw.run(attack.sql)).toThrow("ask ledger:");
    raw.close();
    const after = AskLedger.open(path, clock.now, TEST_SIGNER);
    expect(ids.map((id) => [after.get(id), after.decisionRecord(id)])).toEqual(snapshot);
    expect([...after.decisionRecords()]).toEqual(records);
    after.close();
  });

  test("a second plain decision fails even without the trigger (primary key)", () => {
    using tmp = tempDir();
    const { path } = fixture(tmp.path);
    const raw = new Database(path);
    const second = `INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ('APPR0VED00', 'denied', ${T0 + 1}, NULL)`;
    expect(() => raw.run(second)).toThrow("ask ledger: a decision is final");
    raw.run("DROP TRIGGER decisions_insert_once");
    expect(() => raw.run(second)).toThrow(/UNIQUE constraint failed: decisions.approval_id/);
    raw.close();
  });

  test("an id stays refused even if its ask row were gone", () => {
    using tmp = tempDir();
    const { path, clock } = fixture(tmp.path);
    const raw = new Database(path);
    raw.run("DROP TRIGGER asks_no_delete");
    raw.run("DELETE FROM asks WHERE approval_id = 'PAYPAYPAY0'");
    const reinsert = `INSERT INTO asks (approval_id, kind, merchant, amount, currency, card_handle, checkout_url, created_at, expires_at)
      VALUES ('PAYPAYPAY0', 'pay', 'Evil Shop', '9999.00', 'EUR', 'card-2', 'https://evil.example/', ${T0}, ${T0 + TEN_MIN})`;
    expect(() => raw.run(reinsert)).toThrow("ask ledger: this approval_id was seen before");
    raw.close();
    const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
    expect(ledger.create(pay("PAYPAYPAY0"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    ledger.close();
  });
});

describe("the schema's checks", () => {
  const COLUMNS = "approval_id, kind, merchant, amount, currency, card_handle, checkout_url, provider_url, created_at, expires_at";
  const SPEND_COLUMNS =
    "approval_id, kind, reservation_id, tool, price_mc, key_id, key_name, org_id, org_name, params_sha256, preview, preview_cut, reason, created_at, expires_at";
  const goodSpend = {
    id: "'G00D000001'",
    kind: "'spend'",
    res: "'res_1'",
    tool: "'everything__echo'",
    price: "1500",
    keyId: "'key_1'",
    keyName: "''",
    orgId: "'org_1'",
    orgName: "'acme'",
    params: `'${"a".repeat(64)}'`,
    preview: "'{}'",
    cut: "0",
    reason: "NULL",
  };
  const insertSpend = (over: Partial<typeof goodSpend>) => {
    const v = { ...goodSpend, ...over };
    return `INSERT INTO asks (${SPEND_COLUMNS}) VALUES (${v.id}, ${v.kind}, ${v.res}, ${v.tool}, ${v.price}, ${v.keyId}, ${v.keyName}, ${v.orgId}, ${v.orgName}, ${v.params}, ${v.preview}, ${v.cut}, ${v.reason}, ${T0}, ${T0 + 1})`;
  };
  const BAD_SPEND: [string, Partial<typeof goodSpend>][] = [
    ["a price of 0", { price: "0" }],
    ["a price above 10^10 mc", { price: "10000000001" }],
    ["a fractional price", { price: "1.5" }],
    ["a price as words", { price: "'a lot'" }],
    ["a tool without its upstream", { tool: "'echo'" }],
    ["a tool with a space", { tool: "'everything__ echo'" }],
    ["a key id with a space", { keyId: "'key 1'" }],
    ["an empty org name", { orgName: "''" }],
    ["a short params hash", { params: "'abc'" }],
    ["an uppercase params hash", { params: `'${"A".repeat(64)}'` }],
    ["an empty preview", { preview: "''" }],
    ["preview_cut of 2", { cut: "2" }],
    ["a reason on a spend ask", { reason: "'please'" }],
    ["a spend ask without its tool", { tool: "NULL" }],
  ];
  for (const [name, over] of BAD_SPEND) {
    test(`refuses a spend ask with ${name}`, () => {
      using tmp = tempDir();
      const raw = new Database(fixture(tmp.path).path);
      expect(() => raw.run(insertSpend(over))).toThrow(/constraint failed|cannot store/);
      expect(raw.run(insertSpend({})).changes).toBe(1);
      raw.close();
    });
  }
  const good = {
    id: "'G00D000000'",
    kind: "'pay'",
    merchant: "'Shop'",
    amount: "'19.00'",
    currency: "'EUR'",
    card: "'card-2'",
    url: "'https://shop.example/'",
    provider: "NULL",
    created: `${T0}`,
    expires: `${T0 + 1}`,
  };
  const insert = (over: Partial<typeof good>) => {
    const v = { ...good, ...over };
    return `INSERT INTO asks (${COLUMNS}) VALUES (${v.id}, ${v.kind}, ${v.merchant}, ${v.amount}, ${v.currency}, ${v.card}, ${v.url}, ${v.provider}, ${v.created}, ${v.expires})`;
  };
  const BAD: [string, Partial<typeof good>][] = [
    ["lowercase id", { id: "'g00d000000'" }],
    ["id with I", { id: "'G00D00000I'" }],
    ["id with U", { id: "'G00D00000U'" }],
    ["short id", { id: "'G00D00000'" }],
    ["other kind", { kind: "'refund'" }],
    ["empty amount", { amount: "''" }],
    ["amount with two dots", { amount: "'1.2.3'" }],
    ["amount with a space", { amount: "'19 00'" }],
    ["exponent amount", { amount: "'1e5'" }],
    ["signed amount", { amount: "'-19.00'" }],
    ["amount ending in a dot", { amount: "'19.'" }],
    ["lowercase currency", { currency: "'eur'" }],
    ["handle with a capital", { card: "'Card-2'" }],
    ["http url", { url: "'http://shop.example/'" }],
    ["pay ask with a provider", { provider: "'https://p.example/'" }],
    ["pay ask without a merchant", { merchant: "NULL" }],
    ["expiry not after creation", { expires: `${T0}` }],
  ];

  for (const [name, over] of BAD) {
    test(`refuses ${name}`, () => {
      using tmp = tempDir();
      const raw = new Database(fixture(tmp.path).path);
      expect(() => raw.run(insert(over))).toThrow(/constraint failed/);
      expect(raw.run(insert({})).changes).toBe(1);
      raw.close();
    });
  }

  test("refuses an approval without a ref and a denial with one", () => {
    using tmp = tempDir();
    const { path } = fixture(tmp.path);
    const raw = new Database(path);
    expect(() => raw.run(`INSERT INTO decisions VALUES ('PAYPAYPAY0', 'approved', ${T0 + 1}, NULL)`)).toThrow(/does not go with this ask/);
    expect(() => raw.run(`INSERT INTO decisions VALUES ('PAYPAYPAY0', 'denied', ${T0 + 1}, 'demo-3e40a688')`)).toThrow(/CHECK constraint/);
    expect(raw.run(`INSERT INTO decisions VALUES ('PAYPAYPAY0', 'denied', ${T0 + 1}, NULL)`).changes).toBe(1);
    raw.close();
  });
});

describe("versions", () => {
  test("a version 1 ledger is migrated in place: every ask, decision and seen id kept, the rules still enforced", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    writeFileSync(path, "", { mode: 0o600 });
    const v1 = new Database(path, { create: true, strict: true });
    v1.run(ASK_LEDGER_MIGRATIONS[0]!.sql);
    v1.run("PRAGMA user_version = 1");
    v1.run(`INSERT INTO asks (approval_id, kind, merchant, amount, currency, card_handle, checkout_url, reason, created_at, expires_at)
            VALUES ('K7Q2M4XZ3A', 'pay', 'Example Shop', '19.00', 'EUR', 'card-2', 'https://shop.example/checkout/123', 'renew', ${T0}, ${T0 + TEN_MIN})`);
    v1.run(
      `INSERT INTO asks (approval_id, kind, provider_url, created_at, expires_at) VALUES ('M4XZ3AK7Q2', 'account', 'https://provider.example/', ${T0}, ${T0 + TEN_MIN})`,
    );
    v1.run(`INSERT INTO decisions VALUES ('K7Q2M4XZ3A', 'approved', ${T0 + 5}, 'demo-3e40a688')`);
    v1.close();
    const clock = new TestClock();
    const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
    expect(ledger.get("K7Q2M4XZ3A")).toEqual({
      ask: pay("K7Q2M4XZ3A", { reason: "renew" }),
      created_at: new Date(T0),
      expires_at: new Date(T0 + TEN_MIN),
      state: "approved",
      decided_at: new Date(T0 + 5),
      ref: "demo-3e40a688",
    });
    expect(ledger.get("M4XZ3AK7Q2")?.state).toBe("pending");
    expect(ledger.create(pay("K7Q2M4XZ3A"), OPTS)).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    ledger.close();
    const raw = new Database(path);
    expect(raw.query("PRAGMA user_version").get()).toEqual({ user_version: ASK_LEDGER_MIGRATIONS.length });
    expect(raw.query("PRAGMA foreign_key_check").all()).toEqual([]);
    expect(() => raw.run("UPDATE asks SET amount = '1.00'")).toThrow("ask ledger: an ask cannot change");
    expect(() => raw.run("DELETE FROM decisions")).toThrow("ask ledger: a decision is final");
    raw.close();
  });

  test("a database from a newer binary is refused clearly and left untouched", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    AskLedger.open(path, () => new Date(T0)).close();
    const newer = ASK_LEDGER_MIGRATIONS.length + 1;
    const raw = new Database(path);
    raw.run(`PRAGMA user_version = ${newer}`);
    raw.close();
    expect(() => AskLedger.open(path, () => new Date(T0))).toThrow(LedgerOpenError);
    expect(() => AskLedger.open(path, () => new Date(T0))).toThrow(
      `the database schema is version ${newer}, newer than this binary knows (${ASK_LEDGER_MIGRATIONS.length}); use a newer ask-only`,
    );
    const after = new Database(path);
    expect(after.query("PRAGMA user_version").get()).toEqual({ user_version: newer });
    after.close();
  });
});

describe("concurrency on one file", () => {
  test("two handles creating the same id: exactly one succeeds", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    const a = AskLedger.open(path, () => new Date(T0));
    const b = AskLedger.open(path, () => new Date(T0));
    const results = [a.create(pay("K7Q2M4XZ3A"), OPTS), b.create(pay("K7Q2M4XZ3A", { amount: "1.00" }), OPTS)];
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results[1]).toEqual({ ok: false, code: "ID_ALREADY_USED" });
    expect((b.get("K7Q2M4XZ3A")!.ask as PayAsk).amount).toBe("19.00");
    a.close();
    b.close();
  });

  test("20 creates from 4 processes with maxPending 5: exactly 5 stored", async () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    AskLedger.open(path, () => new Date(), TEST_SIGNER).close();
    const worker = join(import.meta.dir, "../helpers/ask-ledger-worker.ts");
    const procs = [0, 1, 2, 3].map((p) =>
      Bun.spawn([process.execPath, worker, path, "5", ...[0, 1, 2, 3, 4].map((i) => idOf(p * 5 + i))], {
        stdin: "pipe",
        stdout: "pipe",
        stderr: "pipe",
      }),
    );
    const readers = procs.map((proc) => lines(proc.stdout));
    for (const reader of readers) expect((await reader.next()).value).toBe("ready");
    for (const proc of procs) proc.stdin.end();
    const outcomes: string[] = [];
    for (const [i, reader] of readers.entries()) {
      const line = (await reader.next()).value;
      expect(await procs[i]!.exited, await new Response(procs[i]!.stderr).text()).toBe(0);
      outcomes.push(...(JSON.parse(line as string) as string[]));
    }
    expect(outcomes.filter((o) => o === "ok")).toHaveLength(5);
    expect(outcomes.filter((o) => o === "PENDING_LIMIT")).toHaveLength(15);
    const ledger = AskLedger.open(path, () => new Date(), TEST_SIGNER);
    expect(ledger.countPending()).toBe(5);
    ledger.close();
    const raw = new Database(path);
    expect(raw.query("SELECT count(*) AS n FROM asks").get()).toEqual({ n: 5 });
    raw.close();
  });
});

/** The lines of a process's stdout, as they arrive. */
async function* lines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffer = "";
  const reader = stream.getReader();
  for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
    buffer += decoder.decode(chunk.value, { stream: true });
    for (let nl = buffer.indexOf("\n"); nl >= 0; nl = buffer.indexOf("\n")) {
      yield buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
    }
  }
}

describe("what awaits a person is kept apart (open_asks)", () => {
  const openIds = (path: string) => {
    const raw = new Database(path, { readonly: true });
    const ids = (raw.query("SELECT approval_id FROM open_asks ORDER BY approval_id").all() as { approval_id: string }[]).map((r) => r.approval_id);
    raw.close();
    return ids;
  };
  const openRows = (path: string) => {
    const raw = new Database(path, { readonly: true });
    const rows = raw.query("SELECT approval_id, expires_at FROM open_asks ORDER BY approval_id").all();
    raw.close();
    return rows;
  };

  test("an ask is open from its creation until it is decided, its step starts or its expiry is recorded", () => {
    using tmp = tempDir();
    const { path, clock } = fixture(tmp.path);
    const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
    clock.ms += 1000;
    // fixture: PAYPAYPAY0, the account ask, EXP1RED000 (now past its expiry, not yet recorded) and SPEND00000 are open
    expect(openIds(path)).toEqual(["EXP1RED000", ACCOUNT.approval_id, "PAYPAYPAY0", "SPEND00000"].sort());
    expect(ledger.listPending().map((s) => s.ask.approval_id)).toEqual(["PAYPAYPAY0", ACCOUNT.approval_id, "SPEND00000"]);
    expect(ledger.countPending()).toBe(3);
    ledger.sealExpired();
    expect(openIds(path)).not.toContain("EXP1RED000");
    ledger.decide("SPEND00000", "denied", { recapSha256: RECAP });
    ledger.startStep("PAYPAYPAY0", RECAP);
    expect(openIds(path)).toEqual([ACCOUNT.approval_id]);
    expect(ledger.countPending()).toBe(1);
    clock.ms += 2 * TEN_MIN;
    expect(ledger.countPending()).toBe(0);
    expect(ledger.nextExpiry()).toBeUndefined();
    ledger.close();
  });

  const ATTACKS: [string, string, string][] = [
    ["hiding an open ask", "DELETE FROM open_asks WHERE approval_id = 'PAYPAYPAY0'", "open_asks_close_once_done"],
    ["moving an open ask's expiry", "UPDATE open_asks SET expires_at = expires_at + 1 WHERE approval_id = 'PAYPAYPAY0'", "open_asks_no_update"],
    [
      "reopening a decided ask",
      "INSERT INTO open_asks (approval_id, expires_at) SELECT approval_id, expires_at FROM asks WHERE approval_id = 'APPR0VED00'",
      "open_asks_as_stored",
    ],
  ];
  for (const [what, sql, trigger] of ATTACKS) {
    test(`raw SQL is refused: ${what} (and succeeds once ${trigger} is dropped)`, () => {
      using tmp = tempDir();
      const { path } = fixture(tmp.path);
      const raw = new Database(path);
      const before = openRows(path);
      expect(() => raw.run(sql)).toThrow("ask ledger: ");
      expect(openRows(path)).toEqual(before);
      raw.run(`DROP TRIGGER ${trigger}`);
      raw.run(sql);
      raw.close();
      expect(openRows(path)).not.toEqual(before);
    });
  }

  test("a version 2 ledger is migrated: exactly its undecided, unstarted, unrecorded asks become open", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "asks.db");
    writeFileSync(path, "", { mode: 0o600 });
    const v2 = new Database(path, { create: true, strict: true });
    v2.run(ASK_LEDGER_MIGRATIONS[0]!.sql);
    v2.run(ASK_LEDGER_MIGRATIONS[1]!.sql);
    v2.run("PRAGMA user_version = 2");
    const insertPay = (id: string, expires: number) =>
      v2.run(`INSERT INTO asks (approval_id, kind, merchant, amount, currency, card_handle, checkout_url, created_at, expires_at)
              VALUES ('${id}', 'pay', 'Example Shop', '19.00', 'EUR', 'card-2', 'https://shop.example/c', ${T0}, ${expires})`);
    insertPay("PEND1NG000", T0 + TEN_MIN);
    insertPay("DEC1DED000", T0 + TEN_MIN);
    insertPay("STARTED000", T0 + TEN_MIN);
    insertPay("EXP1RED111", T0 + 1000);
    v2.run(`INSERT INTO decisions VALUES ('DEC1DED000', 'denied', ${T0 + 5}, NULL)`);
    v2.run(`INSERT INTO steps VALUES ('STARTED000', ${T0 + 5}, '${RECAP}')`);
    v2.close();
    const clock = new TestClock();
    const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
    expect(openIds(path)).toEqual(["EXP1RED111", "PEND1NG000"]);
    clock.ms += 2000;
    expect(ledger.listPending().map((s) => s.ask.approval_id)).toEqual(["PEND1NG000"]);
    ledger.sealExpired();
    expect(ledger.decisionRecord("EXP1RED111")).toBeDefined();
    expect(openIds(path)).toEqual(["PEND1NG000"]);
    ledger.close();
  });
});

describe("the pending path costs what is pending", () => {
  // Every statement the ledger prepares or queries is recorded, then planned by SQLite itself.
  // Only open_asks is bounded by what awaits a person; every other table grows with each ask ever
  // made, so a full scan or a range over one of them fails (a range by expiry reads the decided
  // asks too), unless the statement is one of the few named here with the reason it stays bounded.
  const BOUNDED: [RegExp, string][] = [
    [/FROM decision_records ORDER BY seq DESC LIMIT 1$/, "reads the last row of the primary key only"],
    [/FROM decision_records WHERE seq > \$after ORDER BY seq LIMIT 1000$/, "the export, one page at a time"],
    [/FROM decision_keys/, "one row per decision key the approver ever used"],
    [/s\.approval_id IS NOT NULL AND d\.approval_id IS NULL/, "steps left running, read once at start-up"],
  ];
  const growing = (detail: string) => /^SCAN (?!CONSTANT)/.test(detail) || (/^SEARCH /.test(detail) && /[<>]/.test(detail));

  test("no statement of the ask ledger scans or ranges over asks, decisions, steps, seen ids or records", () => {
    using tmp = tempDir();
    const seen = new Set<string>();
    const { prepare, query } = Database.prototype;
    Database.prototype.prepare = function (this: Database, sql: string, ...rest: never[]) {
      seen.add(sql);
      return prepare.call(this, sql, ...rest);
    } as typeof prepare;
    Database.prototype.query = function (this: Database, sql: string) {
      seen.add(sql);
      return query.call(this, sql);
    } as typeof query;
    let path: string;
    try {
      const made = fixture(tmp.path);
      path = made.path;
      const { clock } = made;
      const ledger = AskLedger.open(path, clock.now, TEST_SIGNER);
      mustCreate(ledger, pay("N3WASK0000"));
      ledger.decide("N3WASK0000", "denied", { recapSha256: RECAP });
      ledger.listPending();
      ledger.countPending();
      ledger.nextExpiry();
      ledger.get("PAYPAYPAY0");
      clock.ms += 2 * TEN_MIN;
      ledger.sealExpired();
      ledger.failInterruptedSteps();
      [...ledger.decisionRecords()];
      ledger.decisionRecord("APPR0VED00");
      ledger.knownKeys();
      ledger.close();
    } finally {
      Database.prototype.prepare = prepare;
      Database.prototype.query = query;
    }
    const raw = new Database(path!, { readonly: true });
    const scans: string[] = [];
    let planned = 0;
    for (const sql of seen) {
      if (!/^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b/i.test(sql)) continue;
      const plan = raw.query(`EXPLAIN QUERY PLAN ${sql}`).all() as { detail: string }[];
      planned++;
      const full = plan.filter((row) => growing(row.detail) && !/^(SCAN|SEARCH) open_asks\b/.test(row.detail));
      if (full.length > 0 && !BOUNDED.some(([re]) => re.test(sql.trim()))) scans.push(`${sql.trim()}\n  -> ${full.map((r) => r.detail).join("; ")}`);
    }
    raw.close();
    expect(planned).toBeGreaterThan(10);
    expect(scans).toEqual([]);
  });
});
