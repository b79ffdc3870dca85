// The alert delivery loop: drains the ledger's alert outbox (core/finance/alert-outbox.ts) to
// the operator's `--alert-webhook URL`, in the Standard Webhooks format, at least once. Each
// attempt is one POST under a deadline; redirects are not followed; the answer body is read
// only up to a small cap; a failure is retried on the schedule of RETRY_DELAYS_MS (about 3 days)
// under the same `webhook-id`, so a receiver dedupes whatever the retries or restarts.
import { type AlertOutbox, nextAttemptAt, type OutboxAlert, RETRY_DELAYS_MS, retryAfterMs } from "../../core/finance/alert-outbox.ts";
import { signWebhook } from "../../core/finance/standard-webhooks.ts";
import type { ReceiptSigner } from "../../core/receipt/sign.ts";

/** Standard Webhooks recommends 15-30 s for a receiver to answer. */
export const DELIVERY_DEADLINE_MS = 15_000;
/** The lease outlives the deadline by this much, so a live attempt is never claimed twice. */
export const LEASE_MARGIN_MS = 5_000;
/** Bytes of an answer body read (and thrown away) before the connection is let go. */
export const ANSWER_CAP_BYTES = 4096;

export type AttemptReport = {
  id: string;
  /** 1 for the first attempt of this alert. */
  attempt: number;
  ok: boolean;
  /** The receiver's HTTP status, or null when none came (deadline, transport error). */
  status: number | null;
  /** Why it failed (never the URL, a header or a body), or null when delivered. */
  error: string | null;
  /** When the next attempt is due; null when delivered or given up. */
  nextAtMs: number | null;
};

export type AlertDeliveryOptions = {
  url: URL;
  /** The receiver's HMAC key (parseWebhookSecret of its whsec_ secret): the v1 signature. */
  secret: Uint8Array;
  /** The desk's receipt signer: the v1a signature, checkable with the public JWKS. */
  signer: Pick<ReceiptSigner, "signBytes">;
  outbox: AlertOutbox;
  now?: () => number;
  random?: () => number;
  deadlineMs?: number;
  /** Alerts attempted at once per pass. */
  batch?: number;
  /** How long the loop rests between passes when nothing pokes it. */
  pollMs?: number;
  schedule?: readonly number[];
  onAttempt?: (report: AttemptReport) => void;
  /** A pass that failed (the outbox threw): the loop goes on at the next poll. */
  onError?: (err: unknown) => void;
};

type Outcome = { status: number | null; error: string | null; retryAfter: string | null };

export class AlertDelivery {
  private readonly now: () => number;
  private readonly random: () => number;
  private readonly deadlineMs: number;
  private readonly batch: number;
  private readonly pollMs: number;
  private readonly schedule: readonly number[];
  /** Attempts running in this process, by alert id: the in-process guard beside the lease. */
  private readonly inFlight = new Map<string, AbortController>();
  private running = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;
  private poked = false;

  constructor(private readonly options: AlertDeliveryOptions) {
    this.now = options.now ?? Date.now;
    this.random = options.random ?? Math.random;
    this.deadlineMs = options.deadlineMs ?? DELIVERY_DEADLINE_MS;
    this.batch = options.batch ?? 8;
    this.pollMs = options.pollMs ?? 1000;
    this.schedule = options.schedule ?? RETRY_DELAYS_MS;
  }

  /** One pass: claim what is due, attempt each once (together), record every outcome. */
  async runOnce(): Promise<AttemptReport[]> {
    const nowMs = this.now();
    const claimed = await this.options.outbox.claimDue(nowMs, this.batch, nowMs + this.deadlineMs + LEASE_MARGIN_MS);
    return Promise.all(claimed.filter((a) => !this.inFlight.has(a.id)).map((alert) => this.deliver(alert)));
  }

  /** Runs passes until stop(): after each, rests pollMs or until poke(). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        this.poked = false;
        try {
          await this.runOnce();
        } catch (err) {
          this.options.onError?.(err);
        }
        if (!this.running || this.poked) continue;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.pollMs);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    })();
  }

  /** A new alert was written: look now rather than at the next poll. */
  poke(): void {
    this.poked = true;
    this.wake?.();
  }

