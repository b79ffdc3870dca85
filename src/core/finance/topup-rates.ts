// How much budget a payment buys: one rate per currency, in millicents per minor unit
// (`--topup-rate EUR=1000`: one euro cent buys 1,000 mc, so 10.00 EUR buys 1,000,000 mc).
// Integers only, so a conversion never rounds; a product past 2^53 - 1 is refused, not wrapped.
import { isCurrencyCode } from "../money/currency.ts";

/** Currency (ISO 4217, upper case) -> millicents per minor unit. */
export type TopupRates = ReadonlyMap<string, number>;

/** A `--topup-rate` value the desk refuses at start-up; the message names the value. */
export class TopupRateError extends Error {
  override name = "TopupRateError";
}

const RATE_SHAPE = /^([A-Z]{3})=([1-9][0-9]{0,15})$/;

/**
 * Reads `CUR=N` entries (one per `--topup-rate` flag): CUR a current ISO 4217 code, N a positive
 * integer of at most 2^53 - 1 millicents per minor unit, each currency once.
 */
export function parseTopupRates(entries: readonly string[]): TopupRates {
  const rates = new Map<string, number>();
  for (const entry of entries) {
    const m = RATE_SHAPE.exec(entry);
    if (!m) throw new TopupRateError(`--topup-rate ${JSON.stringify(entry)} is not CUR=N (an ISO 4217 code, =, a positive integer)`);
    const [, currency, digits] = m as unknown as [string, string, string];
    if (!isCurrencyCode(currency)) throw new TopupRateError(`--topup-rate ${currency}: not an ISO 4217 code in current use`);
    const rate = Number(digits);
    if (!Number.isSafeInteger(rate)) throw new TopupRateError(`--topup-rate ${currency}: the rate is above 2^53 - 1`);
    if (rates.has(currency)) throw new TopupRateError(`--topup-rate ${currency} is given twice`);
    rates.set(currency, rate);
  }
  return rates;
}

/**
 * `minor` minor units of `currency` in millicents, or why not: the currency has no rate, or
 * the product is not a safe integer. Exact: computed in bigint, never in floating point.
 */
export function toMillicents(rates: TopupRates, currency: string, minor: number): { mc: number } | { problem: "NO_RATE" | "TOO_LARGE" } {
  const rate = rates.get(currency);
  if (rate === undefined) return { problem: "NO_RATE" };
  if (!Number.isSafeInteger(minor) || minor < 0) return { problem: "TOO_LARGE" };
  const mc = BigInt(minor) * BigInt(rate);
  return mc <= BigInt(Number.MAX_SAFE_INTEGER) ? { mc: Number(mc) } : { problem: "TOO_LARGE" };
}
