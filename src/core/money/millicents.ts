// Millicents as a person reads them (1 cent = 1,000 mc): the exact figure, grouped, and the
// same in cents beside it, in ASCII, as the desk's tool descriptions write it. Integer
// arithmetic only: a price is never rounded on screen.

/** The largest price a spend ask may carry: 10^10 mc (ten million cents), far above any one call. */
export const MAX_PRICE_MC = 10_000_000_000;

const grouped = (n: number): string => String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ",");

function checked(mc: number): number {
  if (!Number.isSafeInteger(mc) || mc < 0) throw new RangeError("millicents must be a safe integer >= 0");
  return mc;
}

/** `1,500 mc`. */
export function formatMc(mc: number): string {
  return `${grouped(checked(mc))} mc`;
}

/** `1.5 cents`, `1 cent`, `12,000.25 cents`: exact, up to three decimals, trailing zeros dropped. */
export function formatCents(mc: number): string {
  const n = checked(mc);
  const whole = grouped(Math.floor(n / 1000));
  const fraction = String(n % 1000).padStart(3, "0").replace(/0+$/, "");
  const cents = fraction === "" ? whole : `${whole}.${fraction}`;
  return `${cents} ${cents === "1" ? "cent" : "cents"}`;
}

/** `1,500 mc (1.5 cents)`. */
export const formatPrice = (mc: number): string => `${formatMc(mc)} (${formatCents(mc)})`;
