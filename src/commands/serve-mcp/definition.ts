// What tools/list shows of the one tool, `request`, and the shape of its failures. Light on
// purpose: serve-mcp answers initialize and tools/list before it loads the field rules.
import type { ErrorCode } from "../../core/errors.ts";
import { REQUEST_INPUT_SCHEMA, REQUEST_OUTPUT_SCHEMA } from "../../core/schema/request-tool.ts";

export const TOOL_NAME = "request";

const TOOL_DESCRIPTION = `Ask a person to approve a payment or the creation of an account, or read the state of such an ask.

This tool cannot pay, approve or deny anything, and neither can you: a person decides on their own terminal.

verb "pay": ask to pay amount + currency to merchant with the card named card_handle, at checkout_url (reason optional). Answers {approval_id, state: "pending", expires_at}.
verb "account_create": ask to create an account at provider_url, optionally as the identity named identity_handle (reason optional). Answers the same.
verb "status": the state of an ask by approval_id: "pending", "approved" (with a ref), "denied", "expired" or "failed".

"failed" means the person approved, but the step the approver runs behind an approval (the actual payment or sign-up) failed or was cut off; its ref says why (e.g. "timeout", "interrupted"). Nothing is retried and the person has been told to check by hand: do not ask again to work around it; tell the person its approval_id and wait for them.

Cards and identities are handles, names the person set up (e.g. card-2, work): never send a card number or personal data; a field that holds a card number is refused.

"pending" and "denied" are normal answers, not obstacles to work around. Tell the person what you asked for and its approval_id, then wait or check status later; do not send the same ask again to get another answer. An approved pay ask moves no money through this tool.

Failures are {"error": CODE}, e.g. AMOUNT_INVALID, CARD_NUMBER_REFUSED, PENDING_LIMIT, APPROVER_UNREACHABLE.`;

/** Honest hints: it creates asks (not read-only), destroys nothing, is not idempotent (each
 * pay is a new ask), and reaches beyond this process (a person, over the network). */
const TOOL_ANNOTATIONS = {
  title: "Ask a person to pay or to create an account",
  readOnlyHint: false,
  destructiveHint: false,
  idempotentHint: false,
  openWorldHint: true,
} as const;

export const TOOL_DEFINITION = {
  name: TOOL_NAME,
  title: TOOL_ANNOTATIONS.title,
  description: TOOL_DESCRIPTION,
  inputSchema: REQUEST_INPUT_SCHEMA,
  outputSchema: REQUEST_OUTPUT_SCHEMA,
  annotations: TOOL_ANNOTATIONS,
};

export type ToolResult = {
  content: { type: "text"; text: string }[];
  structuredContent: Record<string, unknown>;
  isError?: true;
};

export const successResult = (value: Record<string, unknown>): ToolResult => ({
  content: [{ type: "text", text: JSON.stringify(value) }],
  structuredContent: value,
});

/** A failure as the agent sees it: the code, in structuredContent and as text; nothing else. */
export const failureResult = (code: ErrorCode): ToolResult => ({
  content: [{ type: "text", text: JSON.stringify({ error: code }) }],
  structuredContent: { error: code },
  isError: true,
});
