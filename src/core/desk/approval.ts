// Calls that wait for a person (SPEC 8.3, "Calls above a key's threshold"). A call priced above
// its key's approve_above_mc is checked as any other and its price reserved; the desk then sends
// the approver a spend ask and answers 202 APPROVAL_PENDING with the approval id, calling no
// upstream. The agent repeats the call with that id: pending → 202 again; approved → the one
// repeat that claims the approval goes on to the upstream (clearing.ts) and its receipt binds
// the person's signed decision; denied or expired → refunded, the receipt binding that decision;
// other arguments → 409, no upstream call. The desk acts only on a decision signed by a key its
// operator pinned, on the very ask it sent, for the reservation it holds.
import { askObject } from "../asks.ts";
import { readSignedDecision } from "../decision/verify.ts";
import type { DecisionRecord } from "../decision/record.ts";
import type { ErrorCode } from "../errors.ts";
import { isApprovalId, mintApprovalId } from "../ids.ts";
import { type ApprovalEnvelope, CanonicalJsonError, canonicalJson, type Envelope, hashJson, paramsSha256 } from "../receipt/index.ts";
import { PREVIEW_MAX, validateSpendAsk } from "../schema/spend-ask.ts";
import type { ToolEntry } from "./catalog.ts";
import type { DeskContext } from "./context.ts";
import { type ClearingOutcome, type PlainOutcome, refusal, type SettleOutcome } from "./outcomes.ts";
import type { CallContext, SpendAskBody } from "./ports.ts";
import { type ApprovalHold, type DeskKey, spentIn } from "./records.ts";

/** Whether a call at `priceMc` waits for a person: priced above the key's threshold (null: never). */
export function needsApproval(key: DeskKey, priceMc: number): boolean {
  return key.approveAboveMc !== null && priceMc > key.approveAboveMc;
}

/** The desk's name for a reservation in its spend ask (1–64 of [A-Za-z0-9_-], as the ask's rules want). */
export const reservationRef = (reservationId: number) => `res_${reservationId}`;

/**
 * What the person reads of the arguments: their canonical JSON, cut after PREVIEW_MAX code points
 * (iterated by code point, so a surrogate pair is never split).
 */
export function previewOf(canonical: string): { preview: string; preview_cut: boolean } {
  let points = 0;
  let units = 0;
  for (const ch of canonical) {
    if (points === PREVIEW_MAX) return { preview: canonical.slice(0, units), preview_cut: true };
    points++;
    units += ch.length;
  }
  return { preview: canonical, preview_cut: false };
}

type Money = { priceMc: number; remainingMc: number };

/** The key's room left in its current period, as read at the start of the call. */
const remainingOf = (ctx: CallContext): number => Math.max(0, ctx.key.budgetMc - spentIn(ctx.key, ctx.period));

/**
 * Sends the spend ask for a call whose price is reserved (`reservationId`) and answers 202. An
 * ask that does not reach the approver undoes the reservation (release): a card number in what
 * the person would read is the agent's 400; anything else is 503 APPROVER_UNAVAILABLE.
 */
