// `npm run fuzz:serve-mcp`: random tool calls through the MCP SDK's own client over stdio to
// `dist/ask-only serve-mcp`, connected over mTLS to a real `dist/ask-only approver`.
// Usage: bun scripts/fuzz/serve-mcp.ts [--runs N] [--seed S] [--concurrency C]
//
// Checked on every call: the result is a code ({"error":CODE}, isError) or the exact success
// shape, the same JSON as text, and the answer the shared rules give for those arguments; no
// input string of 4 characters or more shows up anywhere in the result (the agent gets ids,
// states, times and codes only); no card number in any result. Checked at the end: both logs
// hold only their own fixed lines, no card number in serve-mcp's log, in the approver's console
// or log, or in its ledger; the approver stored exactly the asks the agent saw created.
import { join } from "node:path";
import fc from "fast-check";
import { isErrorCode } from "../../src/core/errors.ts";
import { isApprovalId, isSafeRef } from "../../src/core/ids.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { containsCardNumber } from "../../src/core/money/card-net.ts";
import { RFC3339_UTC } from "../../src/core/schema/approver-answer.ts";
import { holdsCardNumber, validateAccountAsk, validatePayAsk } from "../../src/core/schema/ask.ts";
import { parseRequestArguments } from "../../src/core/schema/request-tool.ts";
import { approverFiles, type LinkPaths, writeLink } from "../../test/helpers/approver-link.ts";
import { startApprover } from "../../test/helpers/approver-process.ts";
import { connectServeMcp, serveMcpEnv } from "../../test/helpers/mcp-client.ts";
import { tempDir } from "../../test/helpers/tmp.ts";
import { APPROVER_LOG, bump, cliOptions, digitsOf, formatSummary, untilEnded } from "./common.ts";
import { anyJsonValue, approvalIdArb, disguisedCard, FIELD_VALUES, hostileText } from "./inputs.ts";

export type ServeMcpFuzzOptions = { runs: number; seed: number; concurrency?: number };

export type ServeMcpFuzzSummary = {
  runs: number;
  seed: number;
  byKind: Record<string, number>;
  byAnswer: Record<string, number>;
  created: number;
  /** Asks the person decided on the console during the run. */
  decisions: number;
  /** Exchanges that crossed the link to the approver (one per call that passed the local checks). */
  exchanges: number;
  cardsTried: number;
  elapsedMs: number;
  failures: string[];
};

// --- the calls ----------------------------------------------------------------------------------

type Call = {
  kind: string;
  name: string;
  args: Record<string, unknown>;
  /** The card numbers (ASCII digits) hidden in this call. */
  cards: string[];
  /** For status: read back the id of an earlier created ask (index into them). */
  useCreated?: number;
  /** Before the status call, the person decides that ask on the approver's console. */
  decide?: "approve" | "deny";
};

const FIELD_NAMES = ["merchant", "amount", "currency", "card_handle", "checkout_url", "provider_url", "identity_handle", "reason", "approval_id"];

const pay = fc.record({
  verb: fc.constant("pay"),
  merchant: FIELD_VALUES.merchant,
  amount: FIELD_VALUES.amount,
  currency: FIELD_VALUES.currency,
  card_handle: FIELD_VALUES.card_handle,
  checkout_url: FIELD_VALUES.checkout_url,
  reason: fc.option(FIELD_VALUES.reason, { nil: undefined }),
});
const account = fc.record({
  verb: fc.constant("account_create"),
  provider_url: FIELD_VALUES.provider_url,
  identity_handle: fc.option(FIELD_VALUES.identity_handle, { nil: undefined }),
  reason: fc.option(FIELD_VALUES.reason, { nil: undefined }),
});
const anyVerb = fc.oneof(pay, account) as fc.Arbitrary<Record<string, unknown>>;

const call = (kind: string, args: fc.Arbitrary<Record<string, unknown>>, extra: Partial<Call> = {}) =>
  args.map((a) => ({ kind, name: "request", args: a, cards: [], ...extra }) as Call);

