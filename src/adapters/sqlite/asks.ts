// The ask ledger: every ask the approver accepted, its decision, the step an approval runs, the
// signed decision records and every approval_id ever stored. The schema (asks-migrations.ts)
// keeps asks immutable, decisions final, ids single-use, steps once-only and the record chain
// gapless; this class adds the answers the approver needs. Time comes only from the injected
// clock, so expiry is testable and never depends on a hidden Date.now().
import type { Database } from "bun:sqlite";
import { type Ask, type AskKind, type AskState, askObject, type FailureRef, type StoredAsk } from "../../core/asks.ts";
import type { DecisionFields, DecisionKind } from "../../core/decision/record.ts";
import type { DecisionSigner, SignedDecision } from "../../core/decision/sign.ts";
import { envelopeOf } from "../../core/decision/sign.ts";
import type { DecisionEnvelope } from "../../core/decision/record.ts";
import { hashJson } from "../../core/receipt/hash.ts";
import type { ReceiptJwk } from "../../core/receipt/sign.ts";
import { ASK_LEDGER_MIGRATIONS } from "./asks-migrations.ts";
import { openLedger } from "./database.ts";

export type Clock = () => Date;

export type CreateOptions = {
  /** How long the ask stays pending, in milliseconds (> 0). */
  ttlMs: number;
  /** At most this many pending, unexpired asks; a create beyond it is refused. */
  maxPending: number;
};

export type CreateResult = { ok: true; stored: StoredAsk } | { ok: false; code: "ID_ALREADY_USED" | "PENDING_LIMIT" };

export type Decision = "approved" | "denied";

export type DecideResult = { ok: true; stored: StoredAsk; record: SignedDecision } | { ok: false; reason: "unknown" | "expired" | "decided" | "running" };

/** Why a step cannot start: as for a decision, or the ask is the desk's (no step runs for it). */
export type StartResult = { ok: true; stored: StoredAsk } | { ok: false; reason: "unknown" | "expired" | "decided" | "running" | "no-step" };

/** How a step ended: approved with its first line as the ref, or failed and why. */
export type StepEnd = { decision: "approved"; ref: string } | { decision: "failed"; ref: FailureRef };

type Row = {
  approval_id: string;
  kind: AskKind;
  merchant: string | null;
  amount: string | null;
  currency: string | null;
  card_handle: string | null;
  checkout_url: string | null;
  provider_url: string | null;
  identity_handle: string | null;
  reason: string | null;
  reservation_id: string | null;
  tool: string | null;
  price_mc: number | null;
  key_id: string | null;
  key_name: string | null;
  org_id: string | null;
  org_name: string | null;
  params_sha256: string | null;
  preview: string | null;
  preview_cut: number | null;
  created_at: number;
  expires_at: number;
  decision: "approved" | "denied" | "failed" | null;
  decided_at: number | null;
  ref: string | null;
  started_at: number | null;
  step_recap_sha256: string | null;
};

type RecordRow = { seq: number; kid: string; payload: string; signature: string; payload_sha256: string };

const ASK_COLUMNS = [
  "approval_id",
  "kind",
  "merchant",
  "amount",
  "currency",
  "card_handle",
  "checkout_url",
  "provider_url",
  "identity_handle",
  "reason",
  "reservation_id",
  "tool",
  "price_mc",
  "key_id",
  "key_name",
  "org_id",
  "org_name",
  "params_sha256",
  "preview",
  "preview_cut",
] as const;

const SELECT_STORED = `
  SELECT ${ASK_COLUMNS.map((c) => `a.${c}`).join(", ")}, a.created_at, a.expires_at,
         d.decision, d.decided_at, d.ref, s.started_at, s.recap_sha256 AS step_recap_sha256
  FROM asks a LEFT JOIN decisions d ON d.approval_id = a.approval_id
              LEFT JOIN steps s ON s.approval_id = a.approval_id`;

// open_asks holds exactly the asks with no decision, no step and no record (its triggers keep it
// so): every query about what awaits a person starts there, by its expiry index.

/** Awaiting a person: open and not expired. */
const PENDING_AT = "a.approval_id IN (SELECT approval_id FROM open_asks WHERE expires_at > $now)";

