// The only producer of text a person reads about an ask. Every function here is pure: the
// stored ask, the time and the width in, lines out. No clock, no environment, no printing.
//
// Layout (SPEC.md section 5): a header line, one labelled field per row with the value at
// column 13, the approver's own `approving:` summary, and the command line. A value longer
// than its row continues on rows that begin `  >` and align with the value column, so agent
// text never begins a row and a fake `[ask ...]` block inside a reason cannot pass for a recap.
import type { Ask, AskState, StoredAsk } from "../asks.ts";
import { isApprovalId, isSafeRef } from "../ids.ts";
import { formatAmount } from "../money/format.ts";
import { siteOf } from "../schema/url.ts";
import { displayRows, sanitizeAtoms } from "./sanitize.ts";
import { textWidth } from "./width.ts";

/** No rendered line is wider than this many columns (width.ts counts them). */
export const RECAP_WIDTH = 76;
/** Narrower than this, the approver shows renderNarrowNotice instead of a recap. */
const MIN_RECAP_WIDTH = 60;
/** Agent words are labelled as such, before the reason. */
export const AGENT_LABEL = "(from the agent, unchecked)";
/** What stands before a shortened host: the end of a host names who owns it. */
const HOST_CUT = "....";

const VALUE_COLUMN = 13;
const CONTINUATION = "  >".padEnd(VALUE_COLUMN);
// The site in a summary always keeps at least this much room (HOST_CUT + 12 characters), and
// in a list row, which also holds the expiry, at least HOST_CUT + 8 (`....evil.com`).
const MIN_SITE_ROOM = 16;
const MIN_LIST_SITE_ROOM = 12;
const MAX_LISTED_IDS = 10;
const PLAIN_HOST = /^[\x21-\x5b\x5d-\x7e]*$/;

// The id is printed outside any field and typed back by the person: it must be the minted form.
function checkedId(id: string): string {
  if (!isApprovalId(id)) throw new RangeError("approval_id is not 10 Crockford base32 characters");
  return id;
}

function lineWidth(width: number): number {
  if (!Number.isInteger(width) || width < MIN_RECAP_WIDTH) throw new RangeError(`width must be an integer >= ${MIN_RECAP_WIDTH}`);
  return Math.min(width, RECAP_WIDTH);
}

const labelled = (label: string): string => `  ${label}`.padEnd(VALUE_COLUMN);

/** The site of an ask: the host of its stored (already WHATWG-parsed) URL, ASCII, IDNs in punycode. */
const siteOfAsk = (ask: Ask): string => siteOf(ask.kind === "pay" ? ask.checkout_url : ask.provider_url);

/**
 * A host in at most `room` columns. One that does not fit is shown by its end after `....`,
 * from the start of a label when that still shows two labels whole (`....evil.com`), else from
 * inside one (`....mple.com`), never from a dot: cutting its end instead would hide who owns it
 * (`shop.example.evil.com` must never read as `shop.example`).
 */
export function fitHost(host: string, room: number): string {
  // The usual case: a parsed host is printable ASCII, shown as it is, one column a character.
  if (PLAIN_HOST.test(host)) {
    if (host.length <= room) return host;
    let k = host.length - (room - HOST_CUT.length);
    if (host[k] === ".") k++;
    else if (host[k - 1] !== ".") {
      const dot = host.indexOf(".", k);
      if (dot !== -1 && host.indexOf(".", dot + 1) !== -1) k = dot + 1;
    }
    return HOST_CUT + host.slice(k);
  }
  const { atoms, widths } = sanitizeAtoms(host);
  let total = 0;
  for (const w of widths) total += w;
  if (total <= room) return atoms.join("");
  let k = atoms.length;
  let used = 0;
  while (k > 0 && used + widths[k - 1]! <= room - HOST_CUT.length) used += widths[--k]!;
  if (atoms[k] === ".") k++;
  else if (k > 0 && atoms[k - 1] !== ".") {
    const dot = atoms.indexOf(".", k);
    if (dot !== -1 && atoms.indexOf(".", dot + 1) !== -1) k = dot + 1;
  }
  return HOST_CUT + atoms.slice(k).join("");
}

