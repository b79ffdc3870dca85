// The alert outbox: the port the delivery loop drains, and its retry schedule. The desk writes
// an alert row in the same transaction as the charge that crossed a threshold; the loop
// (adapters/webhooks) delivers it at least once, under the same id on every attempt.

/** One alert waiting for delivery, as the ledger stored it. */
export type OutboxAlert = {
  /** `alrt_…`: the `webhook-id` of every attempt. */
  id: string;
  /** The exact bytes to send (canonical JSON of the event), stored with the row. */
  body: string;
  /** Failed attempts so far. */
  attempts: number;
};

/**
 * What the delivery loop needs from the ledger. Every method is one transaction; the SQLite
 * ledger and the PostgreSQL one implement it and pass the same contract suite
 * (test/helpers/alert-outbox-contract.ts).
 */
export interface AlertOutbox {
  /**
   * Up to `limit` alerts that are neither delivered nor given up and whose next attempt is due
   * (`next_at <= nowMs`), oldest first, each **leased** in the same transaction: its next
   * attempt moves to `leaseUntilMs`, so no other claim returns it while this attempt runs (two
   * loops, or a loop and its restart, never deliver one alert at once). A desk that dies mid
   * attempt leaves the lease to expire, and the alert is claimed again after it.
   */
  claimDue(nowMs: number, limit: number, leaseUntilMs: number): Promise<OutboxAlert[]>;
  /** The attempt succeeded (2xx): the alert is never claimed again. */
  markDelivered(id: string, atMs: number): Promise<void>;
  /**
   * The attempt failed: attempts + 1, `error` kept as the last error, and the next attempt at
   * `nextAtMs`, or given up for good when it is null.
   */
  markAttempt(id: string, atMs: number, nextAtMs: number | null, error: string): Promise<void>;
}

const S = 1000;
const MIN = 60 * S;
const H = 60 * MIN;

/**
 * The wait after the 1st, 2nd, ... 9th failed attempt: the schedule Standard Webhooks
 * recommends (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h). The 10th failure gives up,
 * about 75.5 hours (3 days and a bit) after the first attempt.
 */
export const RETRY_DELAYS_MS: readonly number[] = [5 * S, 5 * MIN, 30 * MIN, 2 * H, 5 * H, 10 * H, 14 * H, 20 * H, 24 * H];

/** Each wait is scaled by a factor drawn in [0.8, 1.2), so receivers that failed together are not retried together. */
export const JITTER = 0.2;

/** A receiver's Retry-After is honoured up to this long, never beyond. */
export const MAX_RETRY_AFTER_MS = 24 * H;

/**
 * When to try again after the `failures`-th failed attempt (1 for the first), or null to give
 * up. `random` is in [0, 1); `retryAfterMs`, when the receiver sent one, lengthens the wait
 * (capped at 24 h), never shortens it.
 */
export function nextAttemptAt(
  failures: number,
  nowMs: number,
  random: () => number,
  schedule: readonly number[] = RETRY_DELAYS_MS,
  retryAfterMs: number | null = null,
): number | null {
  const base = schedule[failures - 1];
  if (base === undefined) return null;
  const jittered = Math.round(base * (1 - JITTER + 2 * JITTER * random()));
  const wait = retryAfterMs === null ? jittered : Math.max(jittered, Math.min(retryAfterMs, MAX_RETRY_AFTER_MS));
  return nowMs + wait;
}

/** A Retry-After header in milliseconds from `nowMs` (delay-seconds or an HTTP date), or null. */
export function retryAfterMs(header: string | null, nowMs: number): number | null {
  if (header === null) return null;
  const text = header.trim();
  if (/^[0-9]{1,9}$/.test(text)) return Number(text) * S;
  const at = Date.parse(text);
  return Number.isNaN(at) || !/[A-Za-z]/.test(text) ? null : Math.max(0, at - nowMs);
}

/**
 * `--alert-webhook URL`: an absolute http: or https: URL of at most 2048 characters, without
 * user or password (a credential in a URL lands in logs; the receiver checks the signature
 * instead). Returns the parsed URL, or null. https is the sensible choice beyond loopback: the
 * signatures prove who sent an alert, not who read it.
 */
export function parseAlertWebhookUrl(text: string): URL | null {
  if (text.length > 2048) return null;
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return null;
  }
  if (url.protocol !== "https:" && url.protocol !== "http:") return null;
  if (url.username !== "" || url.password !== "" || url.hostname === "" || url.href.length > 2048) return null;
  return url;
}