export async function askApproval(
  d: DeskContext,
  ctx: CallContext,
  reserved: { reservationId: number; remainingMc: number },
  args: unknown,
): Promise<ClearingOutcome> {
  const { reservationId } = reserved;
  const org = await d.ledger.orgs.get(ctx.key.orgId);
  const ask: SpendAskBody = {
    approval_id: mintApprovalId(),
    reservation_id: reservationRef(reservationId),
    tool: ctx.tool,
    price_mc: ctx.priceMc,
    key_id: ctx.key.id,
    key_name: ctx.key.name,
    org_id: ctx.key.orgId,
    org_name: org?.name ?? "",
    params_sha256: ctx.paramsSha256,
    ...previewOf(canonicalJson(args)),
  };
  // The approver's own rules, before anything leaves: a refused ask is never sent.
  const checked = validateSpendAsk(ask);
  if (!checked.ok) return unasked(d, ctx, reservationId, checked.code, "the desk's own check");
  const sent = d.approver === null ? { kind: "unavailable" as const, why: "no approver is configured" } : await d.approver.approver.ask(ask);
  if (sent.kind === "refused") return unasked(d, ctx, reservationId, sent.code, "the approver");
  if (sent.kind === "unavailable") {
    d.log(`call of ${ctx.tool} (reservation ${reservationId}): the approver could not be asked (${sent.why}); nothing reserved`);
    return release(d, ctx, reservationId, "refused_approver_unavailable");
  }
  const asked = { approvalId: ask.approval_id, askSha256: hashJson(askObject({ kind: "spend", ...ask })), expiresAt: sent.expiresAt };
  if (!(await d.ledger.money.awaitApproval(reservationId, asked))) {
    // Settled while the ask was on its way (it cannot be, within the abandon margin): the person's decision would hold nothing.
    d.log(`reservation ${reservationId}: settled before its spend ask ${ask.approval_id} was recorded`);
    return refusal("APPROVER_UNAVAILABLE", "refused_approver_unavailable", { priceMc: ctx.priceMc, remainingMc: remainingOf(ctx) });
  }
  return refusal(
    "APPROVAL_PENDING",
    "approval_pending",
    { priceMc: ctx.priceMc, remainingMc: reserved.remainingMc },
    { approval: { approvalId: ask.approval_id, expiresAt: sent.expiresAt } },
  );
}

/** A spend ask that was refused (by the desk's check or the approver's): the reservation is undone. */
function unasked(d: DeskContext, ctx: CallContext, reservationId: number, code: ErrorCode, by: string): Promise<ClearingOutcome> {
  // A card number in the arguments the person would read is the agent's doing; any other rule
  // is the desk's (a price above what an ask carries): the operator reads which in the log.
  if (code === "CARD_NUMBER_REFUSED") return release(d, ctx, reservationId, "refused_card_number");
  d.log(`call of ${ctx.tool} (reservation ${reservationId}): ${by} refused its spend ask (${code}); nothing reserved`);
  return release(d, ctx, reservationId, "refused_approver_unavailable");
}

async function release(d: DeskContext, ctx: CallContext, reservationId: number, outcome: PlainOutcome): Promise<ClearingOutcome> {
  const { remainingMc } = await d.ledger.money.release(reservationId, ctx, outcome);
  return refusal(outcome === "refused_card_number" ? "CARD_NUMBER_REFUSED" : "APPROVER_UNAVAILABLE", outcome, { priceMc: ctx.priceMc, remainingMc });
}

/** What a repeat of an approved call goes on with: the reservation it claimed and the tool to call. */
export type Claimed = { reservationId: number; tool: ToolEntry };

/**
 * A repeat of a call with `x-clearing-approval` (MCP: `_meta["io.ask-only/approval"]`), after
 * the key check: the approval must be this key's, for this tool and these arguments; then its
 * state decides. Only a repeat that claims an approved decision goes on (to the upstream);
 * every other one is answered here. The failure limit is not checked again: the call was
 * counted when its price was reserved.
 */
