// The lease keeper (src/adapters/postgres/lease-keeper.ts) on an injected clock and timers: it
// renews on schedule, stops the node before the lease can have run out in the database, and
// reports a renewal that fails or a lease that is lost.
import { describe, expect, test } from "bun:test";
import { LeaseKeeper, type LeaseTimers, type LostReason } from "../../src/adapters/postgres/lease-keeper.ts";

/** A clock and timers the test moves by hand. */
class ManualTime implements LeaseTimers {
  now = 1000;
  private queue: { at: number; run: () => void; id: number }[] = [];
  private ids = 0;

  set(run: () => void, ms: number): unknown {
    const id = ++this.ids;
    this.queue.push({ at: this.now + ms, run, id });
    return id;
  }

  clear(handle: unknown): void {
    this.queue = this.queue.filter((t) => t.id !== handle);
  }

  /** Moves the clock to `to`, running each timer due on the way, in order. */
  async advanceTo(to: number): Promise<void> {
    for (;;) {
      this.queue.sort((a, b) => a.at - b.at);
      const next = this.queue[0];
      if (next === undefined || next.at > to) break;
      this.queue.shift();
      this.now = next.at;
      next.run();
      await flush();
    }
    this.now = to;
  }
}

/** Lets the promises of answered renewals settle. */
async function flush(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

type Renewal = { resolve: (ok: boolean) => void; reject: (e: unknown) => void; sentAt: number };

function keeper(time: ManualTime) {
  const renewals: Renewal[] = [];
  const failures: unknown[] = [];
  const lost: LostReason[] = [];
  const k = new LeaseKeeper({
    leaseMs: 15_000,
    renewEveryMs: 5_000,
    safetyMs: 1_000,
    clock: () => time.now,
    timers: time,
    renew: () => new Promise<boolean>((resolve, reject) => renewals.push({ resolve, reject, sentAt: time.now })),
    onRenewalFailed: (e) => failures.push(e),
    onLost: (r) => lost.push(r),
  });
  return { k, renewals, failures, lost };
}

describe("LeaseKeeper", () => {
  test("renews every interval while renewals succeed, and holds the lease throughout", async () => {
    const time = new ManualTime();
    const { k, renewals, lost } = keeper(time);
    k.start(time.now);
    for (let i = 1; i <= 5; i++) {
      await time.advanceTo(1000 + i * 5_000);
      expect(renewals).toHaveLength(i);
      expect(k.holding()).toBe(true);
      renewals[i - 1]!.resolve(true);
      await flush();
    }
    await time.advanceTo(1000 + 5 * 5_000 + 13_999);
    expect(lost).toEqual([]);
  });

  test("when renewals fail, it reports each and stops the node at lease - safety after the last good renewal was sent", async () => {
    const time = new ManualTime();
    const { k, renewals, failures, lost } = keeper(time);
    k.start(1000);
    await time.advanceTo(6000);
    await time.advanceTo(9000);
    // Sent at 6000, answered at 9000: held until 6000 + 15000 - 1000 = 20000, not from the answer.
    renewals[0]!.resolve(true);
    await flush();
    await time.advanceTo(14_000);
    renewals[1]!.reject(new Error("ECONNREFUSED"));
    await flush();
    await time.advanceTo(19_000);
    renewals[2]!.reject(new Error("ECONNREFUSED"));
    await flush();
    expect(failures).toHaveLength(2);
    await time.advanceTo(19_999);
    expect(k.holding()).toBe(true);
    expect(lost).toEqual([]);
    await time.advanceTo(20_000);
    expect(k.holding()).toBe(false);
    expect(lost).toEqual(["expired"]);
    // No renewal is sent after the loss.
    const sent = renewals.length;
    await time.advanceTo(60_000);
    expect(renewals).toHaveLength(sent);
    expect(k.holding()).toBe(false);
    expect(lost).toEqual(["expired"]);
  });

  test("a renewal that hangs does not keep the lease: it is lost on time, with no second renewal in flight", async () => {
    const time = new ManualTime();
    const { k, renewals, lost } = keeper(time);
    k.start(1000);
    await time.advanceTo(6000);
    expect(renewals).toHaveLength(1);
    await time.advanceTo(14_999);
    expect(renewals).toHaveLength(1);
    expect(k.holding()).toBe(true);
    await time.advanceTo(15_000);
    expect(lost).toEqual(["expired"]);
    expect(k.holding()).toBe(false);
    // Its answer, arriving after the loss, does not revive the lease.
    renewals[0]!.resolve(true);
    await flush();
    await time.advanceTo(60_000);
    expect(k.holding()).toBe(false);
    expect(renewals).toHaveLength(1);
  });

  test("a renewal the database refuses loses the lease at once", async () => {
    const time = new ManualTime();
    const { k, renewals, lost } = keeper(time);
    k.start(1000);
    await time.advanceTo(6000);
    renewals[0]!.resolve(false);
    await flush();
    expect(lost).toEqual(["refused"]);
    expect(k.holding()).toBe(false);
    await time.advanceTo(60_000);
    expect(renewals).toHaveLength(1);
    expect(lost).toEqual(["refused"]);
  });

  test("stop() ends renewing without reporting a loss", async () => {
    const time = new ManualTime();
    const { k, renewals, lost } = keeper(time);
    k.start(1000);
    k.stop();
    await time.advanceTo(60_000);
    expect(renewals).toEqual([]);
    expect(lost).toEqual([]);
    expect(k.holding()).toBe(false);
  });

  test("refuses a lease that would not outlast one interval plus the margin", () => {
    const make = (leaseMs: number, renewEveryMs: number, safetyMs: number) => () =>
      new LeaseKeeper({ leaseMs, renewEveryMs, safetyMs, renew: async () => true, onLost: () => {} });
    expect(make(15_000, 5_000, 1_000)).not.toThrow();
    expect(make(6_000, 5_000, 1_000)).toThrow(RangeError);
    expect(make(15_000, 0, 1_000)).toThrow(RangeError);
  });
});
