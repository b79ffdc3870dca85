// Limits that hold for every upstream, whatever its protocol: how many HTTP exchanges one
// upstream may have open, and how many bytes one answer may carry back.

/**
 * HTTP exchanges one upstream may have open at once; more wait for a slot within their
 * deadline. Half of the runtime's shared pool of 256 fetch connections: one upstream that stops
 * answering cannot take the connections the others need.
 */
export const MAX_EXCHANGES_PER_UPSTREAM = 128;

/**
 * The most bytes one HTTP exchange with an upstream may carry back: a registered upstream cannot
 * make the desk buffer without end. Past it the exchange fails, and the call is refunded.
 */
export const MAX_UPSTREAM_ANSWER_BYTES = 4 * 1024 * 1024;

/** A counting semaphore whose waiters give up when their signal aborts. */
export class Slots {
  private used = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly size: number) {}

  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.used < this.size && this.waiting.length === 0) {
      this.used++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal.removeEventListener("abort", giveUp);
        this.used++;
        resolve();
      };
      const giveUp = () => {
        const i = this.waiting.indexOf(grant);
        if (i !== -1) this.waiting.splice(i, 1);
        reject(signal.reason);
      };
      this.waiting.push(grant);
      signal.addEventListener("abort", giveUp, { once: true });
    });
  }

  release(): void {
    this.used--;
    this.waiting.shift()?.();
  }

  /** Exchanges holding a slot now (for tests and the listing). */
  inUse(): number {
    return this.used;
  }
}
