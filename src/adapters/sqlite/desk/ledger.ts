// The desk ledger: every SQL statement of the desk. Money is integer millicents. The money path
// never reads then writes outside one IMMEDIATE transaction: the reservation is one conditional
// UPDATE (the period reset folded in), and each settlement moves the money, appends the receipt
// and appends the audit row in one transaction, so a crash leaves all three or none.
import type { Database } from "bun:sqlite";
import { type PlainOutcome, type ReceiptOutcome, type SettleOutcome, statusOf } from "../../../core/desk/outcomes.ts";
import { hourOf, periodOf, type Reset } from "../../../core/desk/period.ts";
import { constantTimeEqual, newId } from "../../../core/desk/secrets.ts";
import { printable } from "../../../core/receipt/printable.ts";
import { openLedger } from "../database.ts";
import { DESK_MIGRATIONS } from "./migrations.ts";

export type OrgRow = { id: string; name: string; created_at: number };

export type UpstreamRow = {
  name: string;
  url: string;
  sealed_headers: string | null;
  header_names: string;
  created_at: number;
  refreshed_at: number;
};

export type ToolRow = {
  name: string;
  upstream: string;
  upstream_tool: string;
  description: string;
  input_schema: string;
  price_mc: number;
  upstream_cost_mc: number;
  active: number;
  /** JSON object: the upstream's listed fields agents see unchanged (title, outputSchema, annotations, _meta). */
  listing: string;
};

/** One tool of an upstream's listing, as registration and refresh store it. */
export type ToolListing = { name: string; upstreamTool: string; description: string; inputSchema: string; listing: string };

export type KeyRow = {
  id: string;
  org_id: string;
  name: string;
  lookup: string;
  secret_sha256: Uint8Array;
  budget_mc: number;
  spent_mc: number;
  reset: Reset;
  period: string;
  allow: string;
  prices: string;
  expires_at: number | null;
  revoked_at: number | null;
  created_at: number;
  fail_hour: string;
  fail_count: number;
};

export type ReceiptRow = {
  id: string;
  org_id: string;
  key_id: string;
  seq: number;
  issued_at: number;
  tool: string;
  outcome: ReceiptOutcome;
  period: string;
  amount_mc: number;
  kid: string;
  sha256: string;
  envelope: string;
};

export type AuditRow = {
  at: number;
  org_id: string;
  key_id: string;
  tool: string;
  outcome: ReceiptOutcome | PlainOutcome;
  http_status: number;
  price_mc: number;
  upstream_cost_mc: number;
  margin_mc: number;
  receipt_id: string | null;
};

export type ReservationRow = {
  id: number;
  key_id: string;
  org_id: string;
  tool: string;
  period: string;
  price_mc: number;
  upstream_cost_mc: number;
  params_sha256: string;
  created_at: number;
  state: "open" | "settled";
  outcome: SettleOutcome | null;
  receipt_id: string | null;
};

/**
 * Calls of one key per UTC hour that may fail: a call counts from its reservation (in the hour it
 * was reserved) until it is charged, so failed and still-running calls together never pass it,
 * however many arrive at once or from however many processes.
 */
export const FAILURES_PER_HOUR = 20;

/** What a key has spent in `period`: its row holds the spend of its latest period only. */
export function spentIn(key: Pick<KeyRow, "period" | "spent_mc">, period: string): number {
  return key.period === period ? key.spent_mc : 0;
}

/** Where a new receipt sits in its key's hash chain. */
export type ChainLink = { seq: number; prevSha256: string | null };

/** What the ledger knows when a receipt is made, inside the transaction that stores it. */
export type ReceiptFacts = {
  /** The id the receipt must carry (chosen by the ledger, which stores it with the call). */
  receiptId: string;
  link: ChainLink;
  keyId: string;
  orgId: string;
  tool: string;
  outcome: ReceiptOutcome;
  httpStatus: number;
  priceMc: number;
  amountMc: number;
  upstreamCostMc: number;
  remainingMc: number;
  period: string;
  paramsSha256: string;
  /** Set exactly when charged: the hash of the result that was paid for. */
  resultSha256: string | null;
  issuedAt: number;
};

/** A signed receipt, ready to store: `sha256` is what the next receipt's prev_sha256 holds. */
export type StoredReceipt = { id: string; kid: string; sha256: string; envelope: string };

/** Signs a receipt from its facts; called inside the transaction that stores it. */
export type ReceiptMaker = (facts: ReceiptFacts) => StoredReceipt;

export type NewKey = {
  id: string;
  orgId: string;
  name: string;
  lookup: string;
  secretSha256: Uint8Array;
  budgetMc: number;
  reset: Reset;
  period: string;
  allow: string[];
  prices: Record<string, number>;
  expiresAt: number | null;
  now: number;
};

