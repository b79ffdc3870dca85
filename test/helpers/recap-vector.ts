// Recap vector files (test/vectors/recap/*.vec): a strict grammar, like age's testkit.
//
//   key: "JSON string"      one header per line; `width` takes a JSON integer
//   ...
//   (one blank line)
//   exact expected line     every line of the recap, as printed, to the end of the file
//
// Keys: kind (pay|account|spend), id, merchant, amount, currency, card, checkout (pay); provider,
// identity (account); reservation, tool, price (a JSON integer), keyid, keyname, orgid, orgname,
// params, preview, cut (a JSON boolean) (spend); reason (pay, account); created, expires, now
// (ISO 8601 UTC); state (default pending); width (default 76); note (what the vector is about). An unknown, repeated, missing or
// misplaced key fails the parse. Header values are written with every non-ASCII or
// non-printable UTF-16 unit as \uXXXX, so what a vector holds is never in doubt.
import type { Ask, AskState, StoredAsk } from "../../src/core/asks.ts";

export type RecapVector = { stored: StoredAsk; now: Date; width: number; note: string; expected: string[] };

const REQUIRED = {
  pay: ["merchant", "amount", "currency", "card", "checkout"],
  account: ["provider"],
  spend: ["reservation", "tool", "price", "keyid", "keyname", "orgid", "orgname", "params", "preview", "cut"],
} as const;
const COMMON_KEYS = ["kind", "id", "created", "expires", "now"] as const;
const OPTIONAL = { pay: ["reason", "state", "width", "note"], account: ["identity", "reason", "state", "width", "note"], spend: ["state", "width", "note"] };
const STATES: readonly AskState[] = ["pending", "approved", "denied", "expired", "failed"];
const ISO = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{3})?Z$/;

/** A JSON string literal that holds only printable ASCII. */
export function asciiJson(value: string): string {
  let out = '"';
  for (let i = 0; i < value.length; i++) {
    const c = value.charCodeAt(i);
    if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else if (c >= 0x20 && c <= 0x7e) out += value[i];
    else out += `\\u${c.toString(16).padStart(4, "0")}`;
  }
  return `${out}"`;
}

function date(key: string, value: string): Date {
  if (!ISO.test(value)) throw new Error(`${key}: not an ISO 8601 UTC time`);
  return new Date(value);
}

