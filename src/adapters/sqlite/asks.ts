// The ask ledger: every ask the approver accepted, its decision, and every approval_id ever
// stored. The schema (asks-migrations.ts) keeps asks immutable, decisions final and ids
// single-use; this class adds the answers the approver needs. Time comes only from the
// injected clock, so expiry is testable and never depends on a hidden Date.now().
import type { Database } from "bun:sqlite";
import type { Ask, AskState, StoredAsk } from "../../core/asks.ts";
import { ASK_LEDGER_MIGRATIONS } from "./asks-migrations.ts";
import { openLedger } from "./database.ts";

export type Clock = () => Date;

export type CreateOptions = {
  /** How long the ask stays pending, in milliseconds (> 0). */
  ttlMs: number;
  /** At most this many pending, unexpired asks; a create beyond it is refused. */
  maxPending: number;
};

export type CreateResult =
  | { ok: true; stored: StoredAsk }
  | { ok: false; code: "ID_ALREADY_USED" | "PENDING_LIMIT" };

export type Decision = "approved" | "denied";

export type DecideResult =
  | { ok: true; stored: StoredAsk }
  | { ok: false; reason: "unknown" | "expired" | "decided" };

type Row = {
  approval_id: string;
  kind: "pay" | "account";
  merchant: string | null;
  amount: string | null;
  currency: string | null;
  card_handle: string | null;
  checkout_url: string | null;
  provider_url: string | null;
  identity_handle: string | null;
  reason: string | null;
  created_at: number;
  expires_at: number;
  decision: Decision | null;
  decided_at: number | null;
  ref: string | null;
};

const SELECT_STORED = `
  SELECT a.approval_id, a.kind, a.merchant, a.amount, a.currency, a.card_handle, a.checkout_url,
         a.provider_url, a.identity_handle, a.reason, a.created_at, a.expires_at,
         d.decision, d.decided_at, d.ref
  FROM asks a LEFT JOIN decisions d ON d.approval_id = a.approval_id`;

const PENDING_AT = "d.approval_id IS NULL AND a.expires_at > $now";

export class AskLedger {
  readonly #db: Database;
  readonly #clock: Clock;
  readonly #get;
  readonly #listPending;
  readonly #countPending;
  readonly #seen;
  readonly #insertAsk;
  readonly #insertDecision;

  private constructor(db: Database, clock: Clock) {
    this.#db = db;
    this.#clock = clock;
    this.#get = db.prepare<Row, { id: string }>(`${SELECT_STORED} WHERE a.approval_id = $id`);
    this.#listPending = db.prepare<Row, { now: number }>(
      `${SELECT_STORED} WHERE ${PENDING_AT} ORDER BY a.created_at, a.rowid`,
    );
    this.#countPending = db.prepare<{ n: number }, { now: number }>(
      `SELECT count(*) AS n FROM asks a LEFT JOIN decisions d ON d.approval_id = a.approval_id WHERE ${PENDING_AT}`,
    );
    this.#seen = db.prepare<{ one: number }, { id: string }>(
      "SELECT 1 AS one FROM seen_ids WHERE approval_id = $id",
    );
    this.#insertAsk = db.prepare<never, AskColumns & { created_at: number; expires_at: number }>(
      `INSERT INTO asks (approval_id, kind, merchant, amount, currency, card_handle, checkout_url,
                         provider_url, identity_handle, reason, created_at, expires_at)
       VALUES ($approval_id, $kind, $merchant, $amount, $currency, $card_handle, $checkout_url,
               $provider_url, $identity_handle, $reason, $created_at, $expires_at)`,
    );
    this.#insertDecision = db.prepare<
      never,
      { id: string; decision: Decision; decided_at: number; ref: string | null }
    >(
      `INSERT INTO decisions (approval_id, decision, decided_at, ref)
       VALUES ($id, $decision, $decided_at, $ref)`,
    );
  }

  /**
   * Opens (creating when missing) the ask ledger at `path` (":memory:" for tests). Durability:
   * synchronous=FULL, because decisions are rare and must survive a power cut. Throws
   * LedgerOpenError for a database written by a newer binary.
   */
  static open(path: string, clock: Clock): AskLedger {
    return new AskLedger(openLedger(path, { migrations: ASK_LEDGER_MIGRATIONS, synchronous: "FULL" }), clock);
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

  /** Pending, unexpired asks, oldest first. */
  listPending(): StoredAsk[] {
    const now = this.#now();
    return this.#listPending.all({ now }).map((row) => toStored(row, now));
  }

  countPending(): number {
    return this.#countPending.get({ now: this.#now() })!.n;
  }

  /**
   * Records the person's decision on a pending ask. `ref` is given exactly when approving.
   * An unknown, expired or already decided ask is refused and nothing is written.
   */
  decide(id: string, decision: Decision, ref?: string): DecideResult {
    if ((decision === "approved") !== (ref !== undefined)) {
      throw new TypeError("a ref is given when approving, and only then");
    }
    return this.#db
      .transaction((): DecideResult => {
        const now = this.#now();
        const row = this.#get.get({ id });
        if (!row) return { ok: false, reason: "unknown" };
        if (row.decision !== null) return { ok: false, reason: "decided" };
        if (now >= row.expires_at) return { ok: false, reason: "expired" };
        this.#insertDecision.run({ id, decision, decided_at: now, ref: ref ?? null });
        return { ok: true, stored: toStored(this.#get.get({ id })!, now) };
      })
      .immediate();
  }

  #now(): number {
    const ms = this.#clock().getTime();
    if (!Number.isSafeInteger(ms)) throw new RangeError("the clock gave an invalid date");
    return ms;
  }
}

type AskColumns = Omit<Row, "decision" | "decided_at" | "ref" | "created_at" | "expires_at">;

const NO_FIELDS = {
  merchant: null,
  amount: null,
  currency: null,
  card_handle: null,
  checkout_url: null,
  provider_url: null,
  identity_handle: null,
} as const;

function columnsOf(ask: Ask): AskColumns {
  const common = { approval_id: ask.approval_id, reason: ask.reason ?? null };
  if (ask.kind === "pay") {
    const { merchant, amount, currency, card_handle, checkout_url } = ask;
    return { ...NO_FIELDS, ...common, kind: "pay", merchant, amount, currency, card_handle, checkout_url };
  }
  return { ...NO_FIELDS, ...common, kind: "account", provider_url: ask.provider_url, identity_handle: ask.identity_handle ?? null };
}

function toAsk(row: Row): Ask {
  const reason = row.reason === null ? {} : { reason: row.reason };
  if (row.kind === "pay") {
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
  }
  return {
    kind: "account",
    approval_id: row.approval_id,
    provider_url: row.provider_url!,
    ...(row.identity_handle === null ? {} : { identity_handle: row.identity_handle }),
    ...reason,
  };
}

function toStored(row: Row, now: number): StoredAsk {
  const state: AskState = row.decision ?? (now >= row.expires_at ? "expired" : "pending");
  return {
    ask: toAsk(row),
    created_at: new Date(row.created_at),
    expires_at: new Date(row.expires_at),
    state,
    ...(row.decided_at === null ? {} : { decided_at: new Date(row.decided_at) }),
    ...(row.ref === null ? {} : { ref: row.ref }),
  };
}