export type KeyPatch = {
  name?: string;
  budgetMc?: number;
  allow?: string[];
  prices?: Record<string, number>;
  expiresAt?: number | null;
};

export type CallContext = {
  key: KeyRow;
  tool: string;
  priceMc: number;
  upstreamCostMc: number;
  paramsSha256: string;
  now: number;
  hour: string;
  /** The key's period at `now` (for its reset kind). */
  period: string;
};

export type ReserveResult =
  | { kind: "reserved"; reservationId: number; remainingMc: number }
  | { kind: "no_room"; receipt: StoredReceipt; remainingMc: number }
  /** FAILURES_PER_HOUR calls of this hour failed or are still running: an audit row, no count. */
  | { kind: "rate_limited"; remainingMc: number }
  | { kind: "key_gone" };

export type SettleResult =
  | { kind: "settled"; receipt: StoredReceipt; remainingMc: number }
  /** Someone settled it first (the abandoned-reservation sweep): nothing changed. */
  | { kind: "already_settled"; receipt: ReceiptRow | null; outcome: SettleOutcome | null; remainingMc: number };

export class DeskLedgerError extends Error {
  override name = "DeskLedgerError";
  constructor(readonly code: "EXISTS" | "MISSING" | "OVER_BUDGET") {
    super(code);
  }
}

const isConstraint = (err: unknown) => err instanceof Error && String((err as { code?: unknown }).code ?? "").startsWith("SQLITE_CONSTRAINT");

export type DeskLedgerOptions = {
  /**
   * NORMAL (the desk's default, in WAL) is atomic and consistent after a process crash; a power
   * loss may undo the last commits, all of a transaction or none of it. FULL survives power loss
   * at about a third of the throughput.
   */
  synchronous?: "FULL" | "NORMAL";
  busyTimeoutMs?: number;
  /**
   * Checkpoint the WAL from a worker thread every this many milliseconds instead of inside the
   * commit that crosses SQLite's threshold (which stalled one call in ~70 by milliseconds).
   */
  backgroundCheckpointMs?: number;
};

/** The checkpointing thread: its own connection, PASSIVE checkpoints (writers never wait). */
const CHECKPOINTER = `
import { Database } from "bun:sqlite";
let db = null;
let timer = null;
const checkpoint = () => db.query("PRAGMA wal_checkpoint(PASSIVE)").get();
self.onmessage = (e) => {
  if (e.data.op === "start") {
    db = new Database(e.data.path);
    db.run("PRAGMA busy_timeout = 100");
    timer = setInterval(() => { try { checkpoint(); } catch {} }, e.data.everyMs);
  } else if (e.data.op === "now") {
    try { postMessage({ op: "now", result: checkpoint() }); } catch (err) { postMessage({ op: "now", error: String(err) }); }
  } else if (e.data.op === "stop") {
    clearInterval(timer);
    try { checkpoint(); } catch {}
    db.close();
    postMessage({ op: "stopped" });
  }
};
`;

/**
 * What a key row has spent in the period `:period` (the key's period at the caller's `now`): its
 * row holds the spend of its latest period only. The one way the ledger reads it in SQL, as
 * `spentIn` does in code.
 */
const SPENT_IN_PERIOD = "(CASE WHEN period = :period THEN spent_mc ELSE 0 END)";

/** WAL pages after which the desk's own connection checkpoints anyway (the worker's backstop). */
const BACKSTOP_CHECKPOINT_PAGES = 20_000;

/** Most operations one group commit carries; the rest go to the next one. */
const MAX_BATCH = 64;

type Queued = { run: () => unknown; resolve: (value: unknown) => void; reject: (error: unknown) => void };

export class DeskLedger {
  readonly db: Database;
  private queue: Queued[] = [];
  private flushScheduled = false;

  private checkpointer: Worker | null = null;
  /**
   * One IMMEDIATE transaction wrapper, built once: `db.transaction(fn)` per call rebuilt four
   * wrappers each time (~3% of the desk's CPU). Nested inside the group commit it is a savepoint.
   */
  private readonly immediateTx: (body: () => unknown) => unknown;

  constructor(path: string, options: DeskLedgerOptions = {}) {
    this.db = openLedger(path, {
      migrations: DESK_MIGRATIONS,
      synchronous: options.synchronous ?? "NORMAL",
      busyTimeoutMs: options.busyTimeoutMs ?? 10_000,
    });
    this.immediateTx = this.db.transaction((body: () => unknown) => body()).immediate;
    if (options.backgroundCheckpointMs !== undefined && path !== ":memory:") {
      this.db.run(`PRAGMA wal_autocheckpoint = ${BACKSTOP_CHECKPOINT_PAGES}`);
      this.db.run(`PRAGMA journal_size_limit = ${64 * 1024 * 1024}`);
      const worker = new Worker(URL.createObjectURL(new Blob([CHECKPOINTER], { type: "application/javascript" })));
      worker.postMessage({ op: "start", path, everyMs: options.backgroundCheckpointMs });
      // Bun's Worker can be unref'd: the thread alone never keeps the process alive.
      (worker as Worker & { unref(): void }).unref();
      this.checkpointer = worker;
    }
  }

