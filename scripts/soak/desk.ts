// `npm run soak:desk`: the compiled desk (`dist/ask-only desk`, its own process) in front of the
// fixture upstream (in this process), under a random mix of calls from many concurrent clients
// over many keys, while the desk is killed with SIGKILL at random moments and restarted on the
// same data directory.
// Usage: bun scripts/soak/desk.ts [--calls N] [--concurrency N] [--keys N] [--kills N] [--seed S]
//                                 [--upstream-timeout SECS]
//
// The mix: success (echo, add), upstream failure (HTTP 5xx, a body cut mid-way, a tool that
// reports a failure), timeout (a tool that hangs past --upstream-timeout), arguments refused by
// the upstream (JSON-RPC -32602 and an isError result), schema errors (ARGS_INVALID), a tool not
// on the key's allowlist, an unknown tool, and keys with small budgets (no-budget), over keys
// with no reset, a daily and a monthly one. A call whose answer a kill cut off is recorded as
// "no answer" and never retried (its outcome is unknown to the client, as to a real agent).
//
// Checked after the run (the desk stopped, started once more so start-up recovery runs, stopped):
//  - `ask-only desk check --data DIR` exits 0, and no reservation is left open;
//  - for every key and period, the ledger's spend equals the sum of the charged receipts in the
//    export, and that sum is within the key's budget;
//  - every receipt id a client ever received is in the export (GET /admin/receipts, per org),
//    byte for byte the envelope the client got, with a valid signature and readable copy; every
//    charged answer's result hashes to its receipt's result_sha256; each answer's status matches
//    its receipt; `ask-only verify-receipt --jsonl` accepts the whole export (signatures, chains);
//  - receipts no client saw are the abandoned refunds and at most one per call left unanswered.
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { sqlOf } from "../../src/adapters/sqlite/desk/connection.ts";
import { SqliteRecords } from "../../src/adapters/sqlite/desk/records.ts";
import { type Envelope, openEnvelope, ReceiptKeys, type ReceiptJwk, resultSha256 } from "../../src/core/receipt/index.ts";
import { startUpstreamFixture } from "../../test/fixtures/upstream-server.ts";
import { runBinary } from "../../test/helpers/binary.ts";
import { adminJson, callTool, type DeskProcess, startDeskProcess, tryStartDesk } from "../../test/helpers/desk-process.ts";
import { tempDir } from "../../test/helpers/tmp.ts";
import { seededRandom } from "../lib/seeded-random.ts";

export type DeskSoakOptions = {
  calls: number;
  concurrency: number;
  keys: number;
  kills: number;
  seed: number;
  /** The desk's --upstream-timeout in seconds (the hanging tool runs past it). */
  upstreamTimeoutSecs?: number;
  /** Weights that replace those of MIX (a short run raises the rare kinds so each shows). */
  weights?: Partial<Record<Kind, number>>;
  /** Progress lines; none by default. */
  log?: (line: string) => void;
};

export type DeskSoakSummary = {
  seed: number;
  calls: number;
  concurrency: number;
  keys: number;
  kills: number;
  restarts: number;
  /** Second desks started on the data directory under load, each refused. */
  secondDesks: number;
  /** Calls by what the client saw: the desk's x-clearing-outcome, or `no_answer`. */
  byOutcome: Record<string, number>;
  /** Calls by the kind of call sent, then what came back. */
  byKind: Record<string, Record<string, number>>;
  noAnswer: number;
  /** Why the unanswered calls failed, as the client's fetch named it. */
  noAnswerCauses: Record<string, number>;
  /** Receipts the clients received, each found in the export and verified. */
  receiptsChecked: number;
  /** Charged results whose hash was checked against their receipt. */
  resultsChecked: number;
  receiptsExported: number;
  /** refunded_abandoned receipts (reservations of calls a kill cut off, refunded at restart). */
  abandoned: number;
  /** Receipts other than abandoned refunds that no client received (answers cut by a kill). */
  unseenReceipts: number;
  /** Charged receipts no client received: paid answers a kill cut off after the commit. */
  unseenCharged: number;
  keyPeriodsChecked: number;
  /** Audit rows that carry a receipt, each matched to it (one per receipt). */
  auditRowsChecked: number;
  /** Latency of charged calls (ms): median and 99th percentile. */
  chargedMs: { p50: number; p99: number };
  /** How long a refunded_timeout answer took (ms), against the upstream timeout. */
  timeoutMs: { p50: number; max: number; limit: number };
  elapsedMs: number;
  callsPerSecond: number;
  failures: string[];
};

