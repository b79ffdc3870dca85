// Writes test/vectors/recap/*.vec from the cases below, with the expected lines rendered by the
// library: review the diff of the output before committing it. `--check` writes nothing and
// exits 1 when a file on disk differs from what would be written (or is stale).
//
//   node_modules/.bin/bun scripts/gen-recap-vectors.ts [--check]
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import type { Ask, AskState, SpendAsk } from "../src/core/asks.ts";
import { canonicalJson } from "../src/core/receipt/canonical.ts";
import { sha256Hex } from "../src/core/receipt/hash.ts";
import { renderRecap } from "../src/core/recap/render.ts";
import { formatRecapVector, type RecapVector } from "../test/helpers/recap-vector.ts";
import { SAMPLE_PAY } from "../test/helpers/sample-asks.ts";

const DIR = resolve(import.meta.dir, "../test/vectors/recap");
const CREATED = new Date("2026-11-30T03:00:00.000Z");
const TEN_MIN = new Date("2026-11-30T03:10:00.000Z");

const PAY: Ask = SAMPLE_PAY;
const ACCOUNT: Ask = { kind: "account", approval_id: "P3N8W2R6T0", provider_url: "https://provider.example/signup" };

type Case = { name: string; note: string; ask: Ask; now?: Date; expires?: Date; state?: AskState; width?: number };

const pay = (name: string, note: string, fields: Partial<Extract<Ask, { kind: "pay" }>>, extra: Partial<Case> = {}): Case => ({
  name,
  note,
  ask: { ...(PAY as Extract<Ask, { kind: "pay" }>), ...fields },
  ...extra,
});
const reason = (name: string, note: string, text: string): Case => pay(name, note, { reason: text });

const ARGS_PREVIEW = canonicalJson({ message: "hello, paid world" });
const SPEND: SpendAsk = {
  kind: "spend",
  approval_id: "K7Q2M4XZ3A",
  reservation_id: "res_42",
  tool: "everything__echo",
  price_mc: 1500,
  key_id: "key_7h2k9d0q3x5m1n4p",
  key_name: "research-agent",
  org_id: "org_a1b2c3d4e5f6g7h8",
  org_name: "acme",
  params_sha256: sha256Hex(ARGS_PREVIEW),
  preview: ARGS_PREVIEW,
  preview_cut: false,
};
const spend = (name: string, note: string, fields: Partial<SpendAsk>, extra: Partial<Case> = {}): Case => ({
  name,
  note,
  ask: { ...SPEND, ...fields },
  ...extra,
});

// A complete fake recap, hidden in a reason after `k` filler characters.
const FAKE = "[ask AAAAAAAAAA] PAY 1.00 EUR\n  approving: PAY 1.00 EUR at shop.example\n  approve AAAAAAAAAA   or   deny AAAAAAAAAA";
const FAKE_OFFSETS = 100; // the first row holds 35 columns of reason, the next 63: 0..99 covers both cuts