/**
 * When an ask expires, in the approver's words: `expired` once `now` reaches `expires_at` (or the
 * ledger says so); under a minute, whole seconds rounded up (`in 45 s`, 1-60); under an hour,
 * whole minutes rounded down (`in 9 min`, never more time than is left); under 48 hours,
 * `in 2 h` or `in 2 h 5 min`; beyond, whole days (`in 3 d`); all rounded down.
 */
export function expiryText(expiresAt: Date, now: Date, state: AskState = "pending"): string {
  const ms = expiresAt.getTime() - now.getTime();
  if (Number.isNaN(ms)) throw new RangeError("expires_at and now must be valid dates");
  if (state === "expired" || ms <= 0) return "expired";
  if (ms < 60_000) return `in ${Math.ceil(ms / 1000)} s`;
  const minutes = Math.floor(ms / 60_000);
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours >= 48) return `in ${Math.floor(hours / 24)} d`;
  const rest = minutes % 60;
  return rest === 0 ? `in ${hours} h` : `in ${hours} h ${rest} min`;
}

/**
 * A value on its rows: the first after `prefix`, the others after the `  >` continuation,
 * aligned with the value column. Cuts fall between atoms only (see sanitize.ts): an escape or a
 * character with its marks is never split, and the rows joined give back the whole value.
 */
function pushValue(lines: string[], prefix: string, value: string, width: number, percentAtoms = false): void {
  const rows = displayRows(value, width - textWidth(prefix), width - VALUE_COLUMN, percentAtoms);
  if (rows.length === 0) {
    lines.push(prefix.trimEnd());
    return;
  }
  lines.push(prefix + rows[0]);
  for (let i = 1; i < rows.length; i++) lines.push(CONTINUATION + rows[i]);
}

const pushField = (lines: string[], label: string, value: string, width: number): void =>
  pushValue(lines, labelled(label), value, width);

// URLs keep each `%XX` whole on one row.
const pushUrl = (lines: string[], label: string, href: string, width: number): void =>
  pushValue(lines, labelled(label), href, width, true);

function pushOptional(lines: string[], label: string, value: string | undefined, width: number, lead = ""): void {
  // An absent optional field says so in the approver's words; agent text always has the lead.
  if (value === undefined) lines.push(`${labelled(label)}(none)`);
  else pushValue(lines, labelled(label) + lead, value, width);
}

/**
 * `PAY 19.00 EUR at shop.example` or `ACCOUNT at provider.example`, in `room` columns at most.
 * An amount is never cut: one too long to leave the site its room is refused (every row fits
 * for amounts of up to 14 characters as shown, i.e. below 10^9 in any currency).
 */
export function summary(ask: Ask, room: number, host: string = siteOfAsk(ask), minSiteRoom = MIN_SITE_ROOM): string {
  const head = ask.kind === "pay" ? `PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency} at ` : "ACCOUNT at ";
  const siteRoom = room - head.length;
  if (siteRoom < minSiteRoom) throw new RangeError("amount too long to show with its site");
  return head + fitHost(host, siteRoom);
}

/** The recap a person approves on. Pure: (stored ask, now, width) -> lines, none wider than 76 columns. */
export function renderRecap(stored: StoredAsk, now: Date, width: number = RECAP_WIDTH): string[] {
  const w = lineWidth(width);
  const ask = stored.ask;
  const id = checkedId(ask.approval_id);
  const expires = expiryText(stored.expires_at, now, stored.state);
  const host = siteOfAsk(ask);
  const lines: string[] = [];
  if (ask.kind === "pay") {
    lines.push(`[ask ${id}] PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency}`);
    pushField(lines, "to:", ask.merchant, w);
    pushField(lines, "card:", ask.card_handle, w);
    lines.push(labelled("site:") + fitHost(host, w - VALUE_COLUMN));
    pushUrl(lines, "checkout:", ask.checkout_url, w);
  } else {
    const head = `[ask ${id}] ACCOUNT at `;
    lines.push(head + fitHost(host, w - head.length));
    pushUrl(lines, "provider:", ask.provider_url, w);
    pushOptional(lines, "identity:", ask.identity_handle, w);
    lines.push(labelled("site:") + fitHost(host, w - VALUE_COLUMN));
  }
  pushOptional(lines, "reason:", ask.reason, w, `${AGENT_LABEL} `);
  lines.push(labelled("expires:") + expires);
  // Built from the stored amount, currency and site only: nothing the agent wrote in words.
  lines.push(labelled("approving:") + summary(ask, w - VALUE_COLUMN, host));
  lines.push(`  approve ${id}   or   deny ${id}`);
  return lines;
}