const cardCall = fc
  .tuple(anyVerb, disguisedCard, fc.constantFrom(...FIELD_NAMES, "verb", "extra", "nested"), fc.constantFrom("alone", "in-text", "as-key"), hostileText(8))
  .map(([args, card, field, where, noise]): Call => {
    const value = where === "in-text" ? `${noise} ${card.shown} ${noise}` : card.shown;
    const placed =
      where === "as-key" ? { ...args, [card.shown]: "x" } : field === "nested" ? { ...args, reason: { note: [value] } } : { ...args, [field]: value };
    return { kind: "card-number", name: "request", args: placed, cards: [card.digits] };
  });

export const callArb: fc.Arbitrary<Call> = fc.oneof(
  { arbitrary: call("valid", anyVerb), weight: 5 },
  { arbitrary: fc.nat().map((n) => ({ kind: "status-created", name: "request", args: { verb: "status" }, cards: [], useCreated: n })), weight: 2 },
  {
    arbitrary: fc
      .tuple(fc.nat(), fc.constantFrom("approve", "deny") as fc.Arbitrary<"approve" | "deny">)
      .map(([n, decide]) => ({ kind: "decided-status", name: "request", args: { verb: "status" }, cards: [], useCreated: n, decide })),
    weight: 1,
  },
  {
    arbitrary: call(
      "status-other",
      fc.oneof(approvalIdArb, hostileText(14), anyJsonValue).map((id) => ({ verb: "status", approval_id: id })),
    ),
    weight: 1,
  },
  {
    arbitrary: call(
      "unicode-field",
      fc.tuple(anyVerb, fc.constantFrom(...FIELD_NAMES), hostileText(60)).map(([a, k, v]) => ({ ...a, [k]: v })),
    ),
    weight: 4,
  },
  {
    arbitrary: call(
      "wrong-type",
      fc.tuple(anyVerb, fc.constantFrom(...FIELD_NAMES, "verb"), anyJsonValue).map(([a, k, v]) => ({ ...a, [k]: v })),
    ),
    weight: 3,
  },
  {
    arbitrary: call(
      "extra-field",
      fc
        .tuple(anyVerb, fc.oneof(fc.constantFrom("approve", "state", "ref", "card_number", "cvv"), hostileText(10)), anyJsonValue)
        .map(([a, k, v]) => ({ ...a, [k]: v })),
    ),
    weight: 2,
  },
  {
    arbitrary: call(
      "missing-field",
      fc.tuple(anyVerb, fc.constantFrom("verb", ...FIELD_NAMES)).map(([a, k]) => Object.fromEntries(Object.entries(a).filter(([key]) => key !== k))),
    ),
    weight: 2,
  },
  {
    arbitrary: call(
      "wrong-verb",
      fc
        .tuple(anyVerb, fc.oneof(fc.constantFrom("approve", "deny", "execute", "PAY", "pay ", "status\u200b"), hostileText(10)))
        .map(([a, v]) => ({ ...a, verb: v })),
    ),
    weight: 1,
  },
  {
    arbitrary: call(
      "huge-string",
      fc
        .tuple(anyVerb, fc.constantFrom(...FIELD_NAMES), fc.integer({ min: 81, max: 20_000 }), fc.constantFrom("a", "界", "😀", "\u202e"))
        .map(([a, k, n, ch]) => ({ ...a, [k]: ch.repeat(n) })),
    ),
    weight: 1,
  },
  { arbitrary: call("random-object", fc.dictionary(hostileText(12), anyJsonValue, { maxKeys: 6 })), weight: 1 },
  { arbitrary: cardCall, weight: 4 },
  {
    arbitrary: fc
      .tuple(fc.oneof(fc.constantFrom("approve", "pay", "Request", "request ", ""), hostileText(12)), anyVerb)
      .map(([name, args]) => ({ kind: "unknown-tool", name, args, cards: [] })),
    weight: 1,
  },
);