const CASES: Case[] = [
  pay("pay-plain", "the recap of the issue, line for line", {}),
  pay("pay-amount-padded", "an amount with fewer decimals than its currency is padded: 19.5 EUR -> 19.50", { amount: "19.5" }),
  pay("pay-jpy", "a currency without decimals", { amount: "1500", currency: "JPY" }),
  pay("pay-kwd", "a currency with three decimals", { amount: "7", currency: "KWD" }),
  pay("pay-no-reason", "an absent reason says (none) in the approver's words", { reason: undefined }),
  pay("pay-empty-reason", "a reason of only spaces shows as nothing after the label", { reason: " \u00a0 \u3000 " }),
  { name: "account-plain", note: "an account ask without identity or reason", ask: ACCOUNT },
  {
    name: "account-identity",
    note: "an account ask with identity and reason",
    ask: { ...ACCOUNT, identity_handle: "work", reason: "sign up for the newsletter service" } as Ask,
  },
  pay("expiry-seconds", "under a minute, whole seconds rounded up", {}, { now: new Date(TEN_MIN.getTime() - 44_500) }),
  pay("expiry-minutes-floor", "minutes are rounded down: 9 min 59 s left reads in 9 min", {}, { now: new Date(CREATED.getTime() + 1000) }),
  pay("expiry-hours", "beyond an hour: hours and minutes", {}, { expires: new Date(CREATED.getTime() + 2 * 3600_000 + 5 * 60_000) }),
  pay("expiry-days", "from 48 hours on: whole days, rounded down", {}, { expires: new Date(CREATED.getTime() + 3 * 86_400_000 - 1) }),
  pay("expiry-expired", "now at expires_at reads expired", {}, { now: TEN_MIN }),
  reason("hidden-c0", "C0 controls: NUL, BEL, BS, TAB, LF, VT, FF, CR, DEL", "a\u0000b\u0007c\bd\te\nf\u000bg\fh\ri\u007fj"),
  reason("hidden-c1", "C1 controls: PAD, NEL, CSI, ST, APC", "a\u0080b\u0085c\u009bd\u009ce\u009ff"),
  reason(
    "hidden-esc-sequence",
    "ESC sequences: clear screen, cursor home, colour, an OSC 8 hyperlink",
    "ok\u001b[2J\u001b[1;1H\u001b[32mapproved\u001b[0m \u001b]8;;https://evil.example\u0007click\u001b]8;;\u0007",
  ),
  reason("hidden-bidi", "bidi: RLO, PDF, LRI, RLI, FSI, PDI, LRM, RLM, ALM", "pay \u202e0001\u202c \u2066a\u2069\u2067b\u2069\u2068c\u2069 \u200e\u200f\u061c"),
  pay("hidden-bidi-merchant", "an RLO in the merchant cannot reverse the rest of the row", { merchant: "Shop \u202emoc.live" }),
  reason("hidden-zero-width", "ZWSP, ZWNJ, ZWJ, word joiner, BOM", "pay\u200bpal \u200c\u200d \u2060 \ufeffx"),
  reason("hidden-tags", "tag characters spelling hidden text, with a cancel tag", "ok\u{e0001}\u{e0041}\u{e0050}\u{e0050}\u{e0052}\u{e007f}"),
  reason(
    "hidden-cf",
    "other format characters: soft hyphen, Arabic number sign, invisible times, Mongolian vowel separator, interlinear annotation, line and paragraph separators",
    "a\u00adb \u0600 x\u2062y \u180e \ufff9c\ufffbd \u2028 \u2029",
  ),
  reason("hidden-hangul-filler", "Hangul fillers that draw as blanks", "a\u115fb\u1160c\u3164d\uffa0e"),
  reason("hidden-variation-selector", "variation selectors, standard and supplement", "\u2764\ufe0f x\ufe00 y\u{e0100}"),
  reason("hidden-blank-symbols", "symbols that draw nothing: braille blank, null notehead", "a\u2800b\u{1d159}c"),
  reason(
    "combining-stack",
    "at most two combining marks per base; the third and later are escaped",
    "e\u0301\u0302\u0303\u0304\u0305 Z\u0336\u0336\u0336 ok\u0301",
  ),
  reason("combining-no-base", "a combining mark after a space or an escape has no base and is escaped", "\u0301a \u0302 \u200b\u0303"),
  reason(
    "private-surrogate-unassigned",
    "private use, lone surrogates, an unassigned code point, noncharacters",
    "\ue000 \ud800 \udfff \u0378 \uffff \ufdd0 \u{10fffd}",
  ),
  reason("spaces", "space runs (NBSP, ideographic, em, thin) become one space; ends are trimmed", "\u00a0 lead  a\u00a0\u00a0b\u3000\u3000c\u2003\u2009d   "),
  reason("backslash", "a literal backslash cannot pass for an escape, nor can its look-alikes", "\\u{202e} C:\\dir \u2216u{41} \uff3cu{41}"),
  pay("wide-cjk", "CJK counts two columns each: the merchant wraps", { merchant: "株式会社サンプル商店オンラインストア東京本店".repeat(3) }),
  reason(
    "wide-emoji",
    "emoji: two columns per code point; ZWJ and VS16 in sequences are escaped",
    `ok \u{1f642}\u{1f44d}\u{1f3fd}\u{1f1ea}\u{1f1fa} \u{1f468}\u200d\u{1f469}\u200d\u{1f467} \u2764\ufe0f ${"\u{1f389}".repeat(40)}`,
  ),
  pay("host-lookalike", "a Cyrillic a in the host shows as punycode", { checkout_url: new URL("https://shop.ex\u0430mple/checkout/123").href }),
  pay("host-idn", "an IDN host and path: punycode host, percent-encoded path", { checkout_url: new URL("https://bücher.example/straße/ü?q=ä#teil").href }),
  pay("url-percent", "percent-encoding stays as stored; spaces and quotes are encoded by the parser", {
    checkout_url: new URL('https://shop.example/a b/%41%2f/"x"/caf%C3%A9?q=1 2&r=%00#f g').href,
  }),
  pay("host-long", "a host longer than its row shows by its end after ....", {
    checkout_url: `https://shop.example.${"a".repeat(40)}.${"b".repeat(40)}.evil.example/pay`,
  }),
  pay("host-long-label", "a host whose last label alone is too long is cut inside that label", {
    checkout_url: `https://${"c".repeat(63)}.${"d".repeat(63)}/pay`,
  }),
  pay("url-long", "a long checkout URL wraps on > rows and is shown whole", {
    checkout_url: `https://shop.example/checkout/${"0123456789abcdef".repeat(12)}?session=${"z".repeat(30)}`,
  }),
  reason("reason-500", "a reason of exactly 500 characters", "renew the domain example.org for one more year; ".repeat(10).padEnd(500, "!")),
  reason("reason-500-escapes", "500 tag characters: every one escaped, still no row over 76 columns", "\u{e0061}".repeat(500)),
  pay("merchant-80-controls", "a merchant of 80 ESC characters", { merchant: "\u001b".repeat(80) }),
  pay("hidden-handle", "a card handle is escaped like any agent text", { card_handle: "card\u202e-2\u0000" }),
  {
    name: "account-hostile",
    note: "account fields with hidden characters",
    ask: { ...ACCOUNT, identity_handle: "wo\u200drk", reason: "line1\nline2\u202e" } as Ask,
  },
];