export async function repeatApproved(
  d: DeskContext,
  ctx: CallContext,
  approvalId: string,
  args: unknown,
): Promise<{ done: ClearingOutcome } | { next: Claimed }> {
  const done = (o: ClearingOutcome) => ({ done: { ...o, approval: { approvalId, ...o.approval } } });
  const plain = async (outcome: PlainOutcome, code: ErrorCode, extra: { receipt?: Envelope } = {}) => {
    await d.ledger.money.recordPlainRefusal(ctx, outcome);
    return done(refusal(code, outcome, { priceMc: ctx.priceMc, remainingMc: remainingOf(ctx) }, extra));
  };
  if (!isApprovalId(approvalId)) return done(refusal("APPROVAL_ID_INVALID", "refused_request", { priceMc: 0, remainingMc: remainingOf(ctx) }));
  const hold = await d.ledger.money.approval(approvalId);
  // Another key's approval answers as none: approval ids cannot be probed across keys.
  if (hold === null || hold.keyId !== ctx.key.id) return plain("refused_approval_unknown", "APPROVAL_UNKNOWN");
  ctx.priceMc = hold.priceMc;
  ctx.upstreamCostMc = d.catalog.tool(hold.tool)?.upstreamCostMc ?? 0;
  if (ctx.tool !== hold.tool || hashOf(args) !== hold.paramsSha256) return plain("refused_approval_mismatch", "APPROVAL_MISMATCH");
  ctx.paramsSha256 = hold.paramsSha256;
  if (hold.settled !== null) return settledAnswer(ctx, hold, done, plain);
  if (hold.stage === "claimed") return plain("refused_approval_used", "APPROVAL_USED");
  // Still the operator's rules: a tool gone or taken off the allowlist meanwhile is not called.
  const tool = d.catalog.tool(hold.tool);
  if (tool === undefined) return plain("refused_tool_unknown", "TOOL_UNKNOWN");
  if (!ctx.key.allow.includes(hold.tool)) {
    const { make, last } = d.signing.receiptMaker();
    const { remainingMc } = await d.ledger.money.refuseNotAllowed(ctx, make);
    return done(refusal("TOOL_NOT_ALLOWED", "refused_not_allowed", { priceMc: ctx.priceMc, remainingMc }, { receipt: last()! }));
  }
  const money: Money = { priceMc: ctx.priceMc, remainingMc: remainingOf(ctx) };
  const read = await readDecision(d, hold);
  switch (read.kind) {
    case "pending":
      return done(refusal("APPROVAL_PENDING", "approval_pending", money, { approval: { approvalId, expiresAt: hold.expiresAt } }));
    case "unavailable":
      d.log(`approval ${approvalId}: the approver could not be asked for its decision (${read.why})`);
      return done(refusal("APPROVER_UNAVAILABLE", "refused_approver_unavailable", money));
    case "bad":
      // Never acted on: a forged, mangled or foreign decision holds the reservation until it expires.
      d.log(`approval ${approvalId}: the approver's decision is not acted on: ${read.why}`);
      return done(refusal("APPROVER_BAD_ANSWER", "refused_approver_bad_answer", money));
    case "decided":
      break;
  }
  if (read.decision === "approved") {
    if (await d.ledger.money.claimApproval(hold.reservationId, read.approval, d.now())) return { next: { reservationId: hold.reservationId, tool } };
    return plain("refused_approval_used", "APPROVAL_USED");
  }
  const outcome: SettleOutcome = read.decision === "denied" ? "refunded_denied" : "refunded_expired";
  const { make, last } = d.signing.receiptMaker();
  const settled = await d.ledger.money.settle({ reservationId: hold.reservationId, outcome, resultSha256: null, now: d.now(), approval: read.approval }, make);
  if (settled.kind === "settled") {
    return done(
      refusal(
        read.decision === "denied" ? "APPROVAL_DENIED" : "APPROVAL_EXPIRED",
        outcome,
        { priceMc: ctx.priceMc, remainingMc: settled.remainingMc },
        { receipt: last()! },
      ),
    );
  }
  // Another repeat settled it first: answer as it was settled.
  const now = await d.ledger.money.approval(approvalId);
  return settledAnswer(ctx, now!, done, plain);
}

type Done = (o: ClearingOutcome) => { done: ClearingOutcome };
type Plain = (outcome: PlainOutcome, code: ErrorCode, extra?: { receipt?: Envelope }) => Promise<{ done: ClearingOutcome }>;