// --- what the agent must get --------------------------------------------------------------------

type AskState = { state: "pending" | "approved" | "denied"; ref?: string };
/** A decision being typed: its ref is not known yet. */
const ANY_REF = "*";
type Expected = { kind: "created" } | { kind: "status"; id: string; states: AskState[] } | { kind: "code"; code: string };

/** The answer SPEC 7.2 gives for these arguments (with a large pending cap and nothing decided). */
function expectedOf(name: string, args: unknown, created: Map<string, AskState[]>): Expected {
  if (name !== "request") return { kind: "code", code: "TOOL_UNKNOWN" };
  const parsed = parseRequestArguments(args, { holdsCardNumber });
  if (!parsed.ok) return { kind: "code", code: parsed.code };
  const r = parsed.request;
  if (r.verb === "status") {
    if (!isApprovalId(r.approval_id)) return { kind: "code", code: "APPROVAL_ID_INVALID" };
    const states = created.get(r.approval_id);
    return states ? { kind: "status", id: r.approval_id, states } : { kind: "code", code: "ASK_NOT_FOUND" };
  }
  const input = { approval_id: "0000000000", ...r.fields };
  const checked = r.verb === "pay" ? validatePayAsk(input) : validateAccountAsk(input);
  return checked.ok ? { kind: "created" } : { kind: "code", code: checked.code };
}

/** Every string in a JSON value, keys included. */
function stringsOf(value: unknown, out: string[] = []): string[] {
  if (typeof value === "string") out.push(value);
  else if (Array.isArray(value)) for (const v of value) stringsOf(v, out);
  else if (typeof value === "object" && value !== null) {
    for (const [k, v] of Object.entries(value)) {
      out.push(k);
      stringsOf(v, out);
    }
  }
  return out;
}

type Result = { content?: unknown; structuredContent?: unknown; isError?: unknown; [k: string]: unknown };

const SUCCESS_KEYS = { created: ["approval_id", "expires_at", "state"], status: ["approval_id", "state"], approved: ["approval_id", "ref", "state"] };

