// The clearing path: one function per step, in the contract's order. Every call of a paid tool,
// whatever the protocol that carried it (REST or MCP), goes through `clear`, which returns an
// outcome and never throws for a caller's mistake.
//   1 key  2 failure limit  3 tool + arguments  4 allowlist  5 reservation  6 upstream  7 charge
// A call priced above its key's threshold stops after 5 and waits for a person; its repeat
// (approval.ts) goes from 1 to 6 once the person approved.
import type { ErrorCode } from "../errors.ts";
import { askApproval, needsApproval, repeatApproved } from "./approval.ts";
import { bindResult, CanonicalJsonError, type Envelope, paramsSha256 } from "../receipt/index.ts";
import type { ArgsProblem } from "./args.ts";
import type { ToolEntry } from "./catalog.ts";
import type { DeskContext } from "./context.ts";
import { FAILURES_PER_HOUR, HELD_RESULT_MS, HELD_RESULTS_PER_KEY } from "./limits.ts";
import { type ClearingOutcome, type PlainOutcome, refusal, type SettleOutcome, statusOf, unrecorded } from "./outcomes.ts";
import { hourOf, periodOf } from "./period.ts";
import type { CallOutcome } from "../upstream/outcome.ts";
import { type CallContext, LedgerUnavailable, type SettleResult } from "./ports.ts";
import { type DeskKey, spentIn } from "./records.ts";
import { lookupOf, sha256 } from "./secrets.ts";

type Step<T> = { done: ClearingOutcome } | { next: T };

const stop = (done: ClearingOutcome): { done: ClearingOutcome } => ({ done });

/** What a call brings beside its key, tool and arguments. */
export type ClearingCall = {
  /**
   * Aborts when the agent's connection closes: a call charged after that keeps its result for
   * the agent to fetch (it paid for it), and only such a call writes its result to the ledger.
   */
  agentGone?: AbortSignal;
  /** The approval a repeat of a call that waited for a person names (approval.ts). */
  approvalId?: string | null;
};

/** Clears one call of `toolName` with `args` for the holder of `keySecret`. */
export async function clear(d: DeskContext, keySecret: string | null, toolName: string, args: unknown, call: ClearingCall = {}): Promise<ClearingOutcome> {
  try {
    return await clearSteps(d, keySecret, toolName, args, call);
  } catch (err) {
    // Before the reservation nothing was charged and no upstream called; after it, see settle.
    if (err instanceof LedgerUnavailable) return unrecorded("LEDGER_UNAVAILABLE");
    throw err;
  }
}

async function clearSteps(d: DeskContext, keySecret: string | null, toolName: string, args: unknown, call: ClearingCall): Promise<ClearingOutcome> {
  const now = d.now();
  const key = await validKey(d, keySecret, now);
  if (key === null) return keyInvalid();
  const ctx: CallContext = { key, tool: toolName, priceMc: 0, upstreamCostMc: 0, paramsSha256: "", now, hour: hourOf(now), period: periodOf(key.reset, now) };
  if (call.approvalId !== undefined && call.approvalId !== null) {
    const claimed = await repeatApproved(d, ctx, call.approvalId, args);
    if ("done" in claimed) return claimed.done;
    const settled = await callAndSettle(d, ctx, claimed.next.reservationId, claimed.next.tool, args, call.agentGone);
    return { ...settled, approval: { approvalId: call.approvalId } };
  }
  const limited = await checkFailureLimit(d, ctx);
  if ("done" in limited) return limited.done;
  const tool = await checkToolAndArgs(d, ctx, args);
  if ("done" in tool) return tool.done;
  const allowed = await checkAllowlist(d, ctx);
  if ("done" in allowed) return allowed.done;
  const waits = needsApproval(ctx.key, ctx.priceMc);
  if (waits && d.approver === null) {
    // No approver to ask: refused before anything is reserved.
    await d.ledger.money.recordPlainRefusal(ctx, "refused_approver_unavailable");
    return plain(ctx, "refused_approver_unavailable", "APPROVER_UNAVAILABLE");
  }
  const reserved = await reserve(d, ctx);
  if ("done" in reserved) return reserved.done;
  if (waits) return askApproval(d, ctx, reserved.next, args);
  return callAndSettle(d, ctx, reserved.next.reservationId, tool.next, args, call.agentGone);
}

/** Steps 6 and 7: the upstream call and its settlement, keeping a charged result the agent did not receive. */
async function callAndSettle(
  d: DeskContext,
  ctx: CallContext,
  reservationId: number,
  tool: ToolEntry,
  args: unknown,
  agentGone?: AbortSignal,
): Promise<ClearingOutcome> {
  const answer = await d.registry.upstream(tool.upstream)!.call(tool.upstreamTool, args as Record<string, unknown>);
  const settled = await settle(d, ctx, reservationId, keepsOutputSchema(tool, answer));
  if (agentGone?.aborted && settled.status === 200 && settled.result !== undefined && settled.receipt !== undefined) {
    await holdResult(d, ctx.key.id, settled.result, settled.receipt);
  }
  return settled;
}