/** Tool prices (mc) as set through the operator API; upstream cost is a third of each. */
const PRICES: Record<string, number> = {
  fx__echo: 1_000,
  fx__add: 1_500,
  fx__fail_5xx: 800,
  fx__fail_transport: 800,
  fx__tool_error: 600,
  fx__hang: 900,
  fx__refuse: 700,
  fx__refuse_result: 700,
};
const TOOLS = Object.keys(PRICES);
/** Tools a key may be refused (not on its allowlist); echo always stays allowed. */
const FORBIDDABLE = TOOLS.filter((t) => t !== "fx__echo");
const RESETS = ["none", "daily", "monthly"] as const;
/** A timeout answer may come this much after the upstream timeout on a loaded machine. */
const TIMEOUT_SLACK_MS = 5_000;

type SoakKey = { id: string; secret: string; orgId: string; budgetMc: number; forbidden: string };

type Kind = "success" | "upstream_5xx" | "upstream_transport" | "tool_error" | "timeout" | "refused" | "schema" | "not_allowed" | "unknown_tool";

/** The mix, by weight (no-budget comes from the small budgets, 429 from keys that fail often). */
// Failures are kept near 12% so that most keys stay under the 20-failures-an-hour limit over
// ~100 calls each; the small-budget keys still run into 402 and then 429, as a retry loop would.
const MIX: [Kind, number][] = [
  ["success", 88],
  ["upstream_5xx", 1.5],
  ["upstream_transport", 1.5],
  ["tool_error", 1],
  ["timeout", 1.5],
  ["refused", 2],
  ["schema", 2],
  ["not_allowed", 2],
  ["unknown_tool", 0.5],
];

/** Picks a kind from a random number in [0, 1) by the weights of `mix`. */
function kindPicker(mix: [Kind, number][]): (r: number) => Kind {
  const total = mix.reduce((a, [, w]) => a + w, 0);
  return (r) => {
    let x = r * total;
    for (const [kind, w] of mix) {
      if (x < w) return kind;
      x -= w;
    }
    return "success";
  };
}

/** The tool and arguments of one call of `kind` on `key`. */
function callOf(kind: Kind, key: SoakKey, rnd: () => number): { tool: string; args: Record<string, unknown> } {
  const n = Math.floor(rnd() * 1_000_000);
  switch (kind) {
    case "success":
      return key.forbidden !== "fx__add" && rnd() < 0.4 ? { tool: "fx__add", args: { a: n, b: 7 } } : { tool: "fx__echo", args: { text: `soak ${n}` } };
    case "upstream_5xx":
      return { tool: key.forbidden === "fx__fail_5xx" ? "fx__fail_transport" : "fx__fail_5xx", args: {} };
    case "upstream_transport":
      return { tool: key.forbidden === "fx__fail_transport" ? "fx__fail_5xx" : "fx__fail_transport", args: {} };
    case "tool_error":
      return { tool: key.forbidden === "fx__tool_error" ? "fx__fail_5xx" : "fx__tool_error", args: {} };
    case "timeout":
      return key.forbidden === "fx__hang" ? { tool: "fx__echo", args: { text: "x" } } : { tool: "fx__hang", args: {} };
    case "refused": {
      const tool = rnd() < 0.5 ? "fx__refuse" : "fx__refuse_result";
      return { tool: tool === key.forbidden ? (tool === "fx__refuse" ? "fx__refuse_result" : "fx__refuse") : tool, args: { text: `no ${n}` } };
    }
    case "schema":
      return rnd() < 0.5 ? { tool: "fx__echo", args: { text: n } } : { tool: "fx__echo", args: { text: "x", extra: true } };
    case "not_allowed":
      return { tool: key.forbidden, args: key.forbidden === "fx__add" ? { a: 1, b: 2 } : key.forbidden.startsWith("fx__refuse") ? { text: "x" } : {} };
    case "unknown_tool":
      return { tool: "fx__no_such_tool", args: {} };
  }
}

