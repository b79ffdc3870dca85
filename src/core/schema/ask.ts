// The two wire objects an approver accepts: a pay ask and an account ask. Strict: an unknown
// field is refused, so an agent cannot smuggle a field that some later reader might trust.
//
// Order of checks (the first failure is the answer; one code per rule):
//  1. BODY_INVALID        the input is not a plain JSON object
//  2. CARD_NUMBER_REFUSED the card-number net finds a number in any key or string value,
//                         unknown fields and nested values included (so the value is never
//                         stored, shown or echoed, whatever else is wrong with the ask)
//  3. FIELD_UNKNOWN       a key the object does not have
//  4. FIELD_MISSING       a required key is absent
//  5. the fields, in this order:
//     pay:     approval_id, merchant, currency, amount, card_handle, checkout_url, reason
//     account: approval_id, provider_url, identity_handle, reason
//     (currency comes before amount because the amount's decimals depend on it)
// Text is NFC-normalised and URLs are replaced by their parsed href in the returned ask.

import type { AccountAsk, PayAsk } from "../asks.ts";
import type { ErrorCode } from "../errors.ts";
import { isApprovalId } from "../ids.ts";
import { checkAmount, DEFAULT_MAX_AMOUNT } from "../money/amount.ts";
import { containsCardNumber } from "../money/card-net.ts";
import { isCurrencyCode } from "../money/currency.ts";
import { isArkErrors, schemas } from "./ark.ts";
import { checkAskUrl, codePointCount } from "./url.ts";

export type AskCheck<T> = { ok: true; ask: T } | { ok: false; code: ErrorCode };
type FieldCheck = { ok: true; value: string } | { ok: false; code: ErrorCode };

export const MERCHANT_MAX = 80;
export const REASON_MAX = 500;
const HANDLE = /^[a-z][a-z0-9-]{0,31}$/;

/** A strict object shape: its check, and the keys it has (an error on any other key is FIELD_UNKNOWN). */
export type Shape = { check: (value: unknown) => unknown; keys: ReadonlySet<string> };

/** The shape of `check`, an arktype object type. */
export const shapeOf = (check: ((value: unknown) => unknown) & { props: readonly { key: string | symbol }[] }): Shape => ({
  check,
  keys: new Set(check.props.map((p) => String(p.key))),
});

const shapes = schemas(({ type }) => ({
  pay: shapeOf(
    type({
      "+": "reject",
      approval_id: "unknown",
      merchant: "unknown",
      amount: "unknown",
      currency: "unknown",
      card_handle: "unknown",
      checkout_url: "unknown",
      "reason?": "unknown",
    }),
  ),
  account: shapeOf(
    type({
      "+": "reject",
      approval_id: "unknown",
      provider_url: "unknown",
      "identity_handle?": "unknown",
      "reason?": "unknown",
    }),
  ),
}));

const ok = (value: string): FieldCheck => ({ ok: true, value });
const fail = (code: ErrorCode): { ok: false; code: ErrorCode } => ({ ok: false, code });

/**
 * True when any key or string value in the input, at any depth, holds a card number by the rule
 * in core/money/card-net.ts. Run it over a whole request before any other check.
 */
export function holdsCardNumber(input: unknown): boolean {
  const seen = new Set<object>();
  const stack: unknown[] = [input];
  while (stack.length > 0) {
    const value = stack.pop();
    if (typeof value === "string") {
      if (containsCardNumber(value)) return true;
    } else if (typeof value === "object" && value !== null && !seen.has(value)) {
      seen.add(value);
      for (const [key, inner] of Object.entries(value)) {
        if (containsCardNumber(key)) return true;
        stack.push(inner);
      }
    }
  }
  return false;
}

// --- the field rules, without the net (validate* runs it once over the whole input first) ---

function approvalIdRule(v: unknown): FieldCheck {
  return isApprovalId(v) ? ok(v) : fail("APPROVAL_ID_INVALID");
}

// Merchant: printable text. C0/C1 controls are refused (a name has no newline or ESC); format
// characters such as ZWNJ are kept, since some scripts need them, and the recap escapes them.
// Lone surrogates are refused: they would not survive storage as UTF-8 unchanged.
function merchantRule(v: unknown): FieldCheck {
  if (typeof v !== "string" || !v.isWellFormed()) return fail("MERCHANT_INVALID");
  const text = v.normalize("NFC");
  const n = codePointCount(text);
  if (n < 1 || n > MERCHANT_MAX) return fail("MERCHANT_INVALID");
  if (/\p{Cc}/u.test(text)) return fail("MERCHANT_INVALID");
  // Empty-looking names (only spaces, marks or invisible characters) name nobody.
  if (!/[\p{L}\p{N}\p{P}\p{S}]/u.test(text)) return fail("MERCHANT_INVALID");
  return ok(text);
}

function currencyRule(v: unknown): FieldCheck {
  return isCurrencyCode(v) ? ok(v) : fail("CURRENCY_INVALID");
}

