// Amounts as a person reads them: exactly the currency's minor-unit decimals, by string
// arithmetic only. Floats never touch an amount (0.1 + 0.2 is not 0.3, and a recap that rounds
// is a recap that lies).
import { isPlainDecimal } from "./amount.ts";
import { minorUnits } from "./currency.ts";

/** `formatAmount("19", "EUR") === "19.00"`, `formatAmount("1500", "JPY") === "1500"`. Throws on anything else. */
export function formatAmount(amount: string, currency: string): string {
  const decimals = minorUnits(currency);
  // The field rules check this first; checked again so a bad value never reaches a screen.
  if (!isPlainDecimal(amount)) throw new RangeError("amount is not a plain decimal");
  const dot = amount.indexOf(".");
  const fraction = dot === -1 ? "" : amount.slice(dot + 1);
  // More decimals than the currency has would have to be rounded: refuse instead.
  if (fraction.length > decimals) throw new RangeError("amount has more decimals than its currency");
  if (decimals === 0) return amount;
  const whole = dot === -1 ? amount : amount.slice(0, dot);
  return `${whole}.${fraction.padEnd(decimals, "0")}`;
}