/** Step 1: the key a secret opens, or null when it is malformed, unknown, revoked or expired at `now` (401). */
export async function validKey(d: DeskContext, secret: string | null, now: number): Promise<DeskKey | null> {
  const lookup = secret === null ? null : lookupOf(secret);
  const key = lookup === null ? null : await d.ledger.keys.find(lookup, sha256(secret!));
  if (key === null || key.revokedAt !== null || (key.expiresAt !== null && key.expiresAt <= now)) return null;
  return key;
}

/** Keeps a charged result the agent did not receive, for HELD_RESULT_MS (GET /v1/receipts/{id}/result). */
async function holdResult(d: DeskContext, keyId: string, result: Record<string, unknown>, receipt: Envelope): Promise<void> {
  const now = d.now();
  const receiptId = receipt.receipt.id;
  await d.ledger.money.holdResult({ receiptId, keyId, result, heldUntil: now + HELD_RESULT_MS, now, perKey: HELD_RESULTS_PER_KEY });
  d.log(`receipt ${receiptId}: the agent disconnected before its answer; the result is held for ${HELD_RESULT_MS / 60_000} min`);
}

/**
 * A successful answer of a tool that lists an outputSchema must carry structuredContent that
 * matches it (MCP asks servers to; agents' clients check it and reject the answer otherwise):
 * one that does not is the upstream's fault, refunded as an upstream error, never charged.
 */
function keepsOutputSchema(tool: ToolEntry, answer: CallOutcome): CallOutcome {
  if (answer.kind !== "ok" || tool.checkOutput === null) return answer;
  const structured = answer.result.structuredContent;
  const fits = typeof structured === "object" && structured !== null && !Array.isArray(structured) && tool.checkOutput(structured).length === 0;
  return fits ? answer : { kind: "upstream_error" };
}

/**
 * Step 2: too many failed or running calls this UTC hour → 429. An early answer from the key as
 * read; the reservation (step 5) counts and checks again, atomically with the calls in flight.
 */
async function checkFailureLimit(d: DeskContext, ctx: CallContext): Promise<Step<null>> {
  if (ctx.key.failHour !== ctx.hour || ctx.key.failCount < FAILURES_PER_HOUR) return { next: null };
  await d.ledger.money.recordPlainRefusal(ctx, "refused_rate_limited");
  return stop(plain(ctx, "refused_rate_limited", "TOO_MANY_FAILURES"));
}

/**
 * Step 3: unknown tool → 404; arguments against the tool's schema, then against what its
 * upstream can send (a REST tool's request must build) → 400 with the problems (paths and rule
 * names only). No money moves and the upstream is not called.
 */
async function checkToolAndArgs(d: DeskContext, ctx: CallContext, args: unknown): Promise<Step<ToolEntry>> {
  const tool = d.catalog.tool(ctx.tool);
  if (tool === undefined) {
    await d.ledger.money.recordPlainRefusal(ctx, "refused_tool_unknown");
    return stop(plain(ctx, "refused_tool_unknown", "TOOL_UNKNOWN"));
  }
  ctx.priceMc = priceFor(ctx.key, tool);
  ctx.upstreamCostMc = tool.upstreamCostMc;
  const problems: ArgsProblem[] = typeof args !== "object" || args === null || Array.isArray(args) ? [{ path: "/", rule: "type" }] : tool.check(args);
  if (problems.length === 0) {
    problems.push(...(d.registry.upstream(tool.upstream)?.checkArgs?.(tool.upstreamTool, args as Record<string, unknown>) ?? []));
  }
  let hash: string | null = null;
  if (problems.length === 0) {
    try {
      hash = paramsSha256(args);
    } catch (err) {
      // No canonical form (a lone surrogate, say): the receipt could not bind these arguments.
      if (!(err instanceof CanonicalJsonError)) throw err;
      problems.push({ path: err.pointer === "" ? "/" : err.pointer, rule: "canonical_json" });
    }
  }
  if (problems.length > 0 || hash === null) {
    await d.ledger.money.recordPlainRefusal(ctx, "refused_args_invalid");
    return stop({ ...plain(ctx, "refused_args_invalid", "ARGS_INVALID"), problems });
  }
  ctx.paramsSha256 = hash;
  return { next: tool };
}

/** Step 4: the tool is not on the key's allowlist → 403 with a signed receipt. */
async function checkAllowlist(d: DeskContext, ctx: CallContext): Promise<Step<null>> {
  if (ctx.key.allow.includes(ctx.tool)) return { next: null };
  const { make, last } = d.signing.receiptMaker();
  const { remainingMc } = await d.ledger.money.refuseNotAllowed(ctx, make);
  return stop(refusal("TOOL_NOT_ALLOWED", "refused_not_allowed", { priceMc: ctx.priceMc, remainingMc }, { receipt: last()! }));
}

