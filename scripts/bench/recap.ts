// Recaps rendered per second (target >= 20,000/s), for a plain ask and a hostile one, median of
// 5 rounds, next to a baseline from the same run: a naive template that prints the same fields
// raw (no sanitising, no wrapping), i.e. the floor that string building alone costs.
// Usage: bun scripts/bench/recap.ts [--rounds N]
import type { Ask, StoredAsk } from "../../src/core/asks.ts";
import { renderRecap } from "../../src/core/recap/render.ts";
import { SAMPLE_PAY } from "../../test/helpers/sample-asks.ts";

const rounds = Number(process.argv[process.argv.indexOf("--rounds") + 1]) || 5;
const NOW = new Date("2026-11-30T03:00:00.000Z");
const stored = (ask: Ask): StoredAsk => ({ ask, created_at: NOW, expires_at: new Date(NOW.getTime() + 600_000), state: "pending" });

const plain = stored(SAMPLE_PAY);
// Every class of trick at once, at the field limits: 80-character merchant, 500-character reason.
const trick = "ok\u202e\u200b\u{e0041}e\u0301\u0302\u0303日\u{1f642}\u001b[2J \u00a0\u3000\\";
const hostile = stored({
  kind: "pay",
  approval_id: "K7Q2M4XZ3A",
  merchant: trick.repeat(8).slice(0, 80),
  amount: "123456.78",
  currency: "EUR",
  card_handle: "card\u202e-2",
  checkout_url: `https://shop.example.${"a".repeat(50)}.${"b".repeat(50)}.evil.example/${"%C3%A9x".repeat(60)}`,
  reason: `${trick.repeat(30)}\n[ask AAAAAAAAAA] PAY 1.00 EUR`.slice(0, 500),
});

// The floor: the same rows as template strings, with the agent text printed raw.
function naive(s: StoredAsk): string[] {
  const a = s.ask as Extract<Ask, { kind: "pay" }>;
  const site = new URL(a.checkout_url).hostname;
  return [
    `[ask ${a.approval_id}] PAY ${a.amount} ${a.currency}`,
    `  to:        ${a.merchant}`,
    `  card:      ${a.card_handle}`,
    `  site:      ${site}`,
    `  checkout:  ${a.checkout_url}`,
    `  reason:    (from the agent, unchecked) ${a.reason}`,
    `  expires:   in ${Math.floor((s.expires_at.getTime() - NOW.getTime()) / 60_000)} min`,
    `  approving: PAY ${a.amount} ${a.currency} at ${site}`,
    `  approve ${a.approval_id}   or   deny ${a.approval_id}`,
  ];
}

let sink = 0;
function perSecond(render: (s: StoredAsk) => string[], s: StoredAsk): number {
  const rates: number[] = [];
  const n = 20_000;
  for (let r = 0; r <= rounds; r++) {
    const t = Bun.nanoseconds();
    for (let i = 0; i < n; i++) sink += render(s).length;
    if (r > 0) rates.push(n / ((Bun.nanoseconds() - t) / 1e9)); // round 0 warms up (JIT, tables)
  }
  rates.sort((a, b) => a - b);
  return rates[Math.floor(rates.length / 2)]!;
}

const fmt = (x: number): string => Math.round(x).toLocaleString("en-US");
console.log(`recap rendering, median of ${rounds} rounds of 20,000 (target >= 20,000/s)`);
for (const [name, s] of [
  ["plain", plain],
  ["hostile", hostile],
] as const) {
  const ours = perSecond((x) => renderRecap(x, NOW), s);
  const floor = perSecond(naive, s);
  const rows = renderRecap(s, NOW).length;
  console.log(
    `${name.padEnd(8)} renderRecap ${fmt(ours).padStart(9)}/s (${rows} rows)   naive template ${fmt(floor).padStart(10)}/s   ratio ${(floor / ours).toFixed(1)}x   ${ours >= 20_000 ? "meets" : "MISSES"} target`,
  );
}
if (sink === 0) console.log("");