/** What a client kept of one answered call. */
type Answer = {
  kind: Kind;
  key: number;
  status: number;
  outcome: string;
  error: string | null;
  headerReceiptId: string | null;
  /** x-clearing-price-mc and x-clearing-remaining-mc as sent. */
  headerPrice: string | null;
  headerRemaining: string | null;
  /** From sending the call to reading the whole answer. */
  ms: number;
  envelope: Envelope | null;
  result: unknown;
};

const HTTP_OF_OUTCOME: Record<string, number> = {
  charged: 200,
  refused_not_allowed: 403,
  refused_budget: 402,
  refused_org_budget: 402,
  refunded_upstream_error: 502,
  refunded_timeout: 504,
  refunded_args_refused: 400,
  refunded_abandoned: 504,
};

const bump = (m: Record<string, number>, k: string, by = 1) => {
  m[k] = (m[k] ?? 0) + by;
};

export async function run(options: DeskSoakOptions): Promise<DeskSoakSummary> {
  const log = options.log ?? (() => {});
  const rnd = seededRandom(options.seed);
  const pickKind = kindPicker(MIX.map(([kind, w]) => [kind, options.weights?.[kind] ?? w]));
  const timeoutSecs = options.upstreamTimeoutSecs ?? 2;
  const deskArgs = ["--upstream-timeout", String(timeoutSecs)];
  const failures: string[] = [];
  const fail = (line: string) => {
    if (failures.length < 200) failures.push(line);
  };
  await using tmp = tempDir("ask-only-desk-soak-");
  const data = join(tmp.path, "desk-data");
  await using fx = startUpstreamFixture();
  // Every desk started, so none outlives the run whatever fails.
  const started: DeskProcess[] = [];
  const startDesk = async () => {
    const d = await startDeskProcess(data, deskArgs);
    started.push(d);
    return d;
  };
  let desk: DeskProcess = await startDesk();
  const stderrOfPast: string[] = [];
  let restarts = 0;
  let kills = 0;
  let secondDesks = 0;
  try {
    // --- set-up through the operator API -------------------------------------------------------
    await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
    for (const [tool, price] of Object.entries(PRICES)) {
      await adminJson(desk, "PUT", `/admin/tools/${tool}`, { price_mc: price, upstream_cost_mc: Math.floor(price / 3) });
    }
    const orgs: string[] = [];
    for (let i = 0; i < 4; i++) orgs.push((await adminJson(desk, "POST", "/admin/orgs", { name: `soak-${i}` })).org_id as string);
    const keys: SoakKey[] = new Array(options.keys);
    const plans = Array.from({ length: options.keys }, (_, i) => {
      // A quarter of the keys have room for only 2–30 calls: they meet 402 and keep calling.
      const small = rnd() < 0.25;
      return {
        i,
        orgId: orgs[i % orgs.length]!,
        budgetMc: small ? 2_000 + Math.floor(rnd() * 28_000) : 1_000_000_000,
        reset: RESETS[Math.floor(rnd() * RESETS.length)]!,
        forbidden: FORBIDDABLE[Math.floor(rnd() * FORBIDDABLE.length)]!,
      };
    });
    let nextPlan = 0;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        for (;;) {
          const p = plans[nextPlan++];
          if (p === undefined) return;
          const k = await adminJson(desk, "POST", "/admin/keys", {
            org_id: p.orgId,
            budget_mc: p.budgetMc,
            reset: p.reset,
            allow: TOOLS.filter((t) => t !== p.forbidden),
          });
          keys[p.i] = { id: k.key_id as string, secret: k.secret as string, orgId: p.orgId, budgetMc: p.budgetMc, forbidden: p.forbidden };
        }
      }),
    );
    log(`set up ${options.keys} keys over ${orgs.length} orgs; ${options.calls} calls, ${options.concurrency} concurrent, ${options.kills} kills`);

    // --- the run -------------------------------------------------------------------------------
    const killAt = Array.from({ length: options.kills }, () => Math.floor((0.1 + 0.8 * rnd()) * options.calls)).sort((a, b) => a - b);
    const answers: Answer[] = [];
    const byOutcome: Record<string, number> = {};
    const byKind: Record<string, Record<string, number>> = {};
    const noAnswerCauses: Record<string, number> = {};
    let noAnswer = 0;
    let gate: Promise<void> = Promise.resolve();
    let sent = 0;
    let done = 0;
    let killing = false;

    const killAndRestart = async (delayMs: number) => {
      // A random moment while calls keep flowing (some in the upstream, some committing); only
      // then new calls wait for the restart.
      await new Promise((resolve) => setTimeout(resolve, delayMs));
      let open!: () => void;
      gate = new Promise<void>((resolve) => {
        open = resolve;
      });
      const code = await desk.kill();
      if (code === 0) fail(`the desk exited 0 on SIGKILL`);
      kills++;
      stderrOfPast.push(desk.stderr());
      log(`kill ${kills}: SIGKILL after ${done} answered calls`);
      desk = await startDesk();
      restarts++;
      open();
      // Under the same load, a second desk on the directory must refuse (it would refund the
      // calls in flight of this one as abandoned).
      const second = await tryStartDesk(data);
      secondDesks++;
      if (second.code !== 1 || !second.stderr.includes("another desk is running")) fail(`a second desk on the data directory: ${second.code} ${second.stderr}`);
    };
    // Hung calls are let go now and then (every 10 timeouts): the few the desk still waits for
    // become charged successes, the rest were already answered 504 and their late answers dropped.
    const releaser = setInterval(() => fx.release(), timeoutSecs * 10_000);
    const t0 = performance.now();
    const progressEvery = Math.max(1, Math.floor(options.calls / 10));
    let pendingKill: Promise<void> | null = null;
    try {
      await Promise.all(
        Array.from({ length: options.concurrency }, async () => {
          for (;;) {
            await gate;
            const n = sent++;
            if (n >= options.calls) return;
            // One kill at a time: a threshold passed during a restart fires after it.
            if (!killing && killAt.length > 0 && n >= killAt[0]!) {
              killAt.shift();
              killing = true;
              pendingKill = killAndRestart(Math.floor(rnd() * 50)).finally(() => {
                killing = false;
              });
            }
            const keyIndex = Math.floor(rnd() * keys.length);
            const key = keys[keyIndex]!;
            const kind = pickKind(rnd());
            const { tool, args } = callOf(kind, key, rnd);
            const url = desk.url;
            let answer: Answer | null = null;
            const callStart = performance.now();
            try {
              const r = await callTool(url, key.secret, tool, args);
              const text = await r.text();
              const body = JSON.parse(text) as { result?: unknown; receipt?: Envelope; error?: string };
              answer = {
                kind,
                key: keyIndex,
                status: r.status,
                outcome: r.headers.get("x-clearing-outcome") ?? "(none)",
                error: body.error ?? null,
                headerReceiptId: r.headers.get("x-clearing-receipt-id"),
                headerPrice: r.headers.get("x-clearing-price-mc"),
                headerRemaining: r.headers.get("x-clearing-remaining-mc"),
                envelope: body.receipt ?? null,
                result: body.result,
                ms: performance.now() - callStart,
              };
            } catch (err) {
              noAnswer++;
              bump(noAnswerCauses, (err as { code?: string }).code ?? (err instanceof Error ? err.name : "error"));
            }
            const seen = answer === null ? "no_answer" : answer.outcome;
            bump(byOutcome, seen);
            byKind[kind] ??= {};
            bump(byKind[kind]!, answer === null ? "no_answer" : `${answer.status} ${answer.outcome}`);
            if (answer !== null) answers.push(answer);
            done++;
            if (done % progressEvery === 0) log(`${done} calls answered or cut (${((done / (performance.now() - t0)) * 1000).toFixed(0)}/s)`);
          }
        }),
      );
      if (pendingKill !== null) await pendingKill;
    } finally {
      clearInterval(releaser);
    }
    const elapsedMs = performance.now() - t0;
    fx.release();

    // --- after the run: stop, start once more (start-up recovery), read everything -------------
    if ((await desk.stop()) !== 0) fail("the desk did not exit 0 on SIGTERM after the run");
    stderrOfPast.push(desk.stderr());
    desk = await startDesk();
    restarts++;
    const exported: string[] = [];
    for (const org of orgs) {
      const r = await desk.admin("GET", `/admin/receipts?org_id=${org}`);
      if (r.status !== 200) fail(`export of org ${org}: HTTP ${r.status}`);
      exported.push(await r.text());
    }
    const jwksText = await (await fetch(`${desk.url}/.well-known/receipt-signing-key.json`)).text();
    const lastStart = desk.stderr();
    if ((await desk.stop()) !== 0) fail("the desk did not exit 0 on SIGTERM after recovery");
    if (/refunded \d+ abandoned/.test(lastStart)) fail(`the start after a clean stop still found open reservations: ${lastStart}`);

    const check = await runBinary(["desk", "check", "--data", data]);
    if (check.code !== 0) fail(`desk check exited ${check.code}: ${(check.stdout + check.stderr).slice(0, 2000)}`);

    const exportPath = join(tmp.path, "export.jsonl");
    const jwksPath = join(tmp.path, "jwks.json");
    writeFileSync(exportPath, exported.join(""));
    writeFileSync(jwksPath, jwksText);
    const jsonl = await runBinary(["verify-receipt", "--jsonl", exportPath, "--keys", jwksPath]);
    if (jsonl.code !== 0) fail(`verify-receipt --jsonl exited ${jsonl.code}: ${(jsonl.stdout + jsonl.stderr).slice(0, 2000)}`);

    // The export, by receipt id.
    const byId = new Map<string, Envelope>();
    for (const line of exported.join("").split("\n")) {
      if (line === "") continue;
      const env = JSON.parse(line) as Envelope;
      if (byId.has(env.receipt.id)) fail(`receipt ${env.receipt.id} exported twice`);
      byId.set(env.receipt.id, env);
    }
    const keySet = ReceiptKeys.fromJwks(JSON.parse(jwksText) as { keys: ReceiptJwk[] });

    // Every receipt a client received: in the export, the same bytes, verified.
    const received = new Set<string>();
    let resultsChecked = 0;
    for (const a of answers) {
      const label = `${a.kind} call (key ${keys[a.key]!.id}, HTTP ${a.status} ${a.outcome})`;
      const withReceipt = a.status === 200 || a.status === 402 || a.status === 403 || a.status === 502 || a.status === 504 || a.error === "ARGS_REFUSED";
      if (withReceipt !== (a.envelope !== null)) fail(`${label}: ${a.envelope === null ? "no receipt" : "an unexpected receipt"}`);
      if (a.status >= 500 && a.status !== 502 && a.status !== 504) fail(`${label}: a server fault`);
      if (a.envelope === null) {
        if (a.headerReceiptId !== null) fail(`${label}: x-clearing-receipt-id without a receipt`);
        continue;
      }
      const id = a.envelope.receipt?.id;
      if (a.headerReceiptId !== id) fail(`${label}: header receipt id ${a.headerReceiptId} differs from the body's ${id}`);
      if (received.has(id)) fail(`${label}: receipt ${id} was given to two calls`);
      received.add(id);
      const stored = byId.get(id);
      if (stored === undefined) {
        fail(`${label}: receipt ${id} is not in the export`);
        continue;
      }
      if (stored.payload !== a.envelope.payload || stored.signature !== a.envelope.signature || stored.kid !== a.envelope.kid) {
        fail(`${label}: receipt ${id} in the export differs from the one the client got`);
      }
      const opened = openEnvelope(a.envelope, keySet);
      for (const c of opened.checks) if (!c.ok) fail(`${label}: receipt ${id}: ${c.name} ${c.detail ?? ""}`);
      const signed = opened.signed;
      if (signed === null) continue;
      if (signed.key_id !== keys[a.key]!.id) fail(`${label}: receipt ${id} names key ${signed.key_id}`);
      if (a.headerPrice !== String(signed.price_mc) || a.headerRemaining !== String(signed.remaining_mc)) {
        fail(`${label}: headers say price ${a.headerPrice} remaining ${a.headerRemaining}, receipt ${id} ${signed.price_mc} / ${signed.remaining_mc}`);
      }
      if (HTTP_OF_OUTCOME[signed.outcome] !== a.status || signed.http_status !== a.status) {
        fail(`${label}: receipt ${id} says ${signed.outcome} / ${signed.http_status}`);
      }
      if (a.status === 200) {
        if (signed.outcome !== "charged" || signed.amount_mc !== signed.price_mc) fail(`${label}: receipt ${id} is not a charge of the price`);
        if (resultSha256(a.result) !== signed.result_sha256) fail(`${label}: the result does not hash to receipt ${id}'s result_sha256`);
        resultsChecked++;
      } else if (signed.amount_mc !== 0) {
        fail(`${label}: receipt ${id} charges ${signed.amount_mc} mc for a refusal or refund`);
      }
    }

    // Receipts no client saw: abandoned refunds, or answers a kill cut off (one per such call).
    let abandoned = 0;
    let unseenReceipts = 0;
    let unseenCharged = 0;
    for (const [id, env] of byId) {
      if (env.receipt.outcome === "refunded_abandoned") {
        abandoned++;
        continue;
      }
      if (received.has(id)) continue;
      unseenReceipts++;
      if (env.receipt.outcome === "charged") unseenCharged++;
    }
    if (unseenReceipts > noAnswer) fail(`${unseenReceipts} receipts no client received, but only ${noAnswer} calls went unanswered`);
    const sweptAtStart = stderrOfPast
      .concat(lastStart)
      .flatMap((text) => [...text.matchAll(/refunded (\d+) abandoned reservation/g)].map((m) => Number(m[1])))
      .reduce((a, b) => a + b, 0);
    if (sweptAtStart !== abandoned) fail(`the desks logged ${sweptAtStart} abandoned refunds, the export holds ${abandoned}`);
    if (abandoned > noAnswer) fail(`${abandoned} abandoned refunds, but only ${noAnswer} calls went unanswered`);

    // Money: the ledger read-only against the export and the budgets.
    const { Database } = await import("bun:sqlite");
    const db = new Database(join(data, "desk.db"), { readonly: true });
    let keyPeriodsChecked = 0;
    let auditRowsChecked = 0;
    try {
      const open = db.query("SELECT count(*) AS n FROM reservations WHERE state = 'open'").get() as { n: number };
      if (open.n !== 0) fail(`${open.n} reservations still open`);
      const total = db.query("SELECT count(*) AS n FROM receipts").get() as { n: number };
      if (total.n !== byId.size) fail(`the ledger holds ${total.n} receipts, the export ${byId.size}`);
      const chargedSum = new Map<string, number>();
      for (const env of byId.values()) {
        if (env.receipt.outcome !== "charged") continue;
        const k = `${env.receipt.key_id} ${env.receipt.period}`;
        chargedSum.set(k, (chargedSum.get(k) ?? 0) + env.receipt.amount_mc);
      }
      const budgets = new Map(keys.map((k) => [k.id, k.budgetMc]));
      const spendRows = db.query("SELECT key_id, period, spent_mc FROM spend").all() as { key_id: string; period: string; spent_mc: number }[];
      const spendKeys = new Set<string>();
      for (const s of spendRows) {
        const k = `${s.key_id} ${s.period}`;
        spendKeys.add(k);
        keyPeriodsChecked++;
        const charged = chargedSum.get(k) ?? 0;
        if (s.spent_mc !== charged) fail(`key ${s.key_id} period ${s.period}: spent ${s.spent_mc} mc, charged receipts ${charged} mc`);
        if (charged > (budgets.get(s.key_id) ?? -1)) fail(`key ${s.key_id} period ${s.period}: charged ${charged} mc over the budget ${budgets.get(s.key_id)}`);
      }
      for (const k of chargedSum.keys()) if (!spendKeys.has(k)) fail(`charged receipts for ${k} but no spend row`);
      const keyRows = db.query("SELECT id, budget_mc, spent_mc FROM keys").all() as { id: string; budget_mc: number; spent_mc: number }[];
      for (const k of keyRows) {
        if (k.budget_mc !== budgets.get(k.id)) fail(`key ${k.id}: budget ${k.budget_mc} in the ledger, ${budgets.get(k.id)} set`);
        if (k.spent_mc > k.budget_mc) fail(`key ${k.id}: spent ${k.spent_mc} over its budget ${k.budget_mc}`);
      }
      // The audit log as the desk answers it: one entry per receipt, with the receipt's key,
      // outcome and status. A receipted call writes no audit row: its entry is read out of it.
      const named = db.query("SELECT count(*) AS n FROM audit WHERE receipt_id IS NOT NULL").get() as { n: number };
      if (named.n !== 0) fail(`${named.n} audit rows name a receipt`);
      const entries = await new SqliteRecords(sqlOf(db)).audit({ orgId: null, keyId: null, sinceMs: null, limit: Number.MAX_SAFE_INTEGER });
      const audited = new Set<string>();
      for (const entry of entries) {
        if (entry.receiptId === null) continue;
        const env = byId.get(entry.receiptId);
        if (audited.has(entry.receiptId)) fail(`receipt ${entry.receiptId} has two audit entries`);
        audited.add(entry.receiptId);
        if (env === undefined) fail(`audit entry for receipt ${entry.receiptId}, which does not exist`);
        else if (env.receipt.key_id !== entry.keyId || env.receipt.outcome !== entry.outcome || env.receipt.http_status !== entry.httpStatus) {
          fail(`audit entry of receipt ${entry.receiptId} says ${entry.keyId} ${entry.outcome} ${entry.httpStatus}`);
        }
      }
      if (audited.size !== byId.size) fail(`${byId.size} receipts but ${audited.size} audit entries with a receipt`);
      auditRowsChecked = audited.size;
    } finally {
      db.close();
    }

    // Timeouts answered within the upstream timeout plus generous slack (a loaded 2-core machine).
    const pct = (xs: number[], p: number) => (xs.length === 0 ? 0 : xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!);
    const chargedLat = answers
      .filter((a) => a.outcome === "charged")
      .map((a) => a.ms)
      .sort((x, y) => x - y);
    const timeoutLat = answers
      .filter((a) => a.outcome === "refunded_timeout")
      .map((a) => a.ms)
      .sort((x, y) => x - y);
    const timeoutLimit = timeoutSecs * 1000 + TIMEOUT_SLACK_MS;
    for (const ms of timeoutLat) if (ms > timeoutLimit) fail(`a refunded_timeout answer took ${ms.toFixed(0)} ms, over ${timeoutLimit} ms`);

    const answered = answers.length;
    if (answered + noAnswer !== options.calls) fail(`${answered} answered + ${noAnswer} unanswered is not ${options.calls} calls`);
    if (kills !== options.kills) fail(`${kills} kills instead of ${options.kills}`);
    return {
      seed: options.seed,
      calls: options.calls,
      concurrency: options.concurrency,
      keys: options.keys,
      kills,
      restarts,
      secondDesks,
      byOutcome,
      byKind,
      noAnswer,
      noAnswerCauses,
      receiptsChecked: received.size,
      resultsChecked,
      receiptsExported: byId.size,
      abandoned,
      unseenReceipts,
      unseenCharged,
      keyPeriodsChecked,
      auditRowsChecked,
      chargedMs: { p50: pct(chargedLat, 50), p99: pct(chargedLat, 99) },
      timeoutMs: { p50: pct(timeoutLat, 50), max: timeoutLat.at(-1) ?? 0, limit: timeoutLimit },
      elapsedMs,
      callsPerSecond: (options.calls / elapsedMs) * 1000,
      failures,
    };
  } finally {
    for (const d of started) if (d.proc.exitCode === null && d.proc.signalCode === null) await d.kill();
  }
}