/** Step 5: the one conditional UPDATE; no room in the key's budget or its org's → 402 with a signed receipt naming which. */
async function reserve(d: DeskContext, ctx: CallContext): Promise<Step<{ reservationId: number; remainingMc: number }>> {
  const { make, last } = d.signing.receiptMaker();
  const r = await d.ledger.money.reserve(ctx, make);
  if (r.kind === "reserved") return { next: { reservationId: r.reservationId, remainingMc: r.remainingMc } };
  if (r.kind === "no_room" && r.alerts > 0) d.alertsWritten();
  if (r.kind === "key_gone") return stop(keyInvalid());
  const money = { priceMc: ctx.priceMc, remainingMc: r.remainingMc };
  if (r.kind === "rate_limited") return stop(refusal("TOO_MANY_FAILURES", "refused_rate_limited", money));
  return stop(refusal("BUDGET_EXHAUSTED", r.short === "key" ? "refused_budget" : "refused_org_budget", money, { receipt: last()! }));
}

/** How each upstream failure is refunded, and the code the agent gets. */
export const REFUNDS: Record<Exclude<CallOutcome["kind"], "ok">, { outcome: SettleOutcome; error: ErrorCode }> = {
  upstream_error: { outcome: "refunded_upstream_error", error: "UPSTREAM_ERROR" },
  timeout: { outcome: "refunded_timeout", error: "UPSTREAM_TIMEOUT" },
  args_refused: { outcome: "refunded_args_refused", error: "ARGS_REFUSED" },
  tool_failed: { outcome: "refunded_upstream_error", error: "TOOL_FAILED" },
  // The operator's credential failed (refused by the upstream, or a dead grant): never the agent's fault.
  auth_failed: { outcome: "refunded_upstream_error", error: "UPSTREAM_AUTH_FAILED" },
};

/**
 * Steps 6 and 7: the upstream's answer settles the reservation. Success keeps the charge and
 * binds the result's hash into the receipt; every failure refunds in the transaction that
 * writes its receipt.
 */
async function settle(d: DeskContext, ctx: CallContext, reservationId: number, answer: CallOutcome): Promise<ClearingOutcome> {
  let resultHash: string | null = null;
  if (answer.kind === "ok") {
    try {
      // What the agent gets and what its receipt binds come from one function (SPEC 9.3).
      const bound = bindResult(answer.result);
      if (bound === null) answer = { kind: "upstream_error" };
      else {
        answer = { kind: "ok", result: bound.result };
        resultHash = bound.sha256;
      }
    } catch (err) {
      // A result with no canonical form cannot be bound to a receipt: the agent does not pay.
      if (!(err instanceof CanonicalJsonError)) throw err;
      answer = { kind: "upstream_error" };
    }
  }
  const plan = answer.kind === "ok" ? null : REFUNDS[answer.kind];
  const outcome = plan?.outcome ?? "charged";
  const { make, last } = d.signing.receiptMaker();
  let settled: SettleResult;
  try {
    settled = await d.ledger.money.settle({ reservationId, outcome, resultSha256: resultHash, now: d.now() }, make);
  } catch (err) {
    // The settlement may or may not have committed: the agent gets 503 and not the result, and
    // the call is resolved once the ledger answers (unsettled.ts).
    if (err instanceof LedgerUnavailable) d.unsettled.add({ reservationId, keyId: ctx.key.id, result: answer.kind === "ok" ? answer.result : null });
    throw err;
  }
  if (settled.kind === "already_settled") {
    // The sweep refunded it as abandoned while the upstream was still answering: the agent
    // got no answer it pays for, and gets the abandoned receipt.
    const receipt = settled.receipt === null ? undefined : (JSON.parse(settled.receipt.envelope) as Envelope);
    return refusal(
      "UPSTREAM_TIMEOUT",
      settled.outcome ?? "refunded_abandoned",
      { priceMc: ctx.priceMc, remainingMc: settled.remainingMc },
      receipt ? { receipt } : {},
    );
  }
  if (settled.alerts > 0) d.alertsWritten();
  const money = { priceMc: ctx.priceMc, remainingMc: settled.remainingMc };
  if (answer.kind === "ok") return { status: statusOf("charged"), outcome, ...money, receipt: last()!, result: answer.result };
  return refusal(plan!.error, outcome, money, { receipt: last()! });
}

/** The key's own price for the tool, else the tool's default. */
function priceFor(key: DeskKey, tool: ToolEntry): number {
  return Object.hasOwn(key.prices, tool.name) ? key.prices[tool.name]! : tool.priceMc;
}

/** The tools on the key's allowlist that the desk serves, each at the key's price (GET /v1/tools, MCP tools/list). */
export function allowedTools(d: DeskContext, key: DeskKey): { tool: ToolEntry; priceMc: number }[] {
  const allow = new Set(key.allow);
  return d.catalog
    .all()
    .filter((t) => allow.has(t.name))
    .map((tool) => ({ tool, priceMc: priceFor(key, tool) }));
}

function plain(ctx: CallContext, outcome: PlainOutcome, error: ErrorCode): ClearingOutcome {
  return refusal(error, outcome, { priceMc: ctx.priceMc, remainingMc: Math.max(0, ctx.key.budgetMc - spentIn(ctx.key, ctx.period)) });
}

function keyInvalid(): ClearingOutcome {
  return refusal("KEY_INVALID", "refused_key_invalid", { priceMc: 0, remainingMc: null });
}
