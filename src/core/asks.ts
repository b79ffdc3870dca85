// The shapes of an ask, shared by serve-mcp, the approver, the ask ledger and the recap.
// Every field here has already passed the core field rules (see core/schema/ask.ts).

export type AskState = "pending" | "approved" | "denied" | "expired";

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

export type Ask = PayAsk | AccountAsk;

/** An ask as the ledger holds it: the ask, when it was made and expires, and its decision. */
export type StoredAsk = {
  ask: Ask;
  created_at: Date;
  expires_at: Date;
  /** The state at the time the ledger was read (pending past expires_at reads as expired). */
  state: AskState;
  decided_at?: Date;
  /** Only on approved asks: `demo-` + 8 lowercase hex for the reference approver. */
  ref?: string;
};