/** Expired (after $since) while open: not yet recorded as expired. */
const UNSEALED_EXPIRY = "a.approval_id IN (SELECT approval_id FROM open_asks WHERE expires_at > $since AND expires_at <= $now)";

const iso = (ms: number): string => new Date(ms).toISOString();

export class AskLedger {
  readonly #db: Database;
  readonly #clock: Clock;
  readonly #signer: DecisionSigner | undefined;
  readonly #get;
  readonly #listPending;
  readonly #countPending;
  readonly #seen;
  readonly #insertAsk;
  readonly #insertDecision;
  readonly #insertStep;
  readonly #runningSteps;
  readonly #unsealed;
  readonly #lastRecord;
  readonly #insertRecord;
  readonly #recordOf;
  readonly #records;

  private constructor(db: Database, clock: Clock, signer: DecisionSigner | undefined) {
    this.#db = db;
    this.#clock = clock;
    this.#signer = signer;
    this.#get = db.prepare<Row, { id: string }>(`${SELECT_STORED} WHERE a.approval_id = $id`);
    this.#listPending = db.prepare<Row, { now: number }>(`${SELECT_STORED} WHERE ${PENDING_AT} ORDER BY a.created_at, a.rowid`);
    this.#countPending = db.prepare<{ n: number }, { now: number }>("SELECT count(*) AS n FROM open_asks WHERE expires_at > $now");
    this.#seen = db.prepare<{ one: number }, { id: string }>("SELECT 1 AS one FROM seen_ids WHERE approval_id = $id");
    this.#insertAsk = db.prepare<never, AskColumns & { created_at: number; expires_at: number }>(
      `INSERT INTO asks (${ASK_COLUMNS.join(", ")}, created_at, expires_at)
       VALUES (${ASK_COLUMNS.map((c) => `$${c}`).join(", ")}, $created_at, $expires_at)`,
    );
    this.#insertDecision = db.prepare<never, { id: string; decision: string; decided_at: number; ref: string | null }>(
      "INSERT INTO decisions (approval_id, decision, decided_at, ref) VALUES ($id, $decision, $decided_at, $ref)",
    );
    this.#insertStep = db.prepare<never, { id: string; started_at: number; recap_sha256: string }>(
      "INSERT INTO steps (approval_id, started_at, recap_sha256) VALUES ($id, $started_at, $recap_sha256)",
    );
    this.#runningSteps = db.prepare<Row, Record<string, never>>(
      `${SELECT_STORED} WHERE s.approval_id IS NOT NULL AND d.approval_id IS NULL ORDER BY s.started_at, a.rowid`,
    );
    this.#unsealed = db.prepare<Row, { now: number; since: number }>(`${SELECT_STORED} WHERE ${UNSEALED_EXPIRY} ORDER BY a.expires_at, a.rowid`);
    this.#lastRecord = db.prepare<RecordRow, Record<string, never>>("SELECT * FROM decision_records ORDER BY seq DESC LIMIT 1");
    this.#insertRecord = db.prepare<never, RecordRow & { approval_id: string }>(
      `INSERT INTO decision_records (seq, approval_id, kid, payload, signature, payload_sha256)
       VALUES ($seq, $approval_id, $kid, $payload, $signature, $payload_sha256)`,
    );
    this.#recordOf = db.prepare<RecordRow, { id: string }>("SELECT * FROM decision_records WHERE approval_id = $id");
    this.#records = db.prepare<RecordRow, { after: number }>("SELECT * FROM decision_records WHERE seq > $after ORDER BY seq LIMIT 1000");
  }

  /**
   * Opens (creating when missing) the ask ledger at `path` (":memory:" for tests). Durability:
   * synchronous=FULL, because decisions are rare and must survive a power cut. Throws
   * LedgerOpenError for a database written by a newer binary. `signer` signs every decision
   * record; a ledger opened without one can store and read asks but not decide them.
   */
  static open(path: string, clock: Clock, signer?: DecisionSigner): AskLedger {
    return new AskLedger(openLedger(path, { migrations: ASK_LEDGER_MIGRATIONS, synchronous: "FULL" }), clock, signer);
  }

  close(): void {
    this.#db.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * Stores a validated ask as pending until now + ttlMs. In one IMMEDIATE transaction, so two
   * processes on one file cannot both pass the checks: an id seen before is refused first
   * (replay wins over the cap), then the pending cap.
   */
  create(ask: Ask, options: CreateOptions): CreateResult {
    if (!Number.isSafeInteger(options.ttlMs) || options.ttlMs <= 0) throw new RangeError("ttlMs must be a positive integer");
    if (!Number.isSafeInteger(options.maxPending) || options.maxPending < 0) {
      throw new RangeError("maxPending must be a non-negative integer");
    }
    return this.#db
      .transaction((): CreateResult => {
        const now = this.#now();
        if (this.#seen.get({ id: ask.approval_id })) return { ok: false, code: "ID_ALREADY_USED" };
        if (this.#countPending.get({ now })!.n >= options.maxPending) return { ok: false, code: "PENDING_LIMIT" };
        this.#insertAsk.run({ ...columnsOf(ask), created_at: now, expires_at: now + options.ttlMs });
        return { ok: true, stored: toStored(this.#get.get({ id: ask.approval_id })!, now) };
      })
      .immediate();
  }

  /** The ask with this exact id (ids are stored uppercase), its state read at the clock's now. */
  get(id: string): StoredAsk | undefined {
    const row = this.#get.get({ id });
    return row ? toStored(row, this.#now()) : undefined;
  }

  /** Asks awaiting a person (no decision, no step started, not expired), oldest first. */
  listPending(): StoredAsk[] {
    const now = this.#now();
    return this.#listPending.all({ now }).map((row) => toStored(row, now));
  }

  countPending(): number {
    return this.#countPending.get({ now: this.#now() })!.n;
  }

  /**
   * Records the person's decision on a pending ask, and its signed record, in one transaction
   * (a decision is never stored without its record, nor the reverse).
   * `ref` is given exactly when approving a pay or account ask (the reference approver's).
   * `recapSha256` is the SHA-256 of the recap the console last wrote for the ask. An unknown,
   * expired, decided or running ask is refused and nothing is written.
   */
  decide(id: string, decision: Decision, o: { ref?: string; recapSha256: string }): DecideResult {
    return this.#db
      .transaction((): DecideResult => {
        const now = this.#now();
        const row = this.#get.get({ id });
        const refused = refusal(row, now);
        if (refused !== undefined) return { ok: false, reason: refused };
        const wantsRef = decision === "approved" && row!.kind !== "spend";
        if (wantsRef !== (o.ref !== undefined)) throw new TypeError("a ref is given when approving a pay or account ask, and only then");
        this.#insertDecision.run({ id, decision, decided_at: now, ref: o.ref ?? null });
        const record = this.#record(row!, { decision, ref: o.ref ?? null, decided_at: now, recap_sha256: o.recapSha256 }, now);
        return { ok: true, stored: toStored(this.#get.get({ id })!, now), record };
      })
      .immediate();
  }

  /**
   * Records that the step behind the person's approval starts now, before it runs: from here on
   * the step can never be started again (the schema refuses a second row), whatever happens to
   * the process. Only on a pending pay or account ask.
   */
  startStep(id: string, recapSha256: string): StartResult {
    return this.#db
      .transaction((): StartResult => {
        const now = this.#now();
        const row = this.#get.get({ id });
        const refused = refusal(row, now);
        if (refused !== undefined) return { ok: false, reason: refused };
        if (row!.kind === "spend") return { ok: false, reason: "no-step" };
        this.#insertStep.run({ id, started_at: now, recap_sha256: recapSha256 });
        return { ok: true, stored: toStored(this.#get.get({ id })!, now) };
      })
      .immediate();
  }

  /**
   * The end of a started step: approved with its ref or failed, decided at the time the step
   * started (when the person approved), recorded now, with its signed record.
   */
  finishStep(id: string, end: StepEnd): DecideResult {
    return this.#db
      .transaction((): DecideResult => {
        const now = this.#now();
        const row = this.#get.get({ id });
        if (!row) return { ok: false, reason: "unknown" };
        if (row.decision !== null) return { ok: false, reason: "decided" };
        if (row.started_at === null) throw new TypeError("no step was started for this ask");
        const decided = { decision: end.decision, ref: end.ref, decided_at: row.started_at, recap_sha256: row.step_recap_sha256! };
        this.#insertDecision.run({ id, decision: end.decision, decided_at: row.started_at, ref: end.ref });
        const record = this.#record(row, decided, now);
        return { ok: true, stored: toStored(this.#get.get({ id })!, now), record };
      })
      .immediate();
  }

  /**
   * Steps started and never ended (the approver was stopped while they ran, by SIGKILL or a
   * power cut) become `failed` with ref `interrupted`, each with its signed record: they are not
   * run again. Call at start-up, once this process holds the ledger.
   */
  failInterruptedSteps(): StoredAsk[] {
    return this.#db
      .transaction((): StoredAsk[] => {
        const failed: StoredAsk[] = [];
        for (const row of this.#runningSteps.all({})) {
          const result = this.finishStep(row.approval_id, { decision: "failed", ref: "interrupted" });
          if (result.ok) failed.push(result.stored);
        }
        return failed;
      })
      .immediate();
  }

  /**
   * Signs an `expired` record for every ask that expired undecided and has none yet, oldest
   * expiry first. `sinceMs` looks only at asks that expired after it: a caller that sealed
   * everything up to a time passes that time back (the first call of a process passes nothing).
   * Returns the time it sealed up to.
   */
  sealExpired(sinceMs = Number.MIN_SAFE_INTEGER): number {
    return this.#db
      .transaction((): number => {
        const now = this.#now();
        for (const row of this.#unsealed.all({ now, since: sinceMs })) {
          this.#record(row, { decision: "expired", ref: null, decided_at: row.expires_at, recap_sha256: null }, now);
        }
        return now;
      })
      .immediate();
  }

  /** The earliest expiry of an ask awaiting a person, or undefined when none is. */
  nextExpiry(): Date | undefined {
    const row = this.#db.query("SELECT min(expires_at) AS at FROM open_asks WHERE expires_at > $now").get({ now: this.#now() }) as { at: number | null };
    return row.at === null ? undefined : new Date(row.at);
  }

  /** The signed decision record of an ask, or undefined when it has none yet. */
  decisionRecord(id: string): DecisionEnvelope | undefined {
    const row = this.#recordOf.get({ id });
    return row ? envelopeOf(row.payload, row.signature, row.kid) : undefined;
  }

  /** Every decision record in chain order, read in pages so an export of any size runs in bounded memory. */
  *decisionRecords(): Generator<DecisionEnvelope> {
    let after = 0;
    for (;;) {
      const page = this.#records.all({ after });
      for (const row of page) yield envelopeOf(row.payload, row.signature, row.kid);
      if (page.length === 0) return;
      after = page[page.length - 1]!.seq;
    }
  }

  /** Keeps the public key that signs records from now on, so it stays in the JWKS once retired. */
  rememberKey(jwk: ReceiptJwk): void {
    this.#db
      .transaction(() => {
        if (this.#db.query("SELECT 1 FROM decision_keys WHERE kid = ?").get(jwk.kid)) return;
        this.#db.query("INSERT INTO decision_keys (kid, x, first_used_at) VALUES (?, ?, ?)").run(jwk.kid, jwk.x, this.#now());
      })
      .immediate();
  }

  /** Every key that was ever remembered, newest first. */
  knownKeys(): ReceiptJwk[] {
    const rows = this.#db.query("SELECT kid, x FROM decision_keys ORDER BY first_used_at DESC, rowid DESC").all() as { kid: string; x: string }[];
    return rows.map(({ kid, x }) => ({ kty: "OKP", crv: "Ed25519", x, kid, use: "sig", alg: "EdDSA" }));
  }

  /** Signs and stores the record of a decision just written (or of an expiry), as the next link of the chain. */
  #record(row: Row, d: { decision: DecisionKind; ref: string | null; decided_at: number; recap_sha256: string | null }, now: number): SignedDecision {
    const signer = this.#signer;
    if (signer === undefined) throw new TypeError("this ask ledger was opened without a decision signer");
    const last = this.#lastRecord.get({});
    const ask = toAsk(row);
    const fields: DecisionFields = {
      seq: last ? last.seq + 1 : 1,
      prev_sha256: last ? last.payload_sha256 : null,
      approval_id: row.approval_id,
      verb: row.kind,
      ask_sha256: hashJson(askObject(ask)),
      recap_sha256: d.recap_sha256,
      decision: d.decision,
      ref: d.ref,
      decided_at: iso(d.decided_at),
      recorded_at: iso(now),
      spend:
        ask.kind === "spend"
          ? {
              reservation_id: ask.reservation_id,
              tool: ask.tool,
              price_mc: ask.price_mc,
              key_id: ask.key_id,
              org_id: ask.org_id,
              params_sha256: ask.params_sha256,
            }
          : null,
    };
    const signed = signer.sign(fields);
    this.#insertRecord.run({
      seq: fields.seq,
      approval_id: row.approval_id,
      kid: signer.kid,
      payload: signed.text,
      signature: signed.envelope.signature,
      payload_sha256: signed.sha256,
    });
    return signed;
  }

  #now(): number {
    const ms = this.#clock().getTime();
    if (!Number.isSafeInteger(ms)) throw new RangeError("the clock gave an invalid date");
    return ms;
  }
}

/** Why a person's decision (or a step's start) cannot be taken on this row now, or undefined. */
function refusal(row: Row | null, now: number): "unknown" | "expired" | "decided" | "running" | undefined {
  if (!row) return "unknown";
  if (row.decision !== null) return "decided";
  if (row.started_at !== null) return "running";
  if (now >= row.expires_at) return "expired";
  return undefined;
}

type AskColumns = Pick<Row, (typeof ASK_COLUMNS)[number]>;

const NO_FIELDS = Object.fromEntries(ASK_COLUMNS.map((c) => [c, null])) as unknown as AskColumns;

function columnsOf(ask: Ask): AskColumns {
  switch (ask.kind) {
    case "pay": {
      const { approval_id, merchant, amount, currency, card_handle, checkout_url } = ask;
      return { ...NO_FIELDS, kind: "pay", approval_id, merchant, amount, currency, card_handle, checkout_url, reason: ask.reason ?? null };
    }
    case "account":
      return {
        ...NO_FIELDS,
        kind: "account",
        approval_id: ask.approval_id,
        provider_url: ask.provider_url,
        identity_handle: ask.identity_handle ?? null,
        reason: ask.reason ?? null,
      };
    case "spend": {
      const { kind, preview_cut, ...fields } = ask;
      return { ...NO_FIELDS, ...fields, kind, preview_cut: preview_cut ? 1 : 0 };
    }
  }
}

function toAsk(row: Row): Ask {
  const reason = row.reason === null ? {} : { reason: row.reason };
  switch (row.kind) {
    case "pay":
      return {
        kind: "pay",
        approval_id: row.approval_id,
        merchant: row.merchant!,
        amount: row.amount!,
        currency: row.currency!,
        card_handle: row.card_handle!,
        checkout_url: row.checkout_url!,
        ...reason,
      };
    case "account":
      return {
        kind: "account",
        approval_id: row.approval_id,
        provider_url: row.provider_url!,
        ...(row.identity_handle === null ? {} : { identity_handle: row.identity_handle }),
        ...reason,
      };
    case "spend":
      return {
        kind: "spend",
        approval_id: row.approval_id,
        reservation_id: row.reservation_id!,
        tool: row.tool!,
        price_mc: row.price_mc!,
        key_id: row.key_id!,
        key_name: row.key_name!,
        org_id: row.org_id!,
        org_name: row.org_name!,
        params_sha256: row.params_sha256!,
        preview: row.preview!,
        preview_cut: row.preview_cut === 1,
      };
  }
}

function toStored(row: Row, now: number): StoredAsk {
  // A running step holds the ask pending (also past its expiry) until the step's end is recorded.
  const state: AskState = row.decision ?? (row.started_at !== null ? "pending" : now >= row.expires_at ? "expired" : "pending");
  return {
    ask: toAsk(row),
    created_at: new Date(row.created_at),
    expires_at: new Date(row.expires_at),
    state,
    ...(row.decided_at === null ? {} : { decided_at: new Date(row.decided_at) }),
    ...(row.ref === null ? {} : { ref: row.ref }),
    ...(row.started_at === null ? {} : { step_started_at: new Date(row.started_at) }),
  };
}
