// The input of the MCP tool `request`: one flat object with a `verb` and optional fields, as
// JSON Schema for tools/list and as a parse into the fields of each verb. Flat on purpose: some
// clients refuse `oneOf`/`anyOf` at the top of a tool's input schema, and every client accepts
// this. The per-verb rules (which fields, which are required) are enforced by the parse below;
// the field values by the shared ask rules (core/schema/ask.ts).
import type { ErrorCode } from "../errors.ts";

export const VERBS = ["pay", "account_create", "status"] as const;
export type Verb = (typeof VERBS)[number];

const FIELDS = {
  approval_id: "status only: the approval_id returned by pay or account_create (10 characters, e.g. K7Q2M4XZ3A)",
  merchant: "pay: who is paid, as the person should read it (1-80 characters), e.g. Example Shop",
  amount: 'pay: a plain decimal string, e.g. "19.00"; no sign or exponent; at most the currency\'s decimals (EUR 2, JPY 0)',
  currency: "pay: ISO 4217 code, e.g. EUR",
  card_handle: "pay: the name of a card the person set up, e.g. card-2; never a card number",
  checkout_url: "pay: the https URL of the checkout page",
  provider_url: "account_create: the https URL of the provider where an account is wanted",
  identity_handle: "account_create, optional: the name of an identity the person set up, e.g. work; never personal data",
  reason: "pay and account_create, optional: why, in at most 500 characters; shown to the person marked as unchecked",
} as const;
export type RequestField = keyof typeof FIELDS;

/** Which fields each verb takes; the first list is required, the second optional. */
const VERB_FIELDS: Record<Verb, { required: readonly RequestField[]; optional: readonly RequestField[] }> = {
  pay: { required: ["merchant", "amount", "currency", "card_handle", "checkout_url"], optional: ["reason"] },
  account_create: { required: ["provider_url"], optional: ["identity_handle", "reason"] },
  status: { required: ["approval_id"], optional: [] },
};

/** The tool's input schema as tools/list shows it (JSON Schema draft 2020-12 subset every client reads). */
export const REQUEST_INPUT_SCHEMA = {
  type: "object",
  properties: {
    verb: {
      type: "string",
      enum: [...VERBS],
      description: "pay: ask to pay; account_create: ask to create an account; status: read the state of an ask",
    },
    ...Object.fromEntries(Object.entries(FIELDS).map(([name, description]) => [name, { type: "string", description }])),
  },
  required: ["verb"],
  additionalProperties: false,
} as const;

/**
 * The tool's structuredContent: `{approval_id, state, expires_at}` (pay, account_create),
 * `{approval_id, state, ref?}` (status), or `{error}` with isError. One flat object with every
 * field optional, because some clients check error results against the output schema too.
 */
export const REQUEST_OUTPUT_SCHEMA = {
  type: "object",
  properties: {
    approval_id: { type: "string", description: "the id of the ask; quote it to the person and to status" },
    state: { type: "string", enum: ["pending", "approved", "denied", "expired", "failed"] },
    expires_at: { type: "string", description: "pay and account_create: when the ask expires undecided (RFC 3339 UTC)" },
    ref: { type: "string", description: "status of an approved ask: the approver's reference; of a failed one: why its step failed" },
    error: { type: "string", description: "on failure (isError): the error code, e.g. PENDING_LIMIT" },
  },
  additionalProperties: false,
} as const;

export type ParsedRequest =
  | { verb: "pay"; fields: Record<string, unknown> }
  | { verb: "account_create"; fields: Record<string, unknown> }
  | { verb: "status"; approval_id: unknown };

export type RequestParse = { ok: true; request: ParsedRequest } | { ok: false; code: ErrorCode };

const isPlainObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value) && Object.getPrototypeOf(value) === Object.prototype;

/**
 * Splits the tool arguments into the fields of one verb. Refuses, in this order: a card number
 * anywhere (keys and values, before anything else, as the ask rules do), unknown fields, a
 * missing or unknown verb, fields of another verb (an agent may never choose its own
 * approval_id for pay or account_create), and missing required fields. Values are checked
 * afterwards by the ask rules. The card-number net is passed in (core/schema/ask.ts
 * `holdsCardNumber`) so that this module stays light: tools/list needs only the schema above.
 */
export function parseRequestArguments(args: unknown, options: { holdsCardNumber: (value: unknown) => boolean }): RequestParse {
  if (!isPlainObject(args)) return { ok: false, code: "BODY_INVALID" };
  if (options.holdsCardNumber(args)) return { ok: false, code: "CARD_NUMBER_REFUSED" };
  const keys = Object.keys(args);
  if (keys.some((k) => k !== "verb" && !Object.hasOwn(FIELDS, k))) return { ok: false, code: "FIELD_UNKNOWN" };
  if (!Object.hasOwn(args, "verb")) return { ok: false, code: "FIELD_MISSING" };
  const verb = args.verb;
  if (typeof verb !== "string" || !(VERBS as readonly string[]).includes(verb)) return { ok: false, code: "VERB_INVALID" };
  const spec = VERB_FIELDS[verb as Verb];
  const allowed = new Set<string>(["verb", ...spec.required, ...spec.optional]);
  if (keys.some((k) => !allowed.has(k))) return { ok: false, code: "FIELD_UNKNOWN" };
  if (spec.required.some((k) => !Object.hasOwn(args, k))) return { ok: false, code: "FIELD_MISSING" };
  if (verb === "status") return { ok: true, request: { verb, approval_id: args.approval_id } };
  const fields: Record<string, unknown> = {};
  for (const k of keys) if (k !== "verb") fields[k] = args[k];
  return { ok: true, request: { verb: verb as "pay" | "account_create", fields } };
}