  /** Runs a checkpoint on the checkpointing thread now (tests); null without one. */
  checkpointNow(): Promise<{ busy: number; log: number; checkpointed: number } | null> {
    const worker = this.checkpointer;
    if (worker === null) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const onMessage = (e: MessageEvent) => {
        if (e.data.op !== "now") return;
        worker.removeEventListener("message", onMessage);
        if (e.data.error) reject(new Error(e.data.error));
        else resolve(e.data.result);
      };
      worker.addEventListener("message", onMessage);
      worker.postMessage({ op: "now" });
    });
  }

  /** Stops the checkpointing thread after a last checkpoint; call before close(). */
  async stopCheckpointer(): Promise<void> {
    const worker = this.checkpointer;
    if (worker === null) return;
    this.checkpointer = null;
    await new Promise<void>((resolve) => {
      worker.addEventListener("message", (e: MessageEvent) => {
        if (e.data.op === "stopped") resolve();
      });
      worker.postMessage({ op: "stop" });
    });
    worker.terminate();
  }

  close(): void {
    this.checkpointer?.terminate();
    this.checkpointer = null;
    this.db.close();
  }

  /** Runs `body` in one IMMEDIATE transaction (a savepoint when already inside one). */
  private immediate<T>(body: () => T): T {
    return this.immediateTx(body) as T;
  }

  /**
   * Group commit: runs `op` (one of this ledger's write methods, each its own transaction) inside
   * one IMMEDIATE transaction shared with the other operations queued in the same event-loop
   * turn. Each operation nests as a savepoint, so its money, receipt and audit row still commit
   * or roll back together; one that throws rolls back alone. The promise settles after COMMIT:
   * nothing is answered before it is durable.
   */
  batched<T>(op: () => T): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.queue.push({ run: op, resolve: resolve as (value: unknown) => void, reject });
      this.scheduleFlush();
    });
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.flushScheduled = false;
    const ops = this.queue.splice(0, MAX_BATCH);
    if (this.queue.length > 0) this.scheduleFlush();
    const results: ({ ok: true; value: unknown } | { ok: false; error: unknown })[] = [];
    try {
      this.immediate(() => {
        for (const op of ops) {
          try {
            results.push({ ok: true, value: op.run() });
          } catch (error) {
            results.push({ ok: false, error });
          }
        }
      });
    } catch (error) {
      for (const op of ops) op.reject(error);
      return;
    }
    for (const [i, r] of results.entries()) {
      if (r.ok) ops[i]!.resolve(r.value);
      else ops[i]!.reject(r.error);
    }
  }

  // --- meta -----------------------------------------------------------------------------------

  getMeta(name: string): string | null {
    const row = this.db.query("SELECT value FROM meta WHERE name = ?").get(name) as { value: string } | null;
    return row?.value ?? null;
  }

  /** Sets a value once; returns false when it was already set (two first starts racing). */
  setMetaOnce(name: string, value: string): boolean {
    return this.db.query("INSERT INTO meta (name, value) VALUES (?, ?) ON CONFLICT (name) DO NOTHING").run(name, value).changes === 1;
  }

  // --- organizations --------------------------------------------------------------------------

  createOrg(id: string, name: string, now: number): OrgRow {
    this.db.query("INSERT INTO orgs (id, name, created_at) VALUES (?, ?, ?)").run(id, name, now);
    return { id, name, created_at: now };
  }

  listOrgs(): OrgRow[] {
    return this.db.query("SELECT id, name, created_at FROM orgs ORDER BY created_at, id").all() as OrgRow[];
  }

  getOrg(id: string): OrgRow | null {
    return this.db.query("SELECT id, name, created_at FROM orgs WHERE id = ?").get(id) as OrgRow | null;
  }

  // --- upstreams and tools --------------------------------------------------------------------

  getUpstream(name: string): UpstreamRow | null {
    return this.db.query("SELECT * FROM upstreams WHERE name = ?").get(name) as UpstreamRow | null;
  }

  listUpstreams(): UpstreamRow[] {
    return this.db.query("SELECT * FROM upstreams ORDER BY name").all() as UpstreamRow[];
  }

  /** Stores a new upstream with its tools in one transaction; EXISTS when the name is taken. */
  addUpstream(
    upstream: { name: string; url: string; sealedHeaders: string | null; headerNames: string[]; now: number },
    tools: ToolListing[],
  ): void {
    this.db
      .transaction(() => {
        try {
          this.db
            .query("INSERT INTO upstreams (name, url, sealed_headers, header_names, created_at, refreshed_at) VALUES (?, ?, ?, ?, ?, ?)")
            .run(upstream.name, upstream.url, upstream.sealedHeaders, JSON.stringify(upstream.headerNames), upstream.now, upstream.now);
        } catch (err) {
          if (isConstraint(err)) throw new DeskLedgerError("EXISTS");
          throw err;
        }
        this.writeTools(upstream.name, tools);
      })
      .immediate();
  }

  /** Replaces an upstream's tool list: new tools appear, gone ones go inactive, prices stay. */
  refreshTools(name: string, tools: ToolListing[], now: number): void {
    this.db
      .transaction(() => {
        if (this.db.query("UPDATE upstreams SET refreshed_at = ? WHERE name = ?").run(now, name).changes !== 1) {
          throw new DeskLedgerError("MISSING");
        }
        this.writeTools(name, tools);
      })
      .immediate();
  }

  private writeTools(upstream: string, tools: ToolListing[]): void {
    this.db.query("UPDATE tools SET active = 0 WHERE upstream = ?").run(upstream);
    const upsert = this.db.query(
      `INSERT INTO tools (name, upstream, upstream_tool, description, input_schema, listing, active) VALUES (?, ?, ?, ?, ?, ?, 1)
       ON CONFLICT (name) DO UPDATE SET upstream_tool = excluded.upstream_tool, description = excluded.description,
         input_schema = excluded.input_schema, listing = excluded.listing, active = 1 WHERE tools.upstream = excluded.upstream`,
    );
    for (const t of tools) upsert.run(t.name, upstream, t.upstreamTool, t.description, t.inputSchema, t.listing);
  }

  listTools(): ToolRow[] {
    return this.db.query("SELECT * FROM tools ORDER BY name").all() as ToolRow[];
  }

  getTool(name: string): ToolRow | null {
    return this.db.query("SELECT * FROM tools WHERE name = ?").get(name) as ToolRow | null;
  }

  setToolPrice(name: string, priceMc: number, upstreamCostMc: number): boolean {
    return this.db.query("UPDATE tools SET price_mc = ?, upstream_cost_mc = ? WHERE name = ?").run(priceMc, upstreamCostMc, name).changes === 1;
  }

  // --- keys -----------------------------------------------------------------------------------

  createKey(k: NewKey): void {
    this.db
      .query(
        `INSERT INTO keys (id, org_id, name, lookup, secret_sha256, budget_mc, spent_mc, reset, period, allow, prices, expires_at, created_at)
         VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)`,
      )
      .run(k.id, k.orgId, k.name, k.lookup, k.secretSha256, k.budgetMc, k.reset, k.period, JSON.stringify(k.allow), JSON.stringify(k.prices), k.expiresAt, k.now);
  }

  getKey(id: string): KeyRow | null {
    return this.db.query("SELECT * FROM keys WHERE id = ?").get(id) as KeyRow | null;
  }

  /**
   * The key whose secret hashes to `secretSha256`, found by its lookup prefix and then compared
   * in constant time, so response timing tells nothing about how much of a guess was right.
   * Revoked and expired keys are returned too: the caller decides (and treats both as invalid).
   */
  findKey(lookup: string, secretSha256: Uint8Array): KeyRow | null {
    const row = this.db.query("SELECT * FROM keys WHERE lookup = ?").get(lookup) as KeyRow | null;
    if (row === null) return null;
    return constantTimeEqual(new Uint8Array(row.secret_sha256), secretSha256) ? row : null;
  }

  listKeys(orgId: string | null): KeyRow[] {
    return (
      orgId === null
        ? this.db.query("SELECT * FROM keys ORDER BY created_at, id").all()
        : this.db.query("SELECT * FROM keys WHERE org_id = ? ORDER BY created_at, id").all(orgId)
    ) as KeyRow[];
  }

  /**
   * OVER_BUDGET when a new budget is below what the key's current period (at `now`) already
   * spent. The row is rolled into that period first, as the next reservation would roll it, so
   * the CHECK compares the budget with this period's spend and never with yesterday's.
   */
  patchKey(id: string, patch: KeyPatch, now: number): KeyRow {
    return this.immediate(() => {
      const key = this.getKey(id);
      if (key === null) throw new DeskLedgerError("MISSING");
      try {
        this.db
          .query(
            `UPDATE keys SET name = :name, budget_mc = :budget, allow = :allow, prices = :prices, expires_at = :expires,
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
            period: periodOf(key.reset, now),
            id,
          });
      } catch (err) {
        if (isConstraint(err)) throw new DeskLedgerError("OVER_BUDGET");
        throw err;
      }
      return this.getKey(id)!;
    });
  }

  /** New secret; the old one stops matching with this statement. */
  rotateKey(id: string, lookup: string, secretSha256: Uint8Array): boolean {
    return this.db.query("UPDATE keys SET lookup = ?, secret_sha256 = ? WHERE id = ?").run(lookup, secretSha256, id).changes === 1;
  }

  revokeKey(id: string, now: number): boolean {
    return this.db.query("UPDATE keys SET revoked_at = coalesce(revoked_at, ?) WHERE id = ?").run(now, id).changes === 1;
  }

  /** Remaining budget of a key in `period` (a key not used since the reset has all of it). */
  remainingOf(keyId: string, period: string): number {
    const row = this.db
      .query(`SELECT budget_mc - ${SPENT_IN_PERIOD} AS remaining FROM keys WHERE id = :id`)
      .get({ period, id: keyId }) as { remaining: number } | null;
    return row?.remaining ?? 0;
  }

  // --- the clearing path ----------------------------------------------------------------------

  /**
   * A refusal with no receipt (429, 404, 400 ARGS_INVALID): an audit row, and a failure count
   * but for a 429 (which reached nothing; counting it would keep the key shut after its calls
   * in flight succeed).
   */
  recordPlainRefusal(ctx: CallContext, outcome: PlainOutcome, httpStatus: number): void {
    this.immediate(() => {
      if (outcome !== "refused_rate_limited") this.countFailure(ctx.key.id, ctx.hour);
      this.appendAudit(ctx, outcome, httpStatus, null);
    });
  }

  /** 403: the tool is not on the allowlist. A signed receipt, no money moves. */
  refuseNotAllowed(ctx: CallContext, make: ReceiptMaker): { receipt: StoredReceipt; remainingMc: number } {
    return this.immediate(() => {
      const key = this.countFailure(ctx.key.id, ctx.hour)!;
      const remainingMc = key.budget_mc - spentIn(key, ctx.period);
      const receipt = this.appendReceipt(ctx, make, "refused_not_allowed", statusOf("refused_not_allowed"), 0, remainingMc, ctx.period);
      this.appendAudit(ctx, "refused_not_allowed", statusOf("refused_not_allowed"), receipt.id);
      return { receipt, remainingMc };
    });
  }

  /**
   * Reserves the price with one conditional UPDATE that also rolls the period over: the budget
   * check, the reset and the spend are one statement, so parallel callers (threads, processes)
   * can never together pass a budget, and a reset cannot reopen it twice. The period only moves
   * forward: a clock stepping back cannot reopen a spent period. The same statement counts the
   * call against the hour's failure limit before it reaches the upstream (settle takes it back
   * when the call is charged): calls in flight cannot together pass the limit either.
   */
  reserve(ctx: CallContext, make: ReceiptMaker): ReserveResult {
    return this.immediate((): ReserveResult => {
      const reserved = this.db
        .query(
          `UPDATE keys SET spent_mc = ${SPENT_IN_PERIOD} + :price, period = :period,
             fail_count = (CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END) + 1, fail_hour = :hour
           WHERE id = :id AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > :now) AND :period >= period
             AND ${SPENT_IN_PERIOD} + :price <= budget_mc
             AND (CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END) < :failures
           RETURNING budget_mc - spent_mc AS remaining`,
        )
        .get({ id: ctx.key.id, period: ctx.period, price: ctx.priceMc, now: ctx.now, hour: ctx.hour, failures: FAILURES_PER_HOUR }) as {
        remaining: number;
      } | null;
      if (reserved !== null) {
        this.db
          .query(
            `INSERT INTO spend (key_id, period, spent_mc) VALUES (?, ?, ?)
             ON CONFLICT (key_id, period) DO UPDATE SET spent_mc = spent_mc + excluded.spent_mc`,
          )
          .run(ctx.key.id, ctx.period, ctx.priceMc);
        const res = this.db
          .query(
            `INSERT INTO reservations (key_id, org_id, tool, period, price_mc, upstream_cost_mc, params_sha256, created_at, state)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open') RETURNING id`,
          )
          .get(ctx.key.id, ctx.key.org_id, ctx.tool, ctx.period, ctx.priceMc, ctx.upstreamCostMc, ctx.paramsSha256, ctx.now) as { id: number };
        return { kind: "reserved", reservationId: res.id, remainingMc: reserved.remaining };
      }
      const now = this.getKey(ctx.key.id);
      if (now === null || now.revoked_at !== null || (now.expires_at !== null && now.expires_at <= ctx.now)) return { kind: "key_gone" };
      if (now.fail_hour === ctx.hour && now.fail_count >= FAILURES_PER_HOUR) {
        this.appendAudit(ctx, "refused_rate_limited", statusOf("refused_rate_limited"), null);
        return { kind: "rate_limited", remainingMc: now.budget_mc - spentIn(now, ctx.period) };
      }
      const key = this.countFailure(ctx.key.id, ctx.hour)!;
      const remainingMc = key.budget_mc - spentIn(key, ctx.period);
      const receipt = this.appendReceipt(ctx, make, "refused_budget", statusOf("refused_budget"), 0, remainingMc, ctx.period);
      this.appendAudit(ctx, "refused_budget", statusOf("refused_budget"), receipt.id);
      return { kind: "no_room", receipt, remainingMc };
    });
  }

  /**
   * Settles an open reservation: the charge stays, or the price goes back to the period it was
   * reserved from (a reset in between never refunds into the new period). The state change, the
   * money, the receipt and the audit row commit together.
   */
  settle(
    reservationId: number,
    outcome: SettleOutcome,
    httpStatus: number,
    resultSha256: string | null,
    now: number,
    hour: string,
    make: ReceiptMaker,
  ): SettleResult {
    return this.immediate((): SettleResult => {
      const receiptId = newId("rcpt");
      const res = this.db
        .query("UPDATE reservations SET state = 'settled', outcome = ?, receipt_id = ? WHERE id = ? AND state = 'open' RETURNING *")
        .get(outcome, receiptId, reservationId) as ReservationRow | null;
      if (res === null) {
        const prior = this.db.query("SELECT * FROM reservations WHERE id = ?").get(reservationId) as ReservationRow | null;
        if (prior === null) throw new DeskLedgerError("MISSING");
        const receipt = prior.receipt_id === null ? null : this.getReceipt(prior.receipt_id);
        return { kind: "already_settled", receipt, outcome: prior.outcome, remainingMc: this.remainingOf(prior.key_id, prior.period) };
      }
      const charged = outcome === "charged";
      // The call was counted as failing when it was reserved: a charge takes that back (in the
      // hour it was counted in, if that hour is still the key's); a failure keeps it. A refund
      // lowers the key's spend only while it is still in the reservation's period.
      const key = (
        charged
          ? this.db
              .query(
                `UPDATE keys SET fail_count = CASE WHEN fail_hour = :hour AND fail_count > 0 THEN fail_count - 1 ELSE fail_count END
                 WHERE id = :id RETURNING *`,
              )
              .get({ id: res.key_id, hour: hourOf(res.created_at) })
          : this.db
              .query("UPDATE keys SET spent_mc = CASE WHEN period = :period THEN spent_mc - :price ELSE spent_mc END WHERE id = :id RETURNING *")
              .get({ id: res.key_id, period: res.period, price: res.price_mc })
      ) as KeyRow;
      if (!charged) this.db.query("UPDATE spend SET spent_mc = spent_mc - ? WHERE key_id = ? AND period = ?").run(res.price_mc, res.key_id, res.period);
      const remainingMc = key.budget_mc - spentIn(key, periodOf(key.reset, now));
      const ctx: CallContext = {
        key,
        tool: res.tool,
        priceMc: res.price_mc,
        upstreamCostMc: res.upstream_cost_mc,
        paramsSha256: res.params_sha256,
        now,
        hour,
        period: res.period,
      };
      const receipt = this.appendReceipt(ctx, make, outcome, httpStatus, charged ? res.price_mc : 0, remainingMc, res.period, resultSha256, receiptId);
      this.appendAudit(ctx, outcome, httpStatus, receipt.id);
      return { kind: "settled", receipt, remainingMc };
    });
  }

  /** Ids of reservations still open that were taken before `beforeMs` (all of them: Infinity). */
  openReservations(beforeMs: number): number[] {
    const rows = this.db
      .query("SELECT id FROM reservations WHERE state = 'open' AND created_at < ? ORDER BY id")
      .all(Number.isFinite(beforeMs) ? beforeMs : Number.MAX_SAFE_INTEGER) as { id: number }[];
    return rows.map((r) => r.id);
  }

  /** Counts a failed call of the key in `hour` and returns the key row as it now is. */
  private countFailure(keyId: string, hour: string): KeyRow | null {
    return this.db
      .query("UPDATE keys SET fail_count = CASE WHEN fail_hour = :hour THEN fail_count ELSE 0 END + 1, fail_hour = :hour WHERE id = :id RETURNING *")
      .get({ id: keyId, hour }) as KeyRow | null;
  }

  private appendAudit(ctx: CallContext, outcome: ReceiptOutcome | PlainOutcome, httpStatus: number, receiptId: string | null): void {
    const margin = outcome === "charged" ? ctx.priceMc - ctx.upstreamCostMc : 0;
    this.db
      .query(
        `INSERT INTO audit (at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(ctx.now, ctx.key.org_id, ctx.key.id, ctx.tool, outcome, httpStatus, ctx.priceMc, ctx.upstreamCostMc, margin, receiptId);
  }

  private appendReceipt(
    ctx: CallContext,
    make: ReceiptMaker,
    outcome: ReceiptOutcome,
    httpStatus: number,
    amountMc: number,
    remainingMc: number,
    period: string,
    resultSha256: string | null = null,
    receiptId: string = newId("rcpt"),
  ): StoredReceipt {
    const last = this.db.query("SELECT seq, sha256 FROM receipts WHERE key_id = ? ORDER BY seq DESC LIMIT 1").get(ctx.key.id) as {
      seq: number;
      sha256: string;
    } | null;
    const receipt = make({
      receiptId,
      link: { seq: (last?.seq ?? 0) + 1, prevSha256: last?.sha256 ?? null },
      keyId: ctx.key.id,
      orgId: ctx.key.org_id,
      tool: ctx.tool,
      outcome,
      httpStatus,
      priceMc: ctx.priceMc,
      amountMc,
      upstreamCostMc: ctx.upstreamCostMc,
      remainingMc,
      period,
      paramsSha256: ctx.paramsSha256,
      resultSha256,
      issuedAt: ctx.now,
    });
    this.db
      .query(
        `INSERT INTO receipts (id, org_id, key_id, seq, issued_at, tool, outcome, period, amount_mc, kid, sha256, envelope)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(receipt.id, ctx.key.org_id, ctx.key.id, (last?.seq ?? 0) + 1, ctx.now, ctx.tool, outcome, period, amountMc, receipt.kid, receipt.sha256, receipt.envelope);
    return receipt;
  }

  // --- receipts, audit, signing keys ----------------------------------------------------------

  getReceipt(id: string): ReceiptRow | null {
    return this.db.query("SELECT * FROM receipts WHERE id = ?").get(id) as ReceiptRow | null;
  }

  /** One key's receipts issued at or after `sinceMs`, in chain order, at most `limit`. */
  keyReceipts(keyId: string, sinceMs: number, limit: number): ReceiptRow[] {
    return this.db
      .query("SELECT * FROM receipts WHERE key_id = :key AND issued_at >= :since ORDER BY seq LIMIT :limit")
      .all({ key: keyId, since: sinceMs, limit }) as ReceiptRow[];
  }

  /**
   * Keeps the result of a charged call until `heldUntil`: past ones are dropped first, and a key
   * keeps its `perKey` newest, so what a flood of disconnects can hold stays bounded.
   */
  holdResult(held: { receiptId: string; keyId: string; result: string; heldUntil: number; now: number; perKey: number }): void {
    this.immediate(() => {
      this.db.query("DELETE FROM held_results WHERE held_until <= ?").run(held.now);
      this.db
        .query("INSERT INTO held_results (receipt_id, key_id, result, held_until) VALUES (?, ?, ?, ?) ON CONFLICT (receipt_id) DO NOTHING")
        .run(held.receiptId, held.keyId, held.result, held.heldUntil);
      this.db
        .query(
          `DELETE FROM held_results WHERE key_id = :key AND receipt_id NOT IN
             (SELECT receipt_id FROM held_results WHERE key_id = :key ORDER BY rowid DESC LIMIT :keep)`,
        )
        .run({ key: held.keyId, keep: held.perKey });
    });
  }

  /** The held result of a receipt (its JSON text and key), while it is held at `now`. */
  heldResult(receiptId: string, now: number): { key_id: string; result: string } | null {
    return this.db.query("SELECT key_id, result FROM held_results WHERE receipt_id = ? AND held_until > ?").get(receiptId, now) as {
      key_id: string;
      result: string;
    } | null;
  }

  /** Which of these receipts have a result held at `now`. */
  heldAmong(receiptIds: string[], now: number): Set<string> {
    if (receiptIds.length === 0) return new Set();
    const rows = this.db
      .query(`SELECT receipt_id FROM held_results WHERE held_until > ? AND receipt_id IN (${receiptIds.map(() => "?").join(", ")})`)
      .all(now, ...receiptIds) as { receipt_id: string }[];
    return new Set(rows.map((r) => r.receipt_id));
  }

  /** Receipts in issue order (per key, in chain order), optionally of one org and since a time. */
  listReceipts(orgId: string | null, sinceMs: number | null): ReceiptRow[] {
    return this.db
      .query(
        `SELECT * FROM receipts WHERE (:org IS NULL OR org_id = :org) AND (:since IS NULL OR issued_at >= :since)
         ORDER BY rowid`,
      )
      .all({ org: orgId, since: sinceMs }) as ReceiptRow[];
  }

  listAudit(filter: { orgId: string | null; keyId: string | null; sinceMs: number | null; limit: number }): AuditRow[] {
    return this.db
      .query(
        `SELECT at, org_id, key_id, tool, outcome, http_status, price_mc, upstream_cost_mc, margin_mc, receipt_id FROM audit
         WHERE (:org IS NULL OR org_id = :org) AND (:key IS NULL OR key_id = :key) AND (:since IS NULL OR at >= :since)
         ORDER BY id LIMIT :limit`,
      )
      .all({ org: filter.orgId, key: filter.keyId, since: filter.sinceMs, limit: filter.limit }) as AuditRow[];
  }

  addSigningKey(kid: string, publicJwk: string, now: number): void {
    this.db
      .transaction(() => {
        this.db.query("UPDATE signing_keys SET retired_at = ? WHERE retired_at IS NULL AND kid <> ?").run(now, kid);
        this.db.query("INSERT INTO signing_keys (kid, public_jwk, created_at) VALUES (?, ?, ?) ON CONFLICT (kid) DO NOTHING").run(kid, publicJwk, now);
      })
      .immediate();
  }

  listSigningKeys(): { kid: string; public_jwk: string; created_at: number; retired_at: number | null }[] {
    return this.db.query("SELECT * FROM signing_keys ORDER BY created_at, kid").all() as {
      kid: string;
      public_jwk: string;
      created_at: number;
      retired_at: number | null;
    }[];
  }

  // --- desk check -----------------------------------------------------------------------------

  /**
   * The money invariants, as a list of what is wrong (empty when the ledger is sound):
   * for every key and period, spent = charges + open reservations; the key row's spend equals
   * its current period's; reservation and receipt counts agree.
   */
  checkMoney(): string[] {
    const problems: string[] = [];
    const rows = this.db
      .query(
        `SELECT s.key_id, s.period, s.spent_mc,
           coalesce((SELECT sum(amount_mc) FROM receipts r WHERE r.key_id = s.key_id AND r.period = s.period AND r.outcome = 'charged'), 0) AS charged,
           coalesce((SELECT sum(price_mc) FROM reservations v WHERE v.key_id = s.key_id AND v.period = s.period AND v.state = 'open'), 0) AS open
         FROM spend s ORDER BY s.key_id, s.period`,
      )
      .all() as { key_id: string; period: string; spent_mc: number; charged: number; open: number }[];
    for (const r of rows) {
      if (r.spent_mc !== r.charged + r.open) {
        problems.push(`key ${printable(r.key_id)} period ${printable(r.period)}: spent ${r.spent_mc} mc, but charges ${r.charged} + open reservations ${r.open}`);
      }
    }
    const keys = this.db
      .query("SELECT k.id, k.spent_mc, k.budget_mc, coalesce(s.spent_mc, 0) AS period_spent FROM keys k LEFT JOIN spend s ON s.key_id = k.id AND s.period = k.period")
      .all() as { id: string; spent_mc: number; budget_mc: number; period_spent: number }[];
    for (const k of keys) {
      if (k.spent_mc !== k.period_spent) problems.push(`key ${printable(k.id)}: spent ${k.spent_mc} mc on the key, ${k.period_spent} mc in its period`);
    }
    const orphans = this.db
      .query(
        `SELECT count(*) AS n FROM receipts r WHERE r.outcome = 'charged' AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.id = r.key_id)`,
      )
      .get() as { n: number };
    if (orphans.n > 0) problems.push(`${orphans.n} charged receipts belong to no key`);
    const settled = this.db.query("SELECT count(*) AS n FROM reservations WHERE state = 'settled'").get() as { n: number };
    const settledReceipts = this.db
      .query("SELECT count(*) AS n FROM receipts WHERE outcome NOT IN ('refused_not_allowed', 'refused_budget')")
      .get() as { n: number };
    if (settled.n !== settledReceipts.n) {
      problems.push(`${settled.n} settled reservations but ${settledReceipts.n} receipts of settled calls`);
    }
    return problems;
  }

  /** Every receipt of every key in chain order, for the chain and signature checks. */
  receiptsByKey(): Map<string, ReceiptRow[]> {
    const out = new Map<string, ReceiptRow[]>();
    for (const row of this.db.query("SELECT * FROM receipts ORDER BY key_id, seq").all() as ReceiptRow[]) {
      const list = out.get(row.key_id) ?? [];
      list.push(row);
      out.set(row.key_id, list);
    }
    return out;
  }
}
