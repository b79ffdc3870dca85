// Card-number net: checks per second (median of 5 rounds) on a typical 100-character string, a
// 500-character reason, a 100-character non-ASCII string, CJK/Hangul/Ethiopic text and machine
// text (a UUID and an ISO 8601 time), next to a baseline measured in the same run (a plain regex
// scan for 13-19 ASCII digits with optional separators, no Luhn), whole pay asks validated per
// second, and the time the first check takes (it expands the generated character table).
// Usage: bun scripts/bench/card-net.ts [--ms N]   (N: milliseconds per round, default 300)
const loadStart = Bun.nanoseconds();
const { containsCardNumber } = await import("../../src/core/money/card-net.ts");
containsCardNumber("x");
const firstCheckMs = (Bun.nanoseconds() - loadStart) / 1e6;
import { validatePayAsk } from "../../src/core/schema/ask.ts";

const msPerRound = Number(process.argv[process.argv.indexOf("--ms") + 1]) || 300;
const ROUNDS = 5;

const typical = "Renew example.org for 2 years at Example Shop, order 2024-113, 19.00 EUR; ref ab12-cd34, thanks!!!!!";
const reason = `${"Please renew the domain example.org for two more years before it lapses on 2027-01-15; ".repeat(6)}ok`.slice(0, 500);
const nonAscii = "Bitte die Domain für 2 Jahre verlängern: Bestellung ٢٠٢٤-١١٣, ＥＵＲ １９.００ — danke schön, 谢谢, Ωμέγα!".padEnd(100, "é");
const scripts = "ご注文#0907955は2026年12月31日に発送しました。주문 ORD-2026-59339은 12월 31일에 발송. ትዕዛዝ ፩፪ በ2026 ተልኳል።";
const machine = '{"request":"550e8400-e29b-41d4-a716-446655440000","expires_at":"2026-12-08T23:22:20.124Z","n":42}';
const ask = {
  approval_id: "K7Q2M4XZ3A",
  merchant: "Example Shop",
  amount: "19.00",
  currency: "EUR",
  card_handle: "card-2",
  checkout_url: "https://shop.example/checkout/123?item=42",
  reason: typical,
};

const baselineRegex = /[0-9](?:[ .-]?[0-9]){12,18}/;
let sink = 0;

function perSecond(fn: () => boolean): number {
  const rates: number[] = [];
  for (let round = 0; round <= ROUNDS; round++) {
    let n = 0;
    const start = Bun.nanoseconds();
    const end = start + msPerRound * 1e6;
    let now = start;
    while (now < end) {
      for (let i = 0; i < 1000; i++) if (fn()) sink++;
      n += 1000;
      now = Bun.nanoseconds();
    }
    if (round > 0) rates.push(n / ((now - start) / 1e9)); // round 0 warms the JIT
  }
  rates.sort((a, b) => a - b);
  return rates[Math.floor(rates.length / 2)]!;
}

const fmt = (r: number) => `${Math.round(r).toLocaleString("en-US").padStart(11)}/s`;

console.log(`rounds: ${ROUNDS} x ${msPerRound} ms (median); first check (load + table): ${firstCheckMs.toFixed(1)} ms`);
for (const [name, text] of [
  [`typical (${typical.length} chars)`, typical],
  [`reason (${reason.length} chars)`, reason],
  [`non-ASCII (${nonAscii.length} chars)`, nonAscii],
  [`CJK/Hangul/Ethiopic (${scripts.length})`, scripts],
  [`machine (${machine.length} chars)`, machine],
] as const) {
  if (containsCardNumber(text)) throw new Error(`the sample "${name}" trips the net`);
  const net = perSecond(() => containsCardNumber(text));
  const base = perSecond(() => baselineRegex.test(text));
  console.log(`${name.padEnd(24)} net ${fmt(net)}   regex baseline ${fmt(base)}   net/baseline ${(net / base).toFixed(2)}`);
}
const asks = perSecond(() => validatePayAsk(ask).ok);
console.log(`${"whole pay ask".padEnd(24)} validated ${fmt(asks)}`);
if (sink < 0) console.log(sink);
