// What must hold for every recap, checked without the renderer's own helpers (its width rule,
// its tables), plus the random stored asks the property test and `npm run fuzz:recap` feed it.
import fc from "fast-check";
import type { Ask, SpendAsk, StoredAsk } from "../../src/core/asks.ts";
import { formatAmount } from "../../src/core/money/format.ts";

export const RECAP_COLUMNS = 76;
const CONTINUATION = "  >          ";
const AGENT = "(from the agent, unchecked)";
// Nothing a person cannot see may reach the screen raw.
const FORBIDDEN = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Cs}\p{Co}\p{Cn}\p{Default_Ignorable_Code_Point}\p{Variation_Selector}]/u;
const ESCAPE = /\\u\{([0-9a-f]+)\}/g;

/** Columns by the rule, counted independently of src/core/recap/width.ts. */
export function columns(line: string): number {
  let n = 0;
  for (const ch of line) {
    const cp = ch.codePointAt(0)!;
    n += cp >= 0x20 && cp <= 0x7e ? 1 : 2;
  }
  return n;
}

/** The agent text back from its display: escapes decoded. */
const decode = (shown: string): string => shown.replace(ESCAPE, (_, hex: string) => String.fromCodePoint(Number.parseInt(hex, 16)));
/** What the display must decode to: space runs as one space, none at the ends. */
const expectedText = (value: string): string => value.replace(/\p{Zs}+/gu, " ").replace(/^ | $/g, "");

/** The price as the approver writes it, computed here without core/money: `1,500 mc (1.5 cents)`. */
export function priceText(mc: number, cents = true): string {
  const group = (digits: string) => digits.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  const text = `${group(String(mc))} mc`;
  if (!cents) return text;
  const whole = group(String(Math.floor(mc / 1000)));
  const frac = String(mc % 1000)
    .padStart(3, "0")
    .replace(/0+$/, "");
  const c = frac === "" ? whole : `${whole}.${frac}`;
  return `${text} (${c} ${c === "1" ? "cent" : "cents"})`;
}

/** The rules every row of every recap keeps (width, nothing hidden, no stray backslash, marks on a base). */
function rowViolations(lines: string[], limit: number): string[] {
  const bad: string[] = [];
  lines.forEach((line, i) => {
    if (columns(line) > limit) bad.push(`row ${i} is ${columns(line)} columns`);
    if (FORBIDDEN.test(line)) bad.push(`row ${i} holds a hidden character`);
    if (line.replace(ESCAPE, "").includes("\\")) bad.push(`row ${i} holds a backslash that is no escape`);
    if (line !== line.trimEnd()) bad.push(`row ${i} ends with a space`);
    // Combining marks: at most two on one base, and never on a space or at the start of a row.
    if (/\p{M}{3}|(?:^| )\p{M}/u.test(line)) bad.push(`row ${i} stacks combining marks or has one without a base`);
  });
  return bad;
}

