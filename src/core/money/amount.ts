// Amounts travel as plain decimal strings ("19.00") and are compared digit by digit, never as
// floats: a float would round 0.1 + 0.2 and let an amount drift between what the person
// approves and what is passed on.

import type { ErrorCode } from "../errors.ts";
import { isCurrencyCode, minorUnits } from "./currency.ts";

/** The default maximum of one ask, in major units of its currency. */
export const DEFAULT_MAX_AMOUNT = "1000000";

// No sign, no exponent, no spaces, no leading zeros ("0.50" yes, "00.5" and "01" no), ASCII
// digits only (a different script could render as a different number), no bare "." ends.
const PLAIN_DECIMAL = /^(0|[1-9][0-9]*)(?:\.([0-9]+))?$/;

/** True for a plain decimal string by the grammar above (zero included). */
export function isPlainDecimal(text: unknown): text is string {
  return typeof text === "string" && PLAIN_DECIMAL.test(text);
}

/**
 * A maximum a person can configure: a positive plain decimal with at most 9 integer digits, so
 * the largest amount it admits still fits the recap's header and approving lines.
 */
export function isValidMaxAmount(text: unknown): text is string {
  return isPlainDecimal(text) && isPositive(text) && text.split(".")[0]!.length <= 9;
}

/** True when a plain decimal string is above zero. */
const isPositive = (text: string): boolean => /[1-9]/.test(text);

/** Compares two plain decimal strings exactly: -1, 0 or 1. */
export function compareDecimals(a: string, b: string): -1 | 0 | 1 {
  const [ai = "", af = ""] = a.split(".");
  const [bi = "", bf = ""] = b.split(".");
  // Integer parts carry no leading zeros, so a longer one is larger.
  if (ai.length !== bi.length) return ai.length < bi.length ? -1 : 1;
  if (ai !== bi) return ai < bi ? -1 : 1;
  const width = Math.max(af.length, bf.length);
  const ap = af.padEnd(width, "0");
  const bp = bf.padEnd(width, "0");
  if (ap === bp) return 0;
  return ap < bp ? -1 : 1;
}

/**
 * Checks an amount for a currency. Undefined when it is good; otherwise the code, in this order:
 * CURRENCY_INVALID (the currency is not a current ISO 4217 code), AMOUNT_INVALID (not a string,
 * not a plain decimal, more decimals than the currency has, or zero), AMOUNT_TOO_LARGE (above
 * `maxMajor`, in major units). Throws RangeError when `maxMajor` is not a positive plain decimal:
 * that is a configuration fault, to be caught at start-up (see isPlainDecimal).
 */
export function checkAmount(amount: unknown, currency: string, maxMajor: string = DEFAULT_MAX_AMOUNT): ErrorCode | undefined {
  if (!isPlainDecimal(maxMajor) || !isPositive(maxMajor)) throw new RangeError("the maximum amount is not a positive plain decimal");
  if (!isCurrencyCode(currency)) return "CURRENCY_INVALID";
  if (!isPlainDecimal(amount)) return "AMOUNT_INVALID";
  const decimals = amount.length - amount.indexOf(".") - 1;
  if (amount.includes(".") && decimals > minorUnits(currency)) return "AMOUNT_INVALID";
  if (!isPositive(amount)) return "AMOUNT_INVALID";
  if (compareDecimals(amount, maxMajor) > 0) return "AMOUNT_TOO_LARGE";
  return undefined;
}
