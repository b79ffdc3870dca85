// Amounts as a person reads them: exactly the currency's minor-unit decimals, by string
// arithmetic only. Floats never touch an amount (0.1 + 0.2 is not 0.3, and a recap that rounds
// is a recap that lies).
import { minorUnits } from "./currency.ts";

// A plain decimal: no sign, no exponent, no leading zeros, no separators. The field rules check
// this first; the formatter checks again so a bad value can never reach a person's screen.
const PLAIN_DECIMAL = /^(?:0|[1-9][0-9]*)(?:\.([0-9]+))?$/;

/** `formatAmount("19", "EUR") === "19.00"`, `formatAmount("1500", "JPY") === "1500"`. Throws on anything else. */
export function formatAmount(amount: string, currency: string): string {
  const decimals = minorUnits(currency);
  const m = PLAIN_DECIMAL.exec(amount);
  if (m === null) throw new RangeError("amount is not a plain decimal");
  const fraction = m[1] ?? "";
  // More decimals than the currency has would have to be rounded: refuse instead.
  if (fraction.length > decimals) throw new RangeError("amount has more decimals than its currency");
  if (decimals === 0) return amount;
  const whole = fraction === "" ? amount : amount.slice(0, amount.length - fraction.length - 1);
  return `${whole}.${fraction.padEnd(decimals, "0")}`;
}
