// Millicents as a person reads them (1 cent = 1,000 mc), for the desk's answers, the approver's
// spend recap and the operator console alike: the exact figure, grouped, and the same in cents or
// dollars beside it. Integer and string arithmetic only, as for amounts (format.ts): a price or
// a budget is never rounded on screen.

/** The largest price a spend ask may carry: 10^10 mc (ten million cents), far above any one call. */
export const MAX_PRICE_MC = 10_000_000_000;

/** `1,234,567`: digits grouped by thousands. */
export function groupThousands(value: number): string {
  const digits = String(Math.abs(value)).replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return value < 0 ? `-${digits}` : digits;
}

/** The exact decimal of `value / 10^places` for an integer value, grouped, trailing zeros dropped: `decimalOf(1234500, 3) === "1,234.5"`. */
function decimalOf(value: number, places: number): string {
  const digits = String(Math.abs(value)).padStart(places + 1, "0");
  const whole = groupThousands(Number(digits.slice(0, digits.length - places)));
  const fraction = digits.slice(digits.length - places).replace(/0+$/, "");
  return `${value < 0 ? "-" : ""}${whole}${fraction === "" ? "" : `.${fraction}`}`;
}

/** `12,500 mc` (a margin may be negative). */
export function mc(value: number): string {
  return `${groupThousands(value)} mc`;
}

/** Cents in millicents, exactly: `centsOf(1500) === "1.5"`, `centsOf(1234500) === "1,234.5"`. */
export function centsOf(value: number): string {
  return decimalOf(value, 3);
}

/** `12.5¢` below a dollar, `$1.25` from a dollar up (never rounded: up to 5 decimals). */
export function hint(value: number): string {
  if (Math.abs(value) < 100_000) return `${centsOf(value)}¢`;
  return `$${decimalOf(value, 5)}`;
}

/** A non-negative whole number of mc typed by the operator, or null. */
export function parseMc(text: string): number | null {
  const clean = text.replace(/[\s,_]/g, "");
  if (!/^\d{1,16}$/.test(clean)) return null;
  const n = Number(clean);
  return Number.isSafeInteger(n) ? n : null;
}

/** A price is a safe integer >= 0: anything else is refused rather than shown. */
function price(value: number): number {
  if (!Number.isSafeInteger(value) || value < 0) throw new RangeError("millicents must be a safe integer >= 0");
  return value;
}

/** `1,500 mc`, for a price. */
export function formatMc(value: number): string {
  return mc(price(value));
}

/** `1.5 cents`, `1 cent`, `12,000.25 cents`, for a price. */
export function formatCents(value: number): string {
  const cents = centsOf(price(value));
  return `${cents} ${cents === "1" ? "cent" : "cents"}`;
}

/** `1,500 mc (1.5 cents)`, for a price. */
export const formatPrice = (value: number): string => `${formatMc(value)} (${formatCents(value)})`;