/** The answer to a decision: `K7Q2M4XZ3A: approved: PAY 19.00 EUR at shop.example` (+ the ref line). */
export function renderDecision(stored: StoredAsk): string[] {
  const id = checkedId(stored.ask.approval_id);
  const { state } = stored;
  if (state === "pending") throw new RangeError("the ask is not decided");
  const head = `${id}: ${state}: `;
  const lines = [head + summary(stored.ask, RECAP_WIDTH - head.length)];
  if (state === "approved" && stored.ref !== undefined) {
    // A ref is shown to the person: the safe form only, never one holding a card number.
    if (!isSafeRef(stored.ref)) throw new RangeError("ref is not of the form ^[A-Za-z0-9_-]{1,64}$ or holds a card number");
    lines.push(stored.ref.startsWith("demo-") ? `  ${stored.ref}: no money moved (reference approver)` : `  ref: ${stored.ref}`);
  }
  return lines;
}

/** One row of the console's `list`: id, summary, expiry. No merchant and no reason. */
export function renderListLine(stored: StoredAsk, now: Date, width: number = RECAP_WIDTH): string {
  const w = lineWidth(width);
  const id = checkedId(stored.ask.approval_id);
  const expires = expiryText(stored.expires_at, now, stored.state);
  const tail = expires === "expired" ? "  expired" : `  expires ${expires}`;
  const head = `${id}  `;
  return head + summary(stored.ask, w - head.length - tail.length, siteOfAsk(stored.ask), MIN_LIST_SITE_ROOM) + tail;
}

/** What the approver shows instead of recaps on a terminal narrower than 76 columns (rows <= 24 columns). */
export function renderNarrowNotice(ids: string[], columns: number): string[] {
  const lines = [`asks waiting: ${ids.length}`];
  for (const id of ids.slice(0, MAX_LISTED_IDS)) lines.push(`  ${checkedId(id)}`);
  if (ids.length > MAX_LISTED_IDS) lines.push(`  and ${ids.length - MAX_LISTED_IDS} more`);
  lines.push(`recaps need ${RECAP_WIDTH} columns;`);
  lines.push(Number.isInteger(columns) && columns >= 0 && columns < RECAP_WIDTH ? `this terminal has ${columns}.` : "this terminal has fewer.");
  lines.push("widen it to decide.");
  return lines;
}

/** Everything else the console says about asks, so the approver never composes such text itself. */
export type ConsoleNote =
  | { kind: "already-decided"; id: string; state: "approved" | "denied" | "expired" }
  | { kind: "expired"; id: string }
  | { kind: "unknown-id"; id: string }
  | { kind: "not-an-id" }
  | { kind: "none-pending" }
  /** On a terminal too narrow for the recap: said before the narrow notice. */
  | { kind: "narrow-not-decided"; id: string }
  | { kind: "narrow-not-shown"; id: string };

export function renderConsoleNote(note: ConsoleNote): string {
  switch (note.kind) {
    case "already-decided":
      return `${checkedId(note.id)}: already decided (${note.state})`;
    case "expired":
      return `${checkedId(note.id)}: expired, nothing changed`;
    case "unknown-id":
      return `${checkedId(note.id)}: no such ask`;
    case "not-an-id":
      // What was typed is not echoed: it may be pasted agent text.
      return "not an ask id: ids are 10 characters, 0-9 and A-Z without I L O U";
    case "none-pending":
      return "no pending asks";
    case "narrow-not-decided":
      return `${checkedId(note.id)}: not decided`;
    case "narrow-not-shown":
      return `${checkedId(note.id)}: not shown`;
  }
}