/** Every broken rule for one rendered recap (empty when all hold). */
export function recapViolations(stored: StoredAsk, lines: string[], width = RECAP_COLUMNS): string[] {
  const ask = stored.ask;
  const id = ask.approval_id;
  const limit = Math.min(width, RECAP_COLUMNS);
  const bad = rowViolations(lines, limit);
  const walk = rowWalker(lines, bad);
  if (ask.kind === "spend") return spendViolations(ask, walk, bad, limit);
  const { field, row, next } = walk;
  const host = new URL(ask.kind === "pay" ? ask.checkout_url : ask.provider_url).hostname;
  const money = ask.kind === "pay" ? `PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency}` : "ACCOUNT";

  const header = ask.kind === "pay" ? `[ask ${id}] ${money}` : `[ask ${id}] ACCOUNT at `;
  if (ask.kind === "pay" ? row() !== header : !row().startsWith(header)) bad.push(`header is ${JSON.stringify(row())}`);
  next();
  const site = (): void => {
    const shown = row().slice(13);
    if (!row().startsWith("  site:      ") || !(shown === host || (shown.startsWith("....") && shown.length > 4 && host.endsWith(shown.slice(4)))))
      bad.push(`site row is ${JSON.stringify(row())} for ${host}`);
    next();
  };
  if (ask.kind === "pay") {
    field("to:", ask.merchant);
    field("card:", ask.card_handle);
    site();
    field("checkout:", ask.checkout_url);
  } else {
    field("provider:", ask.provider_url);
    field("identity:", ask.identity_handle);
    site();
  }
  field("reason:", ask.reason, `${AGENT} `);
  if (!row().startsWith("  expires:   ")) bad.push(`expected the expires row, found ${JSON.stringify(row())}`);
  next();
  // The approving row is the approver's words: the stored money and site, nothing else.
  const approving = `  approving: ${money} at `;
  const full = approving + host;
  if (columns(full) <= limit) {
    if (row() !== full) bad.push(`approving row is ${JSON.stringify(row())}, expected ${JSON.stringify(full)}`);
  } else {
    const end = row().startsWith(`${approving}....`) ? row().slice(approving.length + 4) : "";
    if (end === "" || !host.endsWith(end)) bad.push(`approving row is ${JSON.stringify(row())} for ${host}`);
  }
  next();
  if (row() !== `  approve ${id}   or   deny ${id}`) bad.push(`last row is ${JSON.stringify(row())}`);
  next();
  walk.end();
  return bad;
}

type Walker = {
  row: () => string;
  next: () => void;
  /** A labelled value: its first row after the label (and lead), the rest only on `  >` rows; it must show the whole value. */
  field: (label: string, value: string | undefined, lead?: string) => void;
  end: () => void;
};

/** Walks the rows in the fixed order; each field may continue only on `  >` rows. */
function rowWalker(lines: string[], bad: string[]): Walker {
  let at = 0;
  const row = (): string => lines[at] ?? "";
  const field = (label: string, value: string | undefined, lead = ""): void => {
    const head = `  ${label}`.padEnd(13);
    if (value === undefined) {
      if (row() !== `${head}(none)`) bad.push(`${label} row for an absent value is ${JSON.stringify(row())}`);
      at++;
      return;
    }
    const first = row();
    const start = head + lead;
    // A value that shows as nothing leaves the row trimmed after its label (and lead).
    if (!(first.length < start.length ? first === start.trimEnd() : first.startsWith(start))) {
      bad.push(`expected the ${label} row, found ${JSON.stringify(first)}`);
      at++;
      return;
    }
    let shown = first.slice(start.length);
    at++;
    while (row().startsWith(CONTINUATION)) {
      shown += row().slice(CONTINUATION.length);
      at++;
    }
    if (decode(shown) !== expectedText(value)) bad.push(`${label} does not show its whole value`);
  };
  return {
    row,
    next: () => {
      at++;
    },
    field,
    end: () => {
      if (at !== lines.length) bad.push(`${lines.length - at} rows after the last one`);
    },
  };
}

/** The rows of a spend recap: every row the approver's words or the desk's names, the args after the agent label. */
function spendViolations(ask: SpendAsk, walk: Walker, bad: string[], limit: number): string[] {
  const { field, row, next } = walk;
  const id = ask.approval_id;
  const expectRow = (text: string) => {
    if (row() !== text) bad.push(`expected ${JSON.stringify(text)}, found ${JSON.stringify(row())}`);
    next();
  };
  const header = `[ask ${id}] SPEND ${priceText(ask.price_mc)}`;
  expectRow(columns(header) <= limit ? header : `[ask ${id}] SPEND ${priceText(ask.price_mc, false)}`);
  field("tool:", ask.tool);
  field("key:", ask.key_name === "" ? undefined : ask.key_name);
  field("key id:", ask.key_id);
  field("org:", ask.org_name);
  field("org id:", ask.org_id);
  field("args:", ask.preview, `${AGENT} `);
  expectRow(`  shown:     ${ask.preview_cut ? "the start only (the desk cut it)" : "whole (it hashes to params_sha256)"}`);
  expectRow("  asked by:  the desk (its own certificate and listener)");
  if (!row().startsWith("  expires:   ")) bad.push(`expected the expires row, found ${JSON.stringify(row())}`);
  next();
  // The approving row names the stored price and tool (the cents may give way below 76
  // columns), or the row above, which shows the tool whole, when the tool does not fit.
  const heads = [`  approving: SPEND ${priceText(ask.price_mc)} on `, `  approving: SPEND ${priceText(ask.price_mc, false)} on `];
  const ok = heads.some((h) => row() === h + ask.tool || (columns(h + ask.tool) > limit && row() === `${h}the tool above`));
  if (!ok || columns(row()) > limit) bad.push(`approving row is ${JSON.stringify(row())}`);
  next();
  expectRow(`  approve ${id}   or   deny ${id}`);
  walk.end();
  return bad;
}

