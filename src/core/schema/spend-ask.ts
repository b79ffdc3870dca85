// The desk's spend ask as the approver receives it (`POST /v1/asks/spend`, on the desk's own
// listener only). Strict like the agents' asks: an unknown field is refused, every field has a
// rule and a code, and the card-number net runs first. Unlike them nothing is rewritten: the
// ask is stored exactly as the desk sent it, so the desk can hash what it sent and find the
// same `ask_sha256` in the person's signed decision.
//
// Order of checks (the first failure is the answer; one code per rule):
//  1. BODY_INVALID        the input is not a plain JSON object
//  2. CARD_NUMBER_REFUSED the net, over every key and string value (the preview included), but
//                         the value of params_sha256 when it is 64 lowercase hex: a SHA-256
//                         holds a Luhn-valid run of 13 or more digits about once in a hundred,
//                         and refusing those would refuse calls at random
//  3. FIELD_UNKNOWN, 4. FIELD_MISSING
//  5. the fields, in this order: approval_id, reservation_id, tool, price_mc, key_id, key_name,
//     org_id, org_name, params_sha256, preview_cut, preview (the preview's check needs both)
import type { SpendAsk } from "../asks.ts";
import type { ErrorCode } from "../errors.ts";
import { isApprovalId, isSafeRef } from "../ids.ts";
import { MAX_PRICE_MC } from "../money/millicents.ts";
import { sha256Hex } from "../receipt/hash.ts";
import { schemas } from "./ark.ts";
import { type AskCheck, checkShape, shapeOf } from "./ask.ts";
import { codePointCount } from "./url.ts";

/** The longest preview, in code points; the desk cuts the canonical JSON of the arguments here. */
export const PREVIEW_MAX = 500;
/** Key and org names as the desk's operator API takes them: at most 200 UTF-16 units. */
const NAME_MAX = 200;
/** A desk tool name: `{upstream}__{tool}` (upstream names and MCP tool names, SPEC 8.7). */
const DESK_TOOL = /^[a-z][a-z0-9-]{0,31}__[A-Za-z0-9_.-]{1,128}$/;
const HEX64 = /^[0-9a-f]{64}$/;

const spendShape = schemas(({ type }) =>
  shapeOf(
    type({
      "+": "reject",
      approval_id: "unknown",
      reservation_id: "unknown",
      tool: "unknown",
      price_mc: "unknown",
      key_id: "unknown",
      key_name: "unknown",
      org_id: "unknown",
      org_name: "unknown",
      params_sha256: "unknown",
      preview: "unknown",
      preview_cut: "unknown",
    }),
  ),
);

/** The net reads every value but a well-formed hash (see step 2 above). */
const withoutHash = (o: Record<string, unknown>): unknown =>
  typeof o.params_sha256 === "string" && HEX64.test(o.params_sha256) ? { ...o, params_sha256: "" } : o;

/** An id the desk minted (keys, orgs, reservations): the safe-ref form, never a card number. */
const isDeskId = (v: unknown): v is string => isSafeRef(v);

/** A name the desk's operator gave: well-formed text of at most 200 UTF-16 units; the recap escapes it. */
const isName = (v: unknown, minLength: number): v is string => typeof v === "string" && v.length >= minLength && v.length <= NAME_MAX && v.isWellFormed();

const isPrice = (v: unknown): v is number => Number.isSafeInteger(v) && (v as number) >= 1 && (v as number) <= MAX_PRICE_MC;

/**
 * The preview is the agent's words, cut or whole. Whole, it is the canonical JSON of the
 * arguments itself, so it must hash to params_sha256: the person then reads exactly what the
 * desk will pass on, and the recap says so.
 */
function previewRule(preview: unknown, cut: boolean, paramsSha256: string): boolean {
  if (typeof preview !== "string" || !preview.isWellFormed()) return false;
  const n = codePointCount(preview);
  if (n < 1 || n > PREVIEW_MAX) return false;
  return cut || sha256Hex(preview) === paramsSha256;
}

/** A spend ask as the approver receives it, checked in the order in this file's header. */
export function validateSpendAsk(input: unknown): AskCheck<SpendAsk> {
  const shapeCode = checkShape(input, spendShape(), withoutHash);
  if (shapeCode !== undefined) return { ok: false, code: shapeCode };
  const o = input as Record<string, unknown>;
  const rules: [boolean, ErrorCode][] = [
    [isApprovalId(o.approval_id), "APPROVAL_ID_INVALID"],
    [isDeskId(o.reservation_id), "RESERVATION_ID_INVALID"],
    [typeof o.tool === "string" && DESK_TOOL.test(o.tool), "TOOL_INVALID"],
    [isPrice(o.price_mc), "PRICE_INVALID"],
    [isDeskId(o.key_id), "KEY_ID_INVALID"],
    [isName(o.key_name, 0), "KEY_NAME_INVALID"],
    [isDeskId(o.org_id), "ORG_ID_INVALID"],
    [isName(o.org_name, 1), "ORG_NAME_INVALID"],
    [typeof o.params_sha256 === "string" && HEX64.test(o.params_sha256), "PARAMS_SHA256_INVALID"],
    [typeof o.preview_cut === "boolean", "PREVIEW_INVALID"],
  ];
  for (const [passed, code] of rules) if (!passed) return { ok: false, code };
  if (!previewRule(o.preview, o.preview_cut as boolean, o.params_sha256 as string)) return { ok: false, code: "PREVIEW_INVALID" };
  return {
    ok: true,
    ask: {
      kind: "spend",
      approval_id: o.approval_id as string,
      reservation_id: o.reservation_id as string,
      tool: o.tool as string,
      price_mc: o.price_mc as number,
      key_id: o.key_id as string,
      key_name: o.key_name as string,
      org_id: o.org_id as string,
      org_name: o.org_name as string,
      params_sha256: o.params_sha256 as string,
      preview: o.preview as string,
      preview_cut: o.preview_cut as boolean,
    },
  };
}
