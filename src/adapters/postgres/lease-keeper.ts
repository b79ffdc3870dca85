// Keeps this node's lease: renews it every `renewEveryMs`, and says when the node must stop
// taking calls. The node holds its lease until `leaseMs - safetyMs` after the moment it *sent*
// its last successful renewal, by its own monotonic clock: the database set the expiry no
// earlier than that moment, so the node always stops before any other node may judge its lease
// run out and refund its calls. A renewal the database refuses (the lease ran out, or the id
// registered again) loses the lease for good; a renewal that fails (the database unreachable)
// is retried at the next tick while time remains.
export type LeaseTimers = {
  set(run: () => void, ms: number): unknown;
  clear(handle: unknown): void;
};

const realTimers: LeaseTimers = {
  set: (run, ms) => {
    const t = setTimeout(run, ms);
    // A lease timer alone never keeps the process alive.
    (t as { unref?: () => void }).unref?.();
    return t;
  },
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export type LostReason = "expired" | "refused";

export type LeaseKeeperOptions = {
  /** Renews the lease: true when renewed, false when the database refused (the lease is lost). */
  renew: () => Promise<boolean>;
  leaseMs: number;
  renewEveryMs: number;
  /** Held back from the lease for clock-rate differences and the renewal's own travel. */
  safetyMs: number;
  /** A monotonic clock in milliseconds (performance.now by default). */
  clock?: () => number;
  timers?: LeaseTimers;
  /** A renewal failed (the lease may still be held); the next tick tries again. */
  onRenewalFailed?: (error: unknown) => void;
  /** The lease is lost: stop taking calls. Called once. */
  onLost: (reason: LostReason) => void;
};

export class LeaseKeeper {
  private validUntil = Number.NEGATIVE_INFINITY;
  private lost = false;
  private stopped = false;
  private renewing = false;
  private tick: unknown = null;
  private expiry: unknown = null;
  private readonly clock: () => number;
  private readonly timers: LeaseTimers;

  constructor(private readonly o: LeaseKeeperOptions) {
    if (!(o.safetyMs >= 0 && o.renewEveryMs > 0 && o.renewEveryMs < o.leaseMs - o.safetyMs)) {
      throw new RangeError("the lease must outlast a renewal interval plus the safety margin");
    }
    this.clock = o.clock ?? (() => performance.now());
    this.timers = o.timers ?? realTimers;
  }

  /** Starts keeping a lease acquired by a request sent at `sentAt` (on this keeper's clock). */
  start(sentAt: number): void {
    this.extend(sentAt);
    this.scheduleTick();
  }

  /** Whether the node may take a call now. */
  holding(): boolean {
    return !this.lost && !this.stopped && this.clock() < this.validUntil;
  }

  /** Stops renewing (a clean stop); the lease is left to run out or to be released. */
  stop(): void {
    this.stopped = true;
    this.timers.clear(this.tick);
    this.timers.clear(this.expiry);
  }

  private extend(sentAt: number): void {
    this.validUntil = sentAt + this.o.leaseMs - this.o.safetyMs;
    this.timers.clear(this.expiry);
    this.expiry = this.timers.set(() => this.expireIfDue(), Math.max(0, this.validUntil - this.clock()));
  }

  private expireIfDue(): void {
    if (this.lost || this.stopped) return;
    const left = this.validUntil - this.clock();
    if (left > 0) {
      this.expiry = this.timers.set(() => this.expireIfDue(), left);
      return;
    }
    this.lose("expired");
  }

  private lose(reason: LostReason): void {
    if (this.lost || this.stopped) return;
    this.lost = true;
    this.timers.clear(this.tick);
    this.timers.clear(this.expiry);
    this.o.onLost(reason);
  }

  private scheduleTick(): void {
    if (this.lost || this.stopped) return;
    this.tick = this.timers.set(() => void this.renewNow(), this.o.renewEveryMs);
  }

  /** One renewal (the timer calls it; tests may too). Never two at once. */
  async renewNow(): Promise<void> {
    if (this.renewing || this.lost || this.stopped) return;
    this.renewing = true;
    const sentAt = this.clock();
    try {
      const renewed = await this.o.renew();
      // A renewal that comes back after the node gave the lease up does not revive it.
      if (this.lost || this.stopped) return;
      if (!renewed) {
        this.lose("refused");
        return;
      }
      this.extend(sentAt);
    } catch (error) {
      if (!this.lost && !this.stopped) this.o.onRenewalFailed?.(error);
    } finally {
      this.renewing = false;
      this.timers.clear(this.tick);
      this.scheduleTick();
    }
  }
}
