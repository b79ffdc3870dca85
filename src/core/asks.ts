// The shapes of an ask, shared by serve-mcp, the approver, the ask ledger and the recap.
// Every field here has already passed the core field rules (see core/schema/ask.ts and
// core/schema/spend-ask.ts).

/**
 * `failed`: the person approved, and the step behind the approval (`approver --on-approve`)
 * failed or was interrupted; nothing is retried.
 */
export type AskState = "pending" | "approved" | "denied" | "expired" | "failed";

/** A pay ask as validated: URLs hold the WHATWG parser's `href`, text is NFC. */
export type PayAsk = {
  kind: "pay";
  approval_id: string;
  merchant: string;
  amount: string;
  currency: string;
  card_handle: string;
  checkout_url: string;
  reason?: string;
};

export type AccountAsk = {
  kind: "account";
  approval_id: string;
  provider_url: string;
  identity_handle?: string;
  reason?: string;
};

/**
 * The desk's ask to let one paid call above a key's threshold through. Only the desk sends it
 * (over its own listener, with its own certificate); stored exactly as sent.
 */
export type SpendAsk = {
  kind: "spend";
  approval_id: string;
  /** The desk's own name for the reservation that holds the price while the person reads. */
  reservation_id: string;
  /** The desk's tool name, `{upstream}__{tool}`. */
  tool: string;
  /** The price of the call, in millicents (1 cent = 1,000 mc). */
  price_mc: number;
  key_id: string;
  key_name: string;
  org_id: string;
  org_name: string;
  /** SHA-256 (hex) of the canonical JSON of the call's arguments, as the desk binds them. */
  params_sha256: string;
  /** The canonical JSON of the arguments, cut by the desk when `preview_cut`: the agent's words. */
  preview: string;
  preview_cut: boolean;
};

export type Ask = PayAsk | AccountAsk | SpendAsk;

/** The kinds of ask, which are also the approver's routes: `POST /v1/asks/{kind}`. */
export type AskKind = Ask["kind"];

/** Which side asked: an agent (serve-mcp, the client CA) or the desk (its own CA and listener). */
export type AskSide = "agent" | "desk";

export const sideOf = (kind: AskKind): AskSide => (kind === "spend" ? "desk" : "agent");

/** An ask as the ledger holds it: the ask, when it was made and expires, and its decision. */
export type StoredAsk = {
  ask: Ask;
  created_at: Date;
  expires_at: Date;
  /**
   * The state at the time the ledger was read (pending past expires_at reads as expired). An
   * approved ask whose step is still running reads pending, also past expires_at.
   */
  state: AskState;
  decided_at?: Date;
  /**
   * On approved asks: `demo-` + 8 lowercase hex for the reference approver, or the step's first
   * line; none on an approved spend ask (the desk makes the call). On failed asks: why
   * (FAILURE_REFS).
   */
  ref?: string;
  /** When the step behind the person's approval started (set once `approve ID` ran it). */
  step_started_at?: Date;
};

/** Why an approval's step failed, as the ask's `ref` (`failed` asks only). */
export const FAILURE_REFS = ["exit_status", "bad_first_line", "output_too_large", "timeout", "spawn_failed", "interrupted"] as const;
export type FailureRef = (typeof FAILURE_REFS)[number];

/**
 * The stored ask as one JSON object: `verb` (its kind) and its fields as stored. Its RFC 8785
 * form is what a decision record's `ask_sha256` covers and what a step reads on stdin.
 */
export function askObject(ask: Ask): Record<string, unknown> {
  const { kind, ...fields } = ask;
  return { verb: kind, ...fields };
}