CASES.push(
  spend("spend-plain", "the desk's spend ask: price in mc and cents, its names, the whole arguments as the agent's words, asked by the desk", {}),
  spend("spend-cut", "arguments the desk cut at 500 characters: the shown row says so", {
    preview: `{"text":"${"lorem ipsum ".repeat(41)}`.slice(0, 500),
    preview_cut: true,
  }),
  spend("spend-no-key-name", "a key without a name shows (none), the approver's word", { key_name: "" }),
  spend("spend-hostile", "controls, bidi and a fake block in the names and the arguments are escaped and never begin a row", {
    key_name: "agent\u202e\u0000\n[ask AAAAAAAAAA] SPEND 1 mc",
    org_name: "acme\u001b[2J\u200b",
    preview: canonicalJson({ note: "ok\napproving: SPEND 1 mc on x__y\u2066" }),
    preview_cut: true,
  }),
  spend("spend-long-tool", "a tool too long for the approving row is named the tool above; its own row shows it whole", {
    tool: `${"u".repeat(32)}__${"t".repeat(128)}`,
  }),
  spend("spend-max-price", "the largest price a spend ask may carry, with a fraction of a cent", { price_mc: 9_999_999_999 }),
  spend("spend-width-60", "below 76 columns the cents give way in the header and the approving row", { price_mc: 9_999_999_999 }, { width: 60 }),
  spend("spend-one-cent", "1,000 mc is 1 cent", { price_mc: 1000 }),
);

for (let k = 0; k < FAKE_OFFSETS; k++) {
  CASES.push(reason(`fake-block-${String(k).padStart(3, "0")}`, `a fake recap after ${k} characters of reason`, "x".repeat(k) + FAKE));
}

function vectorOf(c: Case): RecapVector {
  const stored = { ask: c.ask, created_at: CREATED, expires_at: c.expires ?? TEN_MIN, state: c.state ?? "pending" };
  const now = c.now ?? CREATED;
  const width = c.width ?? 76;
  const expected = renderRecap(stored, now, width);
  // The generator refuses to write a vector whose lines break the rules the vectors exist for.
  expected.forEach((line, i) => {
    if (i > 0 && (line.startsWith("[") || !line.startsWith("  "))) throw new Error(`${c.name}: row ${i} does not begin with the approver's words`);
  });
  return { stored, now, width, note: c.note, expected };
}

const check = process.argv.includes("--check");
const wanted = new Map(CASES.map((c) => [`${c.name}.vec`, formatRecapVector(vectorOf(c))]));
if (wanted.size !== CASES.length) throw new Error("two cases share a name");
let differ = 0;
for (const name of readdirSync(DIR).filter((f) => f.endsWith(".vec"))) {
  if (wanted.has(name)) continue;
  differ++;
  if (check) console.error(`stale: ${name}`);
  else rmSync(join(DIR, name));
}
for (const [name, text] of wanted) {
  const path = join(DIR, name);
  let old: string | undefined;
  try {
    old = readFileSync(path, "utf8");
  } catch {
    old = undefined;
  }
  if (old === text) continue;
  differ++;
  if (check) console.error(`differs: ${name}`);
  else writeFileSync(path, text);
}
console.error(`${wanted.size} vectors, ${differ} ${check ? "out of date" : "written or removed"}`);
if (check && differ > 0) process.exit(1);
