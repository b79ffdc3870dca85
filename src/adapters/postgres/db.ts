// The one way the PostgreSQL ledger's stores reach the database: every call under a deadline, and
// every failure that means "the database cannot serve now" turned into the port's
// LedgerUnavailable (503 LEDGER_UNAVAILABLE on every face, before any upstream call on the
// clearing path). Whether the database is reachable is logged when it changes, not per call.
import type { SQL } from "bun";
import { LedgerUnavailable, type Log } from "../../core/desk/ports.ts";
import { classifyFailure, withDeadline } from "./errors.ts";

/**
 * A little longer than the sessions' statement_timeout (5 s): the server ends a slow statement
 * itself, cleanly; the client deadline is for a server that stopped answering altogether.
 */
export const DEFAULT_DEADLINE_MS = 7_000;

/** The error's code or SQLSTATE, for a log line (never its message, which may quote values). */
export function failureName(err: unknown): string {
  if (typeof err !== "object" || err === null) return "error";
  const e = err as { code?: unknown; errno?: unknown; name?: unknown };
  if (typeof e.errno === "string" && /^[0-9A-Z]{5}$/.test(e.errno)) return `SQLSTATE ${e.errno}`;
  if (typeof e.code === "string") return e.code;
  return typeof e.name === "string" ? e.name : "error";
}

export class Db {
  #down: string | null = null;

  constructor(
    readonly sql: SQL,
    private readonly log: Log,
    private readonly deadlineMs = DEFAULT_DEADLINE_MS,
  ) {}

  /** Runs `op` on the pool under the deadline; an unavailable database throws LedgerUnavailable. */
  async run<T>(op: (sql: SQL) => Promise<T>): Promise<T> {
    let value: T;
    try {
      value = await withDeadline(this.deadlineMs, op(this.sql));
    } catch (err) {
      if (err instanceof LedgerUnavailable || classifyFailure(err) !== "unavailable") throw err;
      const name = failureName(err);
      if (this.#down === null) this.log(`ledger: the database cannot serve (${name}); calls are answered 503 LEDGER_UNAVAILABLE until it does`);
      this.#down = name;
      throw new LedgerUnavailable(name);
    }
    if (this.#down !== null) {
      this.#down = null;
      this.log("ledger: the database answers again");
    }
    return value;
  }

  /** A transaction under the deadline (READ COMMITTED; every statement of `body` commits together or not at all). */
  tx<T>(body: (tx: SQL) => Promise<T>): Promise<T> {
    return this.run((sql) => sql.begin(body) as Promise<T>);
  }
}
