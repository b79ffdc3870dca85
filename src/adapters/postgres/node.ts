// This desk node's place among the nodes sharing the database: it registers its id, keeps its
// lease (lease-keeper.ts), takes calls only while it holds it, and registers again by itself when
// it lost it (the database was gone longer than the lease) once the database answers. A clean
// stop releases the lease at once, so the other nodes may sweep what is left without waiting.
import type { SQL } from "bun";
import type { Log } from "../../core/desk/ports.ts";
import { failureName } from "./db.ts";
import { withDeadline } from "./errors.ts";
import { LeaseKeeper, type LostReason } from "./lease-keeper.ts";
import { registerNode, releaseLease, renewLease } from "./leases.ts";
import type { NodeLease } from "./money.ts";

export type LeaseTiming = {
  /** How long a renewal holds the lease, by the database's clock (default 10 s). */
  leaseMs: number;
  /** How often it is renewed (default 2 s); also how often a lost lease is sought again. */
  renewEveryMs: number;
  /** Held back from the lease on this node's side (default 2 s). */
  safetyMs: number;
};

export const DEFAULT_LEASE: LeaseTiming = { leaseMs: 10_000, renewEveryMs: 2_000, safetyMs: 2_000 };

/** The node id is held by a lease another process keeps renewing: two processes would refund each other's calls. */
export class NodeIdHeld extends Error {
  override name = "NodeIdHeld";
  constructor(readonly nodeId: string) {
    super(`node id ${nodeId} is held by another running desk (its lease keeps being renewed)`);
  }
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

export class NodeSession {
  #keeper: LeaseKeeper | null = null;
  #lease: NodeLease | null = null;
  #stopped = false;
  #seeking: ReturnType<typeof setTimeout> | null = null;

  private constructor(
    private readonly sql: SQL,
    readonly id: string,
    private readonly timing: LeaseTiming,
    private readonly log: Log,
  ) {}

  /**
   * Registers `id`. An id whose lease still runs is waited for, up to one lease and one renewal
   * (a previous process of this node killed moments ago); one still renewed after that is held
   * by another running process, and refused.
   */
  static async start(sql: SQL, id: string, timing: LeaseTiming, log: Log): Promise<NodeSession> {
    const session = new NodeSession(sql, id, timing, log);
    const giveUpAt = performance.now() + timing.leaseMs + timing.renewEveryMs;
    let waited = false;
    for (;;) {
      if (await session.register()) return session;
      if (performance.now() > giveUpAt) throw new NodeIdHeld(id);
      if (!waited) log(`node ${id}: waiting for the lease of its previous run to run out (at most ${Math.ceil(timing.leaseMs / 1000)} s)`);
      waited = true;
      await sleep(Math.min(timing.renewEveryMs, 500));
    }
  }

  /** One registration attempt; true when the lease is ours. Errors propagate. */
  private async register(): Promise<boolean> {
    const sentAt = performance.now();
    const r = await withDeadline(this.timing.renewEveryMs * 2, registerNode(this.sql, this.id, this.timing.leaseMs));
    if (r.kind !== "registered") return false;
    if (this.#stopped) {
      await releaseLease(this.sql, r.lease).catch(() => {});
      return true;
    }
    this.#lease = r.lease;
    const lease = r.lease;
    const keeper = new LeaseKeeper({
      ...this.timing,
      renew: () => withDeadline(this.timing.renewEveryMs, renewLease(this.sql, lease, this.timing.leaseMs)),
      onRenewalFailed: (err) => this.log(`node ${this.id}: lease renewal failed (${failureName(err)}); retrying`),
      onLost: (reason) => this.lost(reason),
    });
    this.#keeper = keeper;
    keeper.start(sentAt);
    return true;
  }

  private lost(reason: LostReason): void {
    this.log(
      `node ${this.id}: lease ${reason === "expired" ? "ran out before it could be renewed" : "was refused"}; calls are answered 503 until it is held again`,
    );
    this.#keeper = null;
    this.#lease = null;
    this.seek();
  }

  /** Registers again, every renewal interval, until it succeeds or the node stops. */
  private seek(): void {
    if (this.#stopped || this.#seeking !== null) return;
    this.#seeking = setTimeout(async () => {
      this.#seeking = null;
      try {
        if (await this.register()) {
          if (!this.#stopped) this.log(`node ${this.id}: lease held again (epoch ${this.#lease?.epoch})`);
          return;
        }
      } catch {
        // The database is still away: try again at the next interval.
      }
      this.seek();
    }, this.timing.renewEveryMs);
    (this.#seeking as { unref?: () => void }).unref?.();
  }

  /** The lease this node takes calls under, or null while it does not hold one. */
  lease(): NodeLease | null {
    return this.#keeper?.holding() ? this.#lease : null;
  }

  /** The database said the lease is gone (a reservation refused for it): renew now to learn it for sure. */
  doubt(): void {
    void this.#keeper?.renewNow();
  }

  /** Stops renewing and ends the lease at once. */
  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#seeking !== null) clearTimeout(this.#seeking);
    this.#keeper?.stop();
    const lease = this.#lease;
    this.#keeper = null;
    this.#lease = null;
    if (lease !== null) await withDeadline(this.timing.renewEveryMs, releaseLease(this.sql, lease)).catch(() => {});
  }
}
