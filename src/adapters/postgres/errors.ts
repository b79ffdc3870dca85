// What a failed PostgreSQL call means for the desk. `unavailable`: the database cannot be reached
// or cannot serve us now (the call is answered 503 LEDGER_UNAVAILABLE before any upstream is
// called, and nothing is charged); `constraint`: the database refused a write that breaks one of
// its rules (a duplicate name, a budget below what was spent); `bug`: anything else, a fault of
// ours (500 INTERNAL). When in doubt the answer is `bug`, never `constraint`: a fault must not
// read as the caller's mistake.

export type FailureKind = "unavailable" | "constraint" | "bug";

/** Bun's own codes for a connection that failed, broke, or cannot be made now. */
const UNAVAILABLE_CODES = new Set([
  "ERR_POSTGRES_CONNECTION_CLOSED",
  "ERR_POSTGRES_CONNECTION_REFUSED",
  "ERR_POSTGRES_CONNECTION_FAILED",
  "ERR_POSTGRES_CONNECTION_TIMEOUT",
  "ERR_POSTGRES_IDLE_TIMEOUT",
  "ERR_POSTGRES_LIFETIME_TIMEOUT",
  "ERR_POSTGRES_TLS_NOT_AVAILABLE",
  "ERR_POSTGRES_TLS_UPGRADE_FAILED",
  // A query this adapter cancelled because its deadline passed.
  "ERR_POSTGRES_QUERY_CANCELLED",
]);

/**
 * SQLSTATEs (or their two-character classes) that say the server cannot serve us now: the
 * connection failed (08), the server is shutting down or starting (57P01-57P03), it lacks a
 * resource (53), its system failed (58), it cancelled a statement that ran past
 * statement_timeout (57014) or waited past lock_timeout (55P03), it is a read-only standby
 * (25006), or two transactions collided (40001, 40P01) and the caller may try again.
 */
const UNAVAILABLE_CLASSES = new Set(["08", "53", "58"]);
const UNAVAILABLE_STATES = new Set(["57P01", "57P02", "57P03", "57014", "55P03", "25006", "40001", "40P01"]);

/**
 * Errors of the TLS handshake (Node's codes, which Bun's client passes on): the server's
 * certificate does not verify. At start-up they stop the desk; on a running node they mean the
 * database cannot be reached as configured.
 */
const TLS_CODE = /^(ERR_TLS_|UNABLE_TO_|CERT_|DEPTH_ZERO_SELF_SIGNED_CERT|SELF_SIGNED_CERT_IN_CHAIN|ERR_SSL_)/;

/** Node's socket errors, in case one surfaces without Bun's wrapping. */
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"]);

/** Thrown by this adapter when a database call passes its deadline. */
export class DeadlineExceeded extends Error {
  override name = "DeadlineExceeded";
  readonly code = "DEADLINE_EXCEEDED";
}

function field(err: unknown, name: string): string | undefined {
  if (typeof err !== "object" || err === null) return undefined;
  const value = (err as Record<string, unknown>)[name];
  return typeof value === "string" ? value : undefined;
}

/** The SQLSTATE the server sent, when it sent one (Bun keeps it in `errno`). */
export function sqlState(err: unknown): string | undefined {
  const state = field(err, "errno");
  return state !== undefined && /^[0-9A-Z]{5}$/.test(state) ? state : undefined;
}

export function classifyFailure(err: unknown): FailureKind {
  if (err instanceof DeadlineExceeded) return "unavailable";
  const code = field(err, "code");
  const state = sqlState(err);
  if (state !== undefined) {
    if (state.startsWith("23")) return "constraint";
    if (UNAVAILABLE_STATES.has(state) || UNAVAILABLE_CLASSES.has(state.slice(0, 2))) return "unavailable";
    // 28xxx (the login was refused) and 3D000 (no such database) while running: the database
    // as configured cannot be reached. At start-up the same errors stop the desk.
    if (state.startsWith("28") || state === "3D000") return "unavailable";
    return "bug";
  }
  if (code === undefined) return "bug";
  if (UNAVAILABLE_CODES.has(code) || SOCKET_CODES.has(code) || TLS_CODE.test(code)) return "unavailable";
  if (code.startsWith("ERR_POSTGRES_SASL_") || code.startsWith("ERR_POSTGRES_AUTHENTICATION_") || code.startsWith("ERR_POSTGRES_CHANNEL_BINDING_")) {
    return "unavailable";
  }
  return "bug";
}

/** The constraint a `constraint` failure names (e.g. "keys_spent_within_budget"), if any. */
export function violatedConstraint(err: unknown): string | undefined {
  return field(err, "constraint");
}

/**
 * Runs `op` with a deadline: past `ms` it rejects with DeadlineExceeded (`unavailable`) and
 * calls `cancel` so the query stops. Without it a server that stopped answering (a network that
 * drops packets, a frozen host) would hold the call for as long as TCP takes to give up, which
 * is many minutes. The statement may still have committed: the caller treats the outcome as
 * unknown, as after a lost COMMIT.
 */
export async function withDeadline<T>(ms: number, op: Promise<T>, cancel: () => void = () => {}): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      cancel();
      reject(new DeadlineExceeded(`the database did not answer within ${ms} ms`));
    }, ms);
  });
  try {
    return await Promise.race([op, deadline]);
  } finally {
    clearTimeout(timer);
  }
}