function amountRule(v: unknown, currency: string, maxAmount: string): FieldCheck {
  const code = checkAmount(v, currency, maxAmount);
  return code === undefined ? ok(v as string) : fail(code);
}

function handleRule(v: unknown, code: ErrorCode): FieldCheck {
  return typeof v === "string" && HANDLE.test(v) ? ok(v) : fail(code);
}

function urlRule(v: unknown): FieldCheck {
  const url = checkAskUrl(v);
  if (!url.ok) return url;
  // The parser can decode a host (`%34` is 4): the href gets the net too.
  return containsCardNumber(url.href) ? fail("CARD_NUMBER_REFUSED") : ok(url.href);
}

// Reason: any text up to 500 characters after NFC; controls and newlines are allowed (the recap
// escapes them), lone surrogates are not.
function reasonRule(v: unknown): FieldCheck {
  if (typeof v !== "string" || !v.isWellFormed()) return fail("REASON_INVALID");
  const text = v.normalize("NFC");
  return codePointCount(text) <= REASON_MAX ? ok(text) : fail("REASON_INVALID");
}

// --- whole objects ---

function isPlainObject(v: unknown): v is Record<string, unknown> {
  if (typeof v !== "object" || v === null || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

/**
 * Steps 1-4 of the order above. `netted` is what the card-number net reads: the input itself,
 * unless a caller leaves out a value whose own rule it has already checked (spend-ask.ts).
 */
export function checkShape(input: unknown, shape: Shape, netted: (input: Record<string, unknown>) => unknown = (i) => i): ErrorCode | undefined {
  if (!isPlainObject(input)) return "BODY_INVALID";
  if (holdsCardNumber(netted(input))) return "CARD_NUMBER_REFUSED";
  const result = shape.check(input);
  if (!isArkErrors(result)) return undefined;
  if (result.some((e) => !shape.keys.has(String(e.path[0])))) return "FIELD_UNKNOWN";
  if (result.some((e) => e.code === "required")) return "FIELD_MISSING";
  return "BODY_INVALID";
}

/**
 * A pay ask as the approver receives it, checked in the order in this file's header.
 * `limits.maxAmount` (major units, default DEFAULT_MAX_AMOUNT) must be a positive plain decimal:
 * anything else throws RangeError, a configuration fault to catch at start-up.
 */
export function validatePayAsk(input: unknown, limits: { maxAmount?: string } = {}): AskCheck<PayAsk> {
  const shapeCode = checkShape(input, shapes().pay);
  if (shapeCode !== undefined) return fail(shapeCode);
  const o = input as Record<string, unknown>;
  const approvalId = approvalIdRule(o.approval_id);
  if (!approvalId.ok) return approvalId;
  const merchant = merchantRule(o.merchant);
  if (!merchant.ok) return merchant;
  const currency = currencyRule(o.currency);
  if (!currency.ok) return currency;
  const amount = amountRule(o.amount, currency.value, limits.maxAmount ?? DEFAULT_MAX_AMOUNT);
  if (!amount.ok) return amount;
  const cardHandle = handleRule(o.card_handle, "CARD_HANDLE_INVALID");
  if (!cardHandle.ok) return cardHandle;
  const checkoutUrl = urlRule(o.checkout_url);
  if (!checkoutUrl.ok) return checkoutUrl;
  const ask: PayAsk = {
    kind: "pay",
    approval_id: approvalId.value,
    merchant: merchant.value,
    amount: amount.value,
    currency: currency.value,
    card_handle: cardHandle.value,
    checkout_url: checkoutUrl.value,
  };
  if (Object.hasOwn(o, "reason")) {
    const reason = reasonRule(o.reason);
    if (!reason.ok) return reason;
    ask.reason = reason.value;
  }
  return { ok: true, ask };
}

/** An account ask as the approver receives it, checked in the order in this file's header. */
export function validateAccountAsk(input: unknown): AskCheck<AccountAsk> {
  const shapeCode = checkShape(input, shapes().account);
  if (shapeCode !== undefined) return fail(shapeCode);
  const o = input as Record<string, unknown>;
  const approvalId = approvalIdRule(o.approval_id);
  if (!approvalId.ok) return approvalId;
  const providerUrl = urlRule(o.provider_url);
  if (!providerUrl.ok) return providerUrl;
  const ask: AccountAsk = { kind: "account", approval_id: approvalId.value, provider_url: providerUrl.value };
  if (Object.hasOwn(o, "identity_handle")) {
    const identity = handleRule(o.identity_handle, "IDENTITY_HANDLE_INVALID");
    if (!identity.ok) return identity;
    ask.identity_handle = identity.value;
  }
  if (Object.hasOwn(o, "reason")) {
    const reason = reasonRule(o.reason);
    if (!reason.ok) return reason;
    ask.reason = reason.value;
  }
  return { ok: true, ask };
}
