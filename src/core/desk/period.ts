// Budget periods and hours, always in UTC, from an injected clock (milliseconds since the epoch).
// A period is a string that sorts in time order within one reset kind, so the ledger can refuse
// to move a key's period backwards when the clock steps back.

export type Reset = "none" | "daily" | "monthly";

export const RESETS: readonly Reset[] = ["none", "daily", "monthly"];

/** The period of a key with this reset at `nowMs`: "none", "2026-11-30" or "2026-11". */
export function periodOf(reset: Reset, nowMs: number): string {
  if (reset === "none") return "none";
  const iso = new Date(nowMs).toISOString();
  return reset === "daily" ? iso.slice(0, 10) : iso.slice(0, 7);
}

/** The first millisecond of the period at `nowMs` (0 for "none": every moment is in it). */
export function periodStart(reset: Reset, nowMs: number): number {
  const d = new Date(nowMs);
  if (reset === "daily") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
  if (reset === "monthly") return Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1);
  return 0;
}

/** The UTC hour at `nowMs`, e.g. "2026-11-30T02": the window of the failure counter. */
export function hourOf(nowMs: number): string {
  return new Date(nowMs).toISOString().slice(0, 13);
}

/** The first millisecond of the next UTC hour (when a 429 lifts). */
export function nextHourMs(nowMs: number): number {
  return Math.floor(nowMs / 3_600_000) * 3_600_000 + 3_600_000;
}