export function parseRecapVector(text: string): RecapVector {
  if (text.includes("\r")) throw new Error("carriage return in vector");
  if (!text.endsWith("\n")) throw new Error("vector does not end with a newline");
  const lines = text.slice(0, -1).split("\n");
  const blank = lines.indexOf("");
  if (blank < 1) throw new Error("no header block before a blank line");
  const expected = lines.slice(blank + 1);
  if (expected.length === 0) throw new Error("no expected lines");
  const headers = new Map<string, unknown>();
  for (const line of lines.slice(0, blank)) {
    const m = /^([a-z]+): (.+)$/.exec(line);
    if (m === null) throw new Error(`malformed header line: ${JSON.stringify(line)}`);
    const [, key, raw] = m as unknown as [string, string, string];
    if (headers.has(key)) throw new Error(`repeated header: ${key}`);
    headers.set(key, JSON.parse(raw));
  }
  const kind = headers.get("kind");
  if (kind !== "pay" && kind !== "account" && kind !== "spend") throw new Error("kind must be pay, account or spend");
  const required = [...COMMON_KEYS, ...REQUIRED[kind]];
  const allowed = new Set<string>([...required, ...OPTIONAL[kind]]);
  for (const key of headers.keys()) if (!allowed.has(key)) throw new Error(`unknown header for ${kind}: ${key}`);
  for (const key of required) if (!headers.has(key)) throw new Error(`missing header: ${key}`);
  const str = (key: string): string => {
    const v = headers.get(key);
    if (typeof v !== "string") throw new Error(`${key}: not a JSON string`);
    return v;
  };
  const opt = (key: string): string | undefined => (headers.has(key) ? str(key) : undefined);
  const width = headers.has("width") ? headers.get("width") : 76;
  if (typeof width !== "number" || !Number.isInteger(width)) throw new Error("width: not an integer");
  const state = (opt("state") ?? "pending") as AskState;
  if (!STATES.includes(state)) throw new Error(`state: unknown ${state}`);
  const reason = opt("reason");
  const id = str("id");
  const int = (key: string): number => {
    const v = headers.get(key);
    if (!Number.isSafeInteger(v)) throw new Error(`${key}: not a JSON integer`);
    return v as number;
  };
  const bool = (key: string): boolean => {
    const v = headers.get(key);
    if (typeof v !== "boolean") throw new Error(`${key}: not a JSON boolean`);
    return v;
  };
  const ask: Ask =
    kind === "spend"
      ? {
          kind,
          approval_id: id,
          reservation_id: str("reservation"),
          tool: str("tool"),
          price_mc: int("price"),
          key_id: str("keyid"),
          key_name: str("keyname"),
          org_id: str("orgid"),
          org_name: str("orgname"),
          params_sha256: str("params"),
          preview: str("preview"),
          preview_cut: bool("cut"),
        }
      : kind === "pay"
        ? {
            kind,
            approval_id: id,
            merchant: str("merchant"),
            amount: str("amount"),
            currency: str("currency"),
            card_handle: str("card"),
            checkout_url: str("checkout"),
            ...(reason === undefined ? {} : { reason }),
          }
        : {
            kind,
            approval_id: id,
            provider_url: str("provider"),
            ...(headers.has("identity") ? { identity_handle: str("identity") } : {}),
            ...(reason === undefined ? {} : { reason }),
          };
  const stored: StoredAsk = { ask, created_at: date("created", str("created")), expires_at: date("expires", str("expires")), state };
  return { stored, now: date("now", str("now")), width, note: opt("note") ?? "", expected };
}

/** The vector text for a case: headers in a fixed order, a blank line, the lines. */
export function formatRecapVector(v: RecapVector): string {
  const { ask } = v.stored;
  const h: [string, string][] = [];
  if (v.note !== "") h.push(["note", asciiJson(v.note)]);
  h.push(["kind", asciiJson(ask.kind)], ["id", asciiJson(ask.approval_id)]);
  if (ask.kind === "spend") {
    h.push(["reservation", asciiJson(ask.reservation_id)], ["tool", asciiJson(ask.tool)], ["price", String(ask.price_mc)]);
    h.push(["keyid", asciiJson(ask.key_id)], ["keyname", asciiJson(ask.key_name)], ["orgid", asciiJson(ask.org_id)]);
    h.push(["orgname", asciiJson(ask.org_name)], ["params", asciiJson(ask.params_sha256)], ["preview", asciiJson(ask.preview)]);
    h.push(["cut", String(ask.preview_cut)]);
  } else if (ask.kind === "pay") {
    h.push(["merchant", asciiJson(ask.merchant)], ["amount", asciiJson(ask.amount)], ["currency", asciiJson(ask.currency)]);
    h.push(["card", asciiJson(ask.card_handle)], ["checkout", asciiJson(ask.checkout_url)]);
  } else {
    h.push(["provider", asciiJson(ask.provider_url)]);
    if (ask.identity_handle !== undefined) h.push(["identity", asciiJson(ask.identity_handle)]);
  }
  if (ask.kind !== "spend" && ask.reason !== undefined) h.push(["reason", asciiJson(ask.reason)]);
  h.push(["created", asciiJson(v.stored.created_at.toISOString())], ["expires", asciiJson(v.stored.expires_at.toISOString())]);
  h.push(["now", asciiJson(v.now.toISOString())]);
  if (v.stored.state !== "pending") h.push(["state", asciiJson(v.stored.state)]);
  if (v.width !== 76) h.push(["width", String(v.width)]);
  return `${h.map(([k, val]) => `${k}: ${val}`).join("\n")}\n\n${v.expected.join("\n")}\n`;
}