/** A repeat of a call whose reservation is settled: the same answer each time, with its receipt. */
function settledAnswer(ctx: CallContext, hold: ApprovalHold, done: Done, plain: Plain): Promise<{ done: ClearingOutcome }> | { done: ClearingOutcome } {
  const { outcome, receipt: record } = hold.settled!;
  const receipt = record === null ? undefined : (JSON.parse(record.envelope) as Envelope);
  const extra = receipt === undefined ? {} : { receipt };
  const money = { priceMc: ctx.priceMc, remainingMc: remainingOf(ctx) };
  if (outcome === "refunded_denied") return done(refusal("APPROVAL_DENIED", outcome, money, extra));
  // Refunded before anyone used the approval: nobody decided in time, or the approved call was not repeated in time.
  if (outcome === "refunded_expired" || hold.stage === "awaiting") return done(refusal("APPROVAL_EXPIRED", outcome, money, extra));
  return plain("refused_approval_used", "APPROVAL_USED", extra);
}

/** params_sha256 of a repeat's arguments, or null when they have no canonical form (so they match nothing). */
function hashOf(args: unknown): string | null {
  try {
    return paramsSha256(args);
  } catch (err) {
    if (err instanceof CanonicalJsonError) return null;
    throw err;
  }
}

type DecisionRead =
  | { kind: "pending" }
  | { kind: "unavailable"; why: string }
  | { kind: "bad"; why: string }
  | { kind: "decided"; decision: "approved" | "denied" | "expired"; approval: ApprovalEnvelope };

/**
 * The person's decision on `hold`, as the desk may act on it: signed by a pinned key (read
 * again once when it names a kid the desk does not know: a rotation), on the ask the desk sent
 * (ask_sha256), binding the call it holds (the spend block). A decision the desk's clock has not
 * reached yet reads as pending, so a receipt is never issued before the decision it binds.
 */
export async function readDecision(d: DeskContext, hold: ApprovalHold): Promise<DecisionRead> {
  if (d.approver === null) return { kind: "unavailable", why: "no approver is configured" };
  const answer = await d.approver.approver.decision(hold.approvalId);
  if (answer.kind === "pending") return answer;
  if (answer.kind === "unavailable") return answer;
  if (answer.kind === "bad_answer") return { kind: "bad", why: answer.why };
  let read = readSignedDecision(answer.envelope, d.approver.keys.current());
  if ("unknownKid" in read && read.unknownKid !== undefined) {
    const fresh = d.approver.keys.reload();
    if (fresh !== null) read = readSignedDecision(answer.envelope, fresh);
  }
  if ("problem" in read) return { kind: "bad", why: `its signature: ${read.problem}` };
  const problem = holdProblem(hold, read.record);
  if (problem !== null) return { kind: "bad", why: problem };
  if (Date.parse(read.record.decided_at) > d.now()) return { kind: "pending" };
  return { kind: "decided", decision: read.record.decision as "approved" | "denied" | "expired", approval: read.approval };
}

/** The first way `r` is not the person's decision on the ask sent for `hold`, or null. */
function holdProblem(hold: ApprovalHold, r: DecisionRecord): string | null {
  if (r.approval_id !== hold.approvalId) return "it is the decision on another ask";
  if (r.verb !== "spend" || r.spend === null) return `it is a decision on a ${r.verb} ask`;
  if (r.ask_sha256 !== hold.askSha256) return "it names an ask the desk did not send (ask_sha256 differs)";
  const held = {
    reservation_id: reservationRef(hold.reservationId),
    tool: hold.tool,
    price_mc: hold.priceMc,
    key_id: hold.keyId,
    org_id: hold.orgId,
    params_sha256: hold.paramsSha256,
  };
  const differ = (Object.keys(held) as (keyof typeof held)[]).filter((f) => r.spend![f] !== held[f]);
  if (differ.length > 0) return `it binds another call (${differ.join(", ")} differ)`;
  if (r.decision === "failed") return "a spend ask cannot fail";
  return null;
}
