// The AlertOutbox contract: what the delivery loop relies on, for every implementation (the
// in-memory one of the tests, the SQLite ledger, the PostgreSQL ledger). Call it from a test file
// with a factory that makes an empty outbox and a way to write an alert as a charge would.
import { describe, expect, test } from "bun:test";
import type { AlertOutbox } from "../../src/core/finance/alert-outbox.ts";

export type OutboxUnderTest = {
  outbox: AlertOutbox;
  /** Writes a new alert, due at `atMs`, as the charge's transaction does. */
  add(id: string, body: string, atMs: number): Promise<void> | void;
  close?(): Promise<void> | void;
};

const T = 1_795_000_000_000;
const LEASE = 20_000;

export function describeAlertOutboxContract(name: string, make: () => Promise<OutboxUnderTest> | OutboxUnderTest): void {
  describe(`AlertOutbox contract: ${name}`, () => {
    async function withOutbox(run: (o: OutboxUnderTest) => Promise<void>): Promise<void> {
      const o = await make();
      try {
        await run(o);
      } finally {
        await o.close?.();
      }
    }

    test("a new alert is due at once and comes back with its body and no attempts", () =>
      withOutbox(async (o) => {
        await o.add("alrt_a", '{"n":1}', T);
        expect(await o.outbox.claimDue(T - 1, 10, T + LEASE)).toEqual([]);
        expect(await o.outbox.claimDue(T, 10, T + LEASE)).toEqual([{ id: "alrt_a", body: '{"n":1}', attempts: 0 }]);
      }));

    test("a claim leases: no second claim returns the alert before the lease ends, one after it does", () =>
      withOutbox(async (o) => {
        await o.add("alrt_a", "{}", T);
        expect(await o.outbox.claimDue(T, 10, T + LEASE)).toHaveLength(1);
        expect(await o.outbox.claimDue(T + LEASE - 1, 10, T + 2 * LEASE)).toEqual([]);
        expect(await o.outbox.claimDue(T + LEASE, 10, T + 2 * LEASE)).toEqual([{ id: "alrt_a", body: "{}", attempts: 0 }]);
      }));

    test("concurrent claims never return the same alert twice", () =>
      withOutbox(async (o) => {
        for (let i = 0; i < 20; i++) await o.add(`alrt_${String(i).padStart(2, "0")}`, "{}", T);
        const claims = await Promise.all(Array.from({ length: 8 }, () => o.outbox.claimDue(T, 5, T + LEASE)));
        const ids = claims.flat().map((a) => a.id);
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids).toHaveLength(20);
      }));

    test("oldest first, at most `limit`", () =>
      withOutbox(async (o) => {
        await o.add("alrt_b", "{}", T + 1);
        await o.add("alrt_a", "{}", T);
        await o.add("alrt_c", "{}", T + 2);
        expect((await o.outbox.claimDue(T + 10, 2, T + LEASE)).map((a) => a.id)).toEqual(["alrt_a", "alrt_b"]);
        expect((await o.outbox.claimDue(T + 10, 2, T + LEASE)).map((a) => a.id)).toEqual(["alrt_c"]);
      }));

    test("delivered: never claimed again", () =>
      withOutbox(async (o) => {
        await o.add("alrt_a", "{}", T);
        await o.outbox.claimDue(T, 10, T + LEASE);
        await o.outbox.markDelivered("alrt_a", T + 5);
        expect(await o.outbox.claimDue(T + 10 * LEASE, 10, T + 11 * LEASE)).toEqual([]);
      }));

    test("a failed attempt counts, and the alert is due again at its next attempt, not before", () =>
      withOutbox(async (o) => {
        await o.add("alrt_a", "{}", T);
        await o.outbox.claimDue(T, 10, T + LEASE);
        await o.outbox.markAttempt("alrt_a", T + 5, T + 60_000, "HTTP 500");
        expect(await o.outbox.claimDue(T + 59_999, 10, T + 80_000)).toEqual([]);
        expect(await o.outbox.claimDue(T + 60_000, 10, T + 80_000)).toEqual([{ id: "alrt_a", body: "{}", attempts: 1 }]);
      }));

    test("given up (next attempt null): never claimed again", () =>
      withOutbox(async (o) => {
        await o.add("alrt_a", "{}", T);
        await o.outbox.claimDue(T, 10, T + LEASE);
        await o.outbox.markAttempt("alrt_a", T + 5, null, "HTTP 410");
        expect(await o.outbox.claimDue(T + 1e12, 10, T + 2e12)).toEqual([]);
      }));
  });
}