  /**
   * Ends the loop. Attempts in flight are cut and not recorded: their lease runs out and the
   * next loop (after a restart) sends them again under the same id.
   */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    for (const controller of this.inFlight.values()) controller.abort(new DOMException("the delivery loop stopped", "AbortError"));
    await this.loop;
    this.loop = null;
  }

  private async deliver(alert: OutboxAlert): Promise<AttemptReport> {
    const controller = new AbortController();
    this.inFlight.set(alert.id, controller);
    let outcome: Outcome;
    try {
      outcome = await this.post(alert, controller);
    } finally {
      this.inFlight.delete(alert.id);
    }
    const attempt = alert.attempts + 1;
    const atMs = this.now();
    if (controller.signal.aborted && controller.signal.reason instanceof DOMException && controller.signal.reason.name === "AbortError") {
      return { id: alert.id, attempt, ok: false, status: null, error: "stopped", nextAtMs: null };
    }
    let report: AttemptReport;
    if (outcome.error === null) {
      await this.options.outbox.markDelivered(alert.id, atMs);
      report = { id: alert.id, attempt, ok: true, status: outcome.status, error: null, nextAtMs: null };
    } else {
      // 410 Gone: the receiver says it wants no more of this; Standard Webhooks says stop.
      const nextAtMs = outcome.status === 410 ? null : nextAttemptAt(attempt, atMs, this.random, this.schedule, retryAfterMs(outcome.retryAfter, atMs));
      await this.options.outbox.markAttempt(alert.id, atMs, nextAtMs, outcome.error);
      report = { id: alert.id, attempt, ok: false, status: outcome.status, error: outcome.error, nextAtMs };
    }
    this.options.onAttempt?.(report);
    return report;
  }

  /** One POST, headers and capped body under the deadline. */
  private async post(alert: OutboxAlert, controller: AbortController): Promise<Outcome> {
    const timer = setTimeout(() => controller.abort(new DOMException("the delivery deadline passed", "TimeoutError")), this.deadlineMs);
    try {
      const headers = signWebhook({ id: alert.id, timestampS: Math.floor(this.now() / 1000), body: alert.body }, this.options.secret, this.options.signer);
      const res = await fetch(this.options.url, {
        method: "POST",
        body: alert.body,
        headers: { ...headers, "content-type": "application/json", "user-agent": "ask-only-desk" },
        // A redirect is a failure (Standard Webhooks): following it would post the alert to
        // wherever the receiver points, and sends the same bytes twice.
        redirect: "manual",
        signal: controller.signal,
      });
      await drain(res);
      if (res.status >= 200 && res.status <= 299) return { status: res.status, error: null, retryAfter: null };
      const error = res.status >= 300 && res.status <= 399 ? `redirect not followed (HTTP ${res.status})` : `HTTP ${res.status}`;
      return { status: res.status, error, retryAfter: res.headers.get("retry-after") };
    } catch (err) {
      if (controller.signal.aborted) return { status: null, error: `no answer within ${this.deadlineMs} ms`, retryAfter: null };
      const code = (err as { code?: unknown } | null)?.code;
      return {
        status: null,
        error: typeof code === "string" && /^[A-Za-z_]{1,40}$/.test(code) ? `transport error (${code})` : "transport error",
        retryAfter: null,
      };
    } finally {
      clearTimeout(timer);
    }
  }
}

/** Reads at most ANSWER_CAP_BYTES of the answer and lets the rest go: a receiver cannot make us hold its body. */
async function drain(res: Response): Promise<void> {
  if (res.body === null) return;
  const reader = res.body.getReader();
  let seen = 0;
  try {
    while (seen <= ANSWER_CAP_BYTES) {
      const { done, value } = await reader.read();
      if (done) return;
      seen += value.byteLength;
    }
  } finally {
    await reader.cancel().catch(() => {});
  }
}