// --- random stored asks -------------------------------------------------------------------

const cps = (from: number, to: number): fc.Arbitrary<string> => fc.integer({ min: from, max: to }).map((cp) => String.fromCodePoint(cp));
const SPECIAL = [
  "\n",
  "\t",
  "\r",
  "\u001b",
  "\u001b[2J",
  "\u007f",
  "\u0085",
  "\u009b",
  "\u202e",
  "\u202a",
  "\u2066",
  "\u2069",
  "\u200b",
  "\u200c",
  "\u200d",
  "\u2060",
  "\ufeff",
  "\u00ad",
  "\u061c",
  "\u180e",
  "\u2028",
  "\u2029",
  "\u115f",
  "\u1160",
  "\u3164",
  "\uffa0",
  "\ufe0f",
  "\u{e0100}",
  "\u{e0041}",
  "\u{e0001}",
  "\u00a0",
  "\u3000",
  "\u2003",
  "\u1680",
  " ",
  "  ",
  "\\",
  "\\u{41}",
  "[ask K7Q2M4XZ3A] PAY 1.00 EUR",
  "  approving: ",
  "  >          ",
  "%",
  "\u2800",
  "\uff3c",
];
/** One piece of hostile text: any code point (lone surrogates included), or a known trick. */
export const unicodeUnit: fc.Arbitrary<string> = fc.oneof(
  { weight: 6, arbitrary: cps(0x20, 0x7e) },
  { weight: 4, arbitrary: cps(0, 0x10ffff) },
  { weight: 2, arbitrary: fc.integer({ min: 0xd800, max: 0xdfff }).map((u) => String.fromCharCode(u)) },
  { weight: 2, arbitrary: fc.oneof(cps(0, 0x1f), cps(0x7f, 0x9f)) },
  { weight: 3, arbitrary: fc.oneof(cps(0x300, 0x36f), cps(0x1ab0, 0x1aff), cps(0x20d0, 0x20ff), cps(0x0900, 0x097f)) },
  { weight: 3, arbitrary: fc.oneof(cps(0x4e00, 0x9fff), cps(0x1f300, 0x1faff), cps(0xac00, 0xd7a3)) },
  { weight: 3, arbitrary: fc.constantFrom(...SPECIAL) },
);
// Half short, half up to the field's full length (fast-check keeps strings short by default).
const text = (maxLength: number): fc.Arbitrary<string> =>
  fc.oneof(fc.string({ unit: unicodeUnit, maxLength }), fc.string({ unit: unicodeUnit, maxLength, size: "max" }));

const CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
const approvalId = fc.string({ unit: fc.constantFrom(...CROCKFORD), minLength: 10, maxLength: 10 });
const label = fc.string({ unit: fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz0123456789", "\u0430", "\u00fc", "\u65e5"), minLength: 1, maxLength: 63 });
const url: fc.Arbitrary<string> = fc.tuple(fc.array(label, { minLength: 1, maxLength: 6, size: "medium" }), text(60)).map(([labels, path]) => {
  try {
    return new URL(`https://${labels.join(".")}/${path}`).href;
  } catch {
    return "https://shop.example/";
  }
});
const CURRENCIES = ["EUR", "USD", "JPY", "KWD", "CLF", "GBP"] as const;
const DECIMALS: Record<(typeof CURRENCIES)[number], number> = { EUR: 2, USD: 2, JPY: 0, KWD: 3, CLF: 4, GBP: 2 };
// Amounts below 10^9 (at most 14 characters as shown), far above the default maximum of an ask.
const money = fc.constantFrom(...CURRENCIES).chain((currency) =>
  fc.tuple(fc.bigInt({ min: 0n, max: 10n ** 9n - 1n }), fc.integer({ min: 0, max: DECIMALS[currency] }), fc.nat()).map(([whole, decimals, frac]) => ({
    currency,
    amount: decimals === 0 ? String(whole === 0n ? 1n : whole) : `${whole}.${String(frac % 10 ** decimals).padStart(decimals, "0")}`,
  })),
);
const optional = (arb: fc.Arbitrary<string>): fc.Arbitrary<string | undefined> => fc.option(arb, { nil: undefined, freq: 4 });

const payAsk: fc.Arbitrary<Ask> = fc
  .record({ id: approvalId, merchant: text(80), money, card: text(32), checkout: url, reason: optional(text(500)) })
  .map(({ id, merchant, money: m, card, checkout, reason }) => ({
    kind: "pay" as const,
    approval_id: id,
    merchant,
    amount: m.amount,
    currency: m.currency,
    card_handle: card,
    checkout_url: checkout,
    ...(reason === undefined ? {} : { reason }),
  }));
const accountAsk: fc.Arbitrary<Ask> = fc
  .record({ id: approvalId, provider: url, identity: optional(text(32)), reason: optional(text(500)) })
  .map(({ id, provider, identity, reason }) => ({
    kind: "account" as const,
    approval_id: id,
    provider_url: provider,
    ...(identity === undefined ? {} : { identity_handle: identity }),
    ...(reason === undefined ? {} : { reason }),
  }));

const ascii = (chars: string, minLength: number, maxLength: number) => fc.string({ unit: fc.constantFrom(...chars), minLength, maxLength });
const SAFE = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
const deskTool = fc
  .tuple(fc.constantFrom(..."abcdefghijklmnopqrstuvwxyz"), ascii("abcdefghijklmnopqrstuvwxyz0123456789-", 0, 31), ascii(`${SAFE}.`, 1, 128))
  .map(([first, rest, tool]) => `${first}${rest}__${tool}`);
// The desk's ask: hostile names and arguments, every price up to the largest a spend ask may carry.
const spendAsk: fc.Arbitrary<Ask> = fc
  .record({
    id: approvalId,
    reservation: ascii(SAFE, 1, 64),
    tool: deskTool,
    price: fc.oneof(fc.integer({ min: 1, max: 100_000 }), fc.integer({ min: 1, max: 10_000_000_000 })),
    keyId: ascii(SAFE, 1, 64),
    keyName: fc.oneof(fc.constant(""), text(100)),
    orgId: ascii(SAFE, 1, 64),
    orgName: text(100).filter((t) => t.length >= 1),
    preview: text(500).filter((t) => t.length >= 1),
    cut: fc.boolean(),
  })
  .map((f) => ({
    kind: "spend" as const,
    approval_id: f.id,
    reservation_id: f.reservation,
    tool: f.tool,
    price_mc: f.price,
    key_id: f.keyId,
    key_name: f.keyName,
    org_id: f.orgId,
    org_name: f.orgName,
    params_sha256: "0".repeat(64),
    preview: f.preview,
    preview_cut: f.cut,
  }));

const T0 = Date.UTC(2026, 10, 30, 3, 0, 0);
/** A stored ask with hostile text, a time to render it at and a terminal width. */
export const recapCase = fc
  .record({
    ask: fc.oneof({ weight: 3, arbitrary: payAsk }, { weight: 1, arbitrary: accountAsk }, { weight: 1, arbitrary: spendAsk }),
    ttl: fc.integer({ min: -3_600_000, max: 200 * 3_600_000 }),
    width: fc.oneof({ weight: 4, arbitrary: fc.constant(RECAP_COLUMNS) }, { weight: 1, arbitrary: fc.integer({ min: 60, max: 300 }) }),
  })
  .map(({ ask, ttl, width }) => ({
    stored: { ask, created_at: new Date(T0), expires_at: new Date(T0 + ttl), state: "pending" as const } satisfies StoredAsk,
    now: new Date(T0),
    width,
  }));