/** The result's shape, strictly; returns the label for the summary and any broken promise. */
function judge(args: unknown, expected: Expected, r: Result): { label: string; problems: string[]; createdId?: string } {
  const problems: string[] = [];
  const keys = Object.keys(r)
    .filter((k) => k !== "_meta")
    .sort();
  const sc = r.structuredContent as Record<string, unknown> | undefined;
  const content = r.content as { type?: unknown; text?: unknown }[] | undefined;
  const text = Array.isArray(content) && content.length === 1 && content[0]!.type === "text" ? content[0]!.text : undefined;
  if (r._meta !== undefined) problems.push("result carries _meta");
  let label: string;
  let createdId: string | undefined;
  if (typeof sc !== "object" || sc === null || typeof text !== "string" || text !== JSON.stringify(sc)) {
    label = "malformed";
    problems.push(`result is not one text block equal to structuredContent: ${JSON.stringify(r).slice(0, 200)}`);
  } else if (r.isError === true) {
    const code = sc.error;
    label = `error ${String(code)}`;
    if (keys.join() !== "content,isError,structuredContent") problems.push(`error result with keys ${keys.join()}`);
    if (Object.keys(sc).join() !== "error" || !isErrorCode(code)) problems.push(`error is not exactly {"error":CODE}: ${text.slice(0, 120)}`);
    if (expected.kind !== "code") problems.push(`${String(code)} where ${expected.kind} was owed`);
    else if (expected.code !== code) problems.push(`${String(code)} where ${expected.code} was owed`);
  } else {
    const scKeys = Object.keys(sc).sort().join();
    if (keys.join() !== "content,structuredContent" && keys.join() !== "content,isError,structuredContent")
      problems.push(`success result with keys ${keys.join()}`);
    if (!isApprovalId(sc.approval_id)) problems.push(`approval_id ${JSON.stringify(sc.approval_id)}`);
    if (expected.kind === "created") {
      label = "created pending";
      if (scKeys !== SUCCESS_KEYS.created.join() || sc.state !== "pending" || typeof sc.expires_at !== "string" || !RFC3339_UTC.test(sc.expires_at)) {
        problems.push(`bad created shape ${text.slice(0, 160)}`);
      } else createdId = sc.approval_id as string;
    } else if (expected.kind === "status") {
      label = `status ${String(sc.state)}`;
      // One of the states the ask may be in now (a decision may be landing), ref only with approved.
      const ok =
        sc.approval_id === expected.id &&
        expected.states.some((e) => sc.state === e.state && (e.ref === ANY_REF ? isSafeRef(sc.ref) : sc.ref === e.ref)) &&
        scKeys === (sc.state === "approved" ? SUCCESS_KEYS.approved : SUCCESS_KEYS.status).join();
      if (!ok) problems.push(`bad status ${text.slice(0, 160)} for ${expected.id}`);
    } else {
      label = `success where ${expected.code} was owed`;
      problems.push(`${text.slice(0, 120)} where ${expected.code} was owed`);
    }
    if (sc.ref !== undefined && !isSafeRef(sc.ref)) problems.push("an unsafe ref");
  }
  // Nothing the agent sent comes back, except the id it asked about (status).
  const allowedEcho = expected.kind === "status" ? expected.id : undefined;
  const whole = JSON.stringify(r);
  for (const s of stringsOf(args)) {
    if (s.length < 4 || s === allowedEcho) continue;
    if (!whole.includes(s) && !whole.includes(JSON.stringify(s).slice(1, -1))) continue;
    // Our own words (keys) are not echoes, nor is a string inside a value the checks above
    // held to its strict form (an id, a time, a state, a code, a ref): that is a coincidence.
    if (OWN_WORDS.some((w) => w.includes(s)) || Object.values(sc ?? {}).some((v) => typeof v === "string" && v.includes(s))) continue;
    problems.push(`an echo of the input ${JSON.stringify(s).slice(0, 60)} in ${whole.slice(0, 160)}`);
  }
  if (containsCardNumber(whole)) problems.push(`a card number in a result: ${whole.slice(0, 160)}`);
  return { label, problems, createdId };
}

const OWN_WORDS = ["content", "structuredContent", "isError", "text", "type", "approval_id", "expires_at", "state", "ref", "error", "true", "false"];

/** Calls that pass serve-mcp's own checks, and only those, make one exchange with the approver. */
const mayReachApprover = (e: Expected) => e.kind !== "code" || e.code === "ASK_NOT_FOUND";

/**
 * A recording relay between serve-mcp and the approver, with real mTLS on both sides (the
 * approver's certificate towards serve-mcp, the client's towards the approver): it keeps each
 * request as it arrived, so the run can show what crossed the link.
 */
async function wireTap(link: LinkPaths, approverUrl: string) {
  const pem = (path: string) => Bun.file(path).text();
  const [cert, key, ca, clientCert, clientKey, approverCa] = await Promise.all(
    [link.approverCert, link.approverKey, link.clientCa, link.clientCert, link.clientKey, link.approverCa].map(pem),
  );
  const seen: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert, key, ca, requestCert: true, rejectUnauthorized: true },
    async fetch(req) {
      const url = new URL(req.url);
      const body = req.method === "POST" ? await req.text() : undefined;
      seen.push(`${req.method} ${url.pathname} ${body ?? ""}`);
      const res = await fetch(new URL(url.pathname, approverUrl), {
        method: req.method,
        headers: { "content-type": req.headers.get("content-type") ?? "application/json" },
        body,
        tls: { cert: clientCert, key: clientKey, ca: approverCa },
      });
      return new Response(await res.arrayBuffer(), { status: res.status, headers: { "content-type": res.headers.get("content-type") ?? "" } });
    },
  });
  return { server, seen, url: `https://localhost:${server.port}` };
}

