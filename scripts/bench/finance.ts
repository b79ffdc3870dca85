// Finance pieces: (1) verifying a statement over an export of N receipts, next to the same
// export's signature and readable-copy checks alone (what `verify-receipt --jsonl` does per
// line, one at a time): the ratio is what recomputing every figure adds; (2) computing the
// statement on the desk's side, per receipt; (3) one Stripe webhook verified and read, next to
// the bare HMAC-SHA256 over the same bytes; (4) one alert's webhook headers (v1 + v1a), next to
// the Ed25519 signature alone. Each round measures every rate in turn; figures are medians.
// Usage: bun scripts/bench/finance.ts [--count N] [--runs R]
import { createHmac } from "node:crypto";
import { computeStatement, signStatement } from "../../src/core/finance/statement.ts";
import { verifyStatement } from "../../src/core/finance/statement-verify.ts";
import { signWebhook } from "../../src/core/finance/standard-webhooks.ts";
import { readStripeWebhook } from "../../src/core/finance/stripe-webhook.ts";
import { parseTopupRates } from "../../src/core/finance/topup-rates.ts";
import { generateSigningKey, jwksOf, loadSigner, openEnvelope, ReceiptKeys } from "../../src/core/receipt/index.ts";
import { exportLines, type HistoryEvent, orgHistory } from "../../test/helpers/org-history.ts";

const flag = (name: string, fallback: number) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? Number(process.argv[i + 1]) || fallback : fallback;
};
const count = flag("--count", 20000);
const runs = flag("--runs", 5);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const perSecond = (n: number, ms: number) => Math.round((n / ms) * 1000);
function timed(n: number, fn: (i: number) => void): number {
  const t = performance.now();
  for (let i = 0; i < n; i++) fn(i);
  return perSecond(n, performance.now() - t);
}

const generated = generateSigningKey();
const signer = loadSigner(generated.privatePem);
const keys = ReceiptKeys.fromJwks(jwksOf(signer.publicJwk()));
const ORG = "org_0123456789abcdef";
const KEYS = Array.from({ length: 10 }, (_, i) => `key_${String(i).padStart(16, "0")}`);
const events: HistoryEvent[] = [{ kind: "record", at: "2026-10-01T00:00:00.000Z", type: "budget_set", budget: 10_000_000_000 }];
const start = Date.parse("2026-10-15T00:00:00.000Z");
for (let i = 0; i < count; i++) {
  const at = new Date(start + Math.floor((i * 40 * 86_400_000) / count)).toISOString();
  events.push({
    kind: "receipt",
    key: KEYS[i % KEYS.length]!,
    at,
    outcome: i % 9 === 0 ? "refunded_timeout" : "charged",
    tool: `t${i % 5}`,
    price: 1500,
    upstream: 600,
  });
  if (i % 2000 === 0) events.push({ kind: "record", at, type: "topup", amount: 1_000_000 });
}
const history = orgHistory(signer, ORG, "none", {}, events);
const lines = exportLines(history.envelopes);
const input = { id: "stmt_bench", org_id: ORG, period: "2026-11", issued_at: "2026-12-02T00:00:00.000Z", records: history.records, receipts: history.receipts };
const statement = signStatement(signer, computeStatement(input));
if (!verifyStatement(statement, keys, lines).ok) throw new Error("the bench statement does not verify");

const secret = "whsec_bench_0123456789abcdefghijklmnop";
const rates = parseTopupRates(["EUR=1000"]);
const nowS = Math.floor(Date.now() / 1000);
const body = new TextEncoder().encode(
  JSON.stringify({
    id: "evt_1QxYzAbCdEfGhIjK",
    object: "event",
    type: "checkout.session.completed",
    livemode: false,
    data: {
      object: {
        id: "cs_test_a1B2c3D4",
        object: "checkout.session",
        amount_total: 2000,
        currency: "eur",
        livemode: false,
        metadata: { org_id: ORG },
        payment_status: "paid",
      },
    },
  }),
);
const header = `t=${nowS},v1=${createHmac("sha256", secret).update(`${nowS}.`).update(body).digest("hex")}`;
const webhookSecret = new Uint8Array(32).fill(7);
const alertBody = '{"data":{"alert_id":"alrt_0123456789abcdef","v":1},"timestamp":"2026-11-30T09:15:02.417Z","type":"budget.threshold_crossed"}';

const rows: Record<string, number[]> = { verify: [], opens: [], compute: [], stripe: [], hmac: [], headers: [], ed25519: [] };
const measures: [keyof typeof rows, () => number][] = [
  [
    "verify",
    () => {
      const t = performance.now();
      verifyStatement(statement, keys, lines);
      return perSecond(count, performance.now() - t);
    },
  ],
  [
    "opens",
    () => {
      const t = performance.now();
      for (const line of lines) openEnvelope(line, keys);
      return perSecond(count, performance.now() - t);
    },
  ],
  [
    "compute",
    () => {
      const t = performance.now();
      computeStatement(input);
      return perSecond(count, performance.now() - t);
    },
  ],
  ["stripe", () => timed(20000, () => readStripeWebhook(header, body, { secret, rates }, nowS * 1000))],
  ["hmac", () => timed(20000, () => createHmac("sha256", secret).update(`${nowS}.`).update(body).digest())],
  ["headers", () => timed(5000, (i) => signWebhook({ id: "alrt_0123456789abcdef", timestampS: nowS + i, body: alertBody }, webhookSecret, signer))],
  ["ed25519", () => timed(5000, (i) => signer.signBytes(Buffer.from(`alrt_0123456789abcdef.${nowS + i}.${alertBody}`)))],
];
// One warm-up round (JIT, caches), then rounds in alternating order so drift hits both sides of each ratio.
for (const [, run] of measures) run();
for (let r = 0; r < runs; r++) {
  const order = r % 2 === 0 ? measures : [...measures].reverse();
  for (const [name, run] of order) rows[name]!.push(run());
}

const m = Object.fromEntries(Object.entries(rows).map(([k, v]) => [k, median(v)])) as Record<
  "verify" | "opens" | "compute" | "stripe" | "hmac" | "headers" | "ed25519",
  number
>;
console.log(`statement over ${count} receipts of ${KEYS.length} keys, median of ${runs} runs`);
console.log(`  verifyStatement (signatures + chains + every figure): ${m.verify.toLocaleString()} receipts/s`);
console.log(
  `  baseline, openEnvelope per line (signature + readable copy): ${m.opens.toLocaleString()} receipts/s  -> ratio ${(m.verify / m.opens).toFixed(2)}`,
);
console.log(`  computeStatement on the desk's side: ${m.compute.toLocaleString()} receipts/s`);
console.log(
  `stripe webhook verified and read: ${m.stripe.toLocaleString()}/s; bare HMAC-SHA256 of the same bytes: ${m.hmac.toLocaleString()}/s -> ratio ${(m.stripe / m.hmac).toFixed(2)}`,
);
console.log(
  `alert headers (v1 + v1a): ${m.headers.toLocaleString()}/s; bare Ed25519 signature: ${m.ed25519.toLocaleString()}/s -> ratio ${(m.headers / m.ed25519).toFixed(2)}`,
);