export function formatSummary(s: DeskSoakSummary): string {
  const lines = [
    `desk soak: seed ${s.seed}, ${s.calls} calls, ${s.concurrency} concurrent, ${s.keys} keys`,
    `  elapsed ${(s.elapsedMs / 1000).toFixed(1)} s, ${s.callsPerSecond.toFixed(0)} calls/s`,
    `  latency of charged calls p50 ${s.chargedMs.p50.toFixed(1)} ms, p99 ${s.chargedMs.p99.toFixed(1)} ms; refunded_timeout answers p50 ${s.timeoutMs.p50.toFixed(0)} ms, max ${s.timeoutMs.max.toFixed(0)} ms (limit ${s.timeoutMs.limit} ms)`,
    `  kills (SIGKILL) ${s.kills}, restarts ${s.restarts} (the last one after a clean stop); second desks on the directory refused ${s.secondDesks}`,
    `  no answer ${s.noAnswer} ${JSON.stringify(s.noAnswerCauses)}`,
    `  outcomes ${JSON.stringify(Object.fromEntries(Object.entries(s.byOutcome).sort((a, b) => b[1] - a[1])))}`,
    ...Object.entries(s.byKind).map(([k, v]) => `    ${k.padEnd(18)} ${JSON.stringify(v)}`),
    `  receipts checked ${s.receiptsChecked} (in the export, same bytes, signature and readable copy), results hashed ${s.resultsChecked}`,
    `  receipts exported ${s.receiptsExported}: abandoned refunds ${s.abandoned}, unseen by clients ${s.unseenReceipts} (of which charged ${s.unseenCharged})`,
    `  key periods: spend = charged receipts <= budget, ${s.keyPeriodsChecked} checked; audit entries matched one to one with receipts ${s.auditRowsChecked}`,
    s.failures.length === 0 ? "  all checks passed" : `  FAILED (${s.failures.length}):\n${s.failures.map((f) => `    ${f}`).join("\n")}`,
  ];
  return lines.join("\n");
}

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(name);
  if (i === -1) return fallback;
  const v = Number(process.argv[i + 1]);
  if (!Number.isFinite(v) || v < 0) {
    process.stderr.write(`${name} needs a number\n`);
    process.exit(2);
  }
  return v;
}

if (import.meta.main) {
  const seed = flag("--seed", (Date.now() ^ (process.pid << 16)) >>> 0);
  const options: DeskSoakOptions = {
    calls: flag("--calls", 100_000),
    concurrency: flag("--concurrency", 200),
    keys: flag("--keys", 1_000),
    kills: flag("--kills", 5),
    seed,
    upstreamTimeoutSecs: flag("--upstream-timeout", 2),
    log: (line) => process.stdout.write(`  ${line}\n`),
  };
  process.stdout.write(`desk soak seed ${seed} (repeat with --seed ${seed})\n`);
  const summary = await run(options);
  process.stdout.write(`${formatSummary(summary)}\n`);
  process.exit(summary.failures.length === 0 ? 0 : 1);
}