// --- the run ------------------------------------------------------------------------------------

/** The only lines each log may hold (nothing from an agent, an ask or an answer). */
const SERVE_MCP_LOG = [
  /^ask-only: serve-mcp ready on stdio; approver https:\/\/localhost:\d+$/,
  /^ask-only: serve-mcp: approver exchange failed: APPROVER_[A-Z_]+$/,
];

export async function run(options: ServeMcpFuzzOptions): Promise<ServeMcpFuzzSummary> {
  const { runs, seed, concurrency = 8 } = options;
  const calls = fc.sample(callArb, { seed, numRuns: runs });
  const failures: string[] = [];
  const byKind: Record<string, number> = {};
  const byAnswer: Record<string, number> = {};
  const created: string[] = [];
  /** Each created ask and the states a status may find it in (more than one while a decision lands). */
  const createdSet = new Map<string, AskState[]>();
  let decisions = 0;
  const cards = new Set<string>();
  let owedExchanges = 0;

  await using dir = tempDir("ask-only-fuzz-serve-mcp-");
  const link = await writeLink(dir.path);
  const db = join(dir.path, "asks.db");
  const ap = await startApprover({ files: approverFiles(link), db, ttl: "168h", maxPending: 100_000 });
  const tap = await wireTap(link, ap.url);
  const mcp = await connectServeMcp(serveMcpEnv(link, tap.url));
  // Listing first lets the SDK client check every result against the tool's output schema.
  const tools = await mcp.client.listTools();
  if (tools.tools.map((t) => t.name).join() !== "request") failures.push(`tools/list: ${tools.tools.map((t) => t.name).join()}`);
  const started = performance.now();

  const one = async (c: Call, index: number) => {
    bump(byKind, c.kind);
    for (const d of c.cards) cards.add(d);
    let args: Record<string, unknown> = c.args;
    if (c.useCreated !== undefined) args = { verb: "status", approval_id: created.length > 0 ? created[c.useCreated % created.length] : "K7Q2M4XZ3A" };
    const id = args.approval_id as string;
    const states = createdSet.get(id);
    if (c.decide && states?.length === 1 && states[0]!.state === "pending") {
      // The person decides on the console; status calls meanwhile may see either state.
      const decided: AskState = c.decide === "approve" ? { state: "approved", ref: ANY_REF } : { state: "denied" };
      createdSet.set(id, [{ state: "pending" }, decided]);
      const at = ap.type(`${c.decide} ${id}`);
      const m = await ap.out
        .waitFor(new RegExp(c.decide === "approve" ? `^${id}: approved: .*\\n {2}(demo-[0-9a-f]{8}): no money moved` : `^${id}: denied: `, "m"), at)
        .catch(() => undefined);
      if (!m) {
        failures.push(`call ${index}: the console did not confirm ${c.decide} ${id}`);
        return;
      }
      createdSet.set(id, [c.decide === "approve" ? { state: "approved", ref: m[1] } : { state: "denied" }]);
      decisions++;
    }
    // What goes over the wire is JSON: judge what serve-mcp receives.
    const wire = JSON.parse(JSON.stringify(args)) as Record<string, unknown>;
    const expected = expectedOf(c.name, wire, createdSet);
    if (mayReachApprover(expected)) owedExchanges++;
    let r: Result;
    try {
      r = (await mcp.client.callTool({ name: c.name, arguments: wire })) as Result;
    } catch (err) {
      bump(byAnswer, "protocol error");
      failures.push(`call ${index} (${c.kind}): the call failed: ${err instanceof Error ? err.message.slice(0, 160) : String(err)}`);
      return;
    }
    // A decision may have landed while the call was in flight: either state is right.
    if (expected.kind === "status") expected.states = [...expected.states, ...(createdSet.get(expected.id) ?? [])];
    const { label, problems, createdId } = judge(wire, expected, r);
    bump(byAnswer, label);
    for (const p of problems) failures.push(`call ${index} (${c.kind}): ${p}`);
    if (createdId) {
      created.push(createdId);
      createdSet.set(createdId, [{ state: "pending" }]);
    }
  };

  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= calls.length) return;
      await one(calls[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = performance.now() - started;

  await mcp.client.close();
  tap.server.stop(true);
  const serveMcpLog = mcp.stderr();
  // What crossed the link: only calls that passed every local check, and never a card number.
  if (tap.seen.length !== owedExchanges)
    failures.push(`${tap.seen.length} exchanges reached the approver; ${owedExchanges} calls passed serve-mcp's own checks`);
  const wireDigits = digitsOf(tap.seen.join("\n"));
  for (const card of cards) if (wireDigits.includes(card)) failures.push(`card number ${card.slice(0, 4)}... crossed the link to the approver`);
  if (ap.proc.exitCode !== null || ap.proc.signalCode !== null) failures.push("the approver died during the run");
  await ap.stop();
  await untilEnded(ap.out);
  await untilEnded(ap.err);

  for (const [name, log, grammar] of [
    ["serve-mcp", serveMcpLog, SERVE_MCP_LOG],
    ["approver", ap.err.text, APPROVER_LOG],
  ] as const) {
    for (const line of log.split("\n"))
      if (line !== "" && !grammar.some((g) => g.test(line))) failures.push(`${name} log line of its own: ${JSON.stringify(line.slice(0, 160))}`);
  }
  if (containsCardNumber(serveMcpLog)) failures.push("a card number in serve-mcp's log");

  // The approver never saw a card number: not on its console, not in its log, not in its ledger.
  const approverDigits = digitsOf(ap.out.text + ap.err.text);
  {
    using ledger = AskLedger.open(db, () => new Date());
    const stored = [...createdSet.keys()].flatMap((id) => ledger.get(id) ?? []);
    const storedDigits = digitsOf(JSON.stringify(stored.map((s) => s.ask)));
    for (const card of cards) {
      if (approverDigits.includes(card)) failures.push(`card number ${card.slice(0, 4)}... reached the approver's console or log`);
      if (storedDigits.includes(card)) failures.push(`card number ${card.slice(0, 4)}... is in the approver's ledger`);
    }
    for (const s of stored) if (holdsCardNumber(s.ask)) failures.push(`stored ask ${s.ask.approval_id} holds a card number`);
    const storedIds = new Set(stored.map((s) => s.ask.approval_id));
    for (const id of createdSet.keys()) if (!storedIds.has(id)) failures.push(`created ${id} is not in the approver's ledger`);
    // Nothing else is stored: the pending asks are exactly the created ones left undecided.
    const pendingIds = ledger
      .listPending()
      .map((s) => s.ask.approval_id)
      .sort();
    const undecided = [...createdSet]
      .filter(([, st]) => st.length === 1 && st[0]!.state === "pending")
      .map(([id]) => id)
      .sort();
    if (pendingIds.join() !== undecided.join())
      failures.push(`the approver holds ${pendingIds.length} pending asks; the agent saw ${undecided.length} created and undecided`);
  }

  return { runs, seed, byKind, byAnswer, created: createdSet.size, decisions, exchanges: tap.seen.length, cardsTried: cards.size, elapsedMs, failures };
}

if (import.meta.main) {
  const options = cliOptions("scripts/fuzz/serve-mcp.ts", 10_000);
  const s = await run(options);
  console.log(
    formatSummary(
      "fuzz:serve-mcp",
      s,
      { "calls by kind": s.byKind, "results by state or code": s.byAnswer },
      `asks created and found in the approver's ledger: ${s.created} (${s.decisions} decided on its console); exchanges over the link: ${s.exchanges}; card numbers tried: ${s.cardsTried}`,
    ),
  );
  process.exit(s.failures.length === 0 ? 0 : 1);
}
