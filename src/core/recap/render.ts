// The only producer of text a person reads about an ask. Every function here is pure: the
// stored ask, the time and the width in, lines out. No clock, no environment, no printing.
//
// Layout (SPEC.md section 5): a header line, one labelled field per row with the value at
// column 13, the approver's own `approving:` summary, and the command line. A value longer
// than its row continues on rows that begin `  >` and align with the value column, so agent
// text never begins a row and a fake `[ask ...]` block inside a reason cannot pass for a recap.
import type { AccountAsk, Ask, AskState, PayAsk, SpendAsk, StoredAsk } from "../asks.ts";
import { isApprovalId, isSafeRef } from "../ids.ts";
import { formatAmount } from "../money/format.ts";
import { formatMc, formatPrice } from "../money/millicents.ts";
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
const siteOfAsk = (ask: PayAsk | AccountAsk): string => siteOf(ask.kind === "pay" ? ask.checkout_url : ask.provider_url);
/** The arguments of a spend ask are the agent's words, whoever cut them. */
const SPEND_SHOWN = {
  whole: "whole (it hashes to params_sha256)",
  cut: "the start only (the desk cut it)",
} as const;
/** Who sent a spend ask: only the desk's own certificate reaches the route (SPEC 7.1). */
const DESK_SIDE = "the desk (its own certificate and listener)";
/** In a recap's `approving:` row a tool too long to show whole is named by the row above. */
const TOOL_ABOVE = "the tool above";

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

const pushField = (lines: string[], label: string, value: string, width: number): void => pushValue(lines, labelled(label), value, width);

// URLs keep each `%XX` whole on one row.
const pushUrl = (lines: string[], label: string, href: string, width: number): void => pushValue(lines, labelled(label), href, width, true);

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
export function summary(ask: Ask, room: number, host?: string, minSiteRoom = MIN_SITE_ROOM): string {
  if (ask.kind === "spend") return spendSummary(ask, room, { hint: false, tooLong: "cut" });
  host ??= siteOfAsk(ask);
  const head = ask.kind === "pay" ? `PAY ${formatAmount(ask.amount, ask.currency)} ${ask.currency} at ` : "ACCOUNT at ";
  const siteRoom = room - head.length;
  if (siteRoom < minSiteRoom) throw new RangeError("amount too long to show with its site");
  return head + fitHost(host, siteRoom);
}

/**
 * `SPEND 1,500 mc (1.5 cents) on everything__echo` in `room` columns at most (the cents only in
 * a recap's `approving:` row). The price is never cut; a tool that does not fit is cut at its end
 * after `...` in list and decision rows, or, in a recap, named as the tool of the row above,
 * which shows it whole. Every row fits for every price a spend ask may carry (up to 10^10 mc).
 */
function spendSummary(ask: SpendAsk, room: number, o: { hint: boolean; tooLong: "cut" | "above" }): string {
  // Prices and tool names are ASCII (the field rules): one column per character.
  const heads = o.hint ? [`SPEND ${formatPrice(ask.price_mc)} on `, `SPEND ${formatMc(ask.price_mc)} on `] : [`SPEND ${formatMc(ask.price_mc)} on `];
  for (const head of heads) if (head.length + ask.tool.length <= room) return head + ask.tool;
  if (o.tooLong === "above") {
    // Below 76 columns the cents give way before the tool's name does.
    for (const head of heads) if (head.length + TOOL_ABOVE.length <= room) return head + TOOL_ABOVE;
  } else {
    const head = heads[heads.length - 1]!;
    if (room - head.length >= 8) return `${head}${ask.tool.slice(0, room - head.length - 3)}...`;
  }
  throw new RangeError("price too long to show with its tool");
}

/** The recap a person approves on. Pure: (stored ask, now, width) -> lines, none wider than 76 columns. */
export function renderRecap(stored: StoredAsk, now: Date, width: number = RECAP_WIDTH): string[] {
  const w = lineWidth(width);
  const ask = stored.ask;
  const id = checkedId(ask.approval_id);
  const expires = expiryText(stored.expires_at, now, stored.state);
  if (ask.kind === "spend") return spendRecap(ask, id, expires, w);
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

/** The recap of the desk's spend ask: every row but the args is the approver's words or the desk's names. */
function spendRecap(ask: SpendAsk, id: string, expires: string, w: number): string[] {
  const head = `[ask ${id}] SPEND ${formatPrice(ask.price_mc)}`;
  // Below 76 columns the cents give way (the mc figure is the price; the cents only read it).
  const lines = [head.length <= w ? head : `[ask ${id}] SPEND ${formatMc(ask.price_mc)}`];
  pushField(lines, "tool:", ask.tool, w);
  pushOptional(lines, "key:", ask.key_name === "" ? undefined : ask.key_name, w);
  pushField(lines, "key id:", ask.key_id, w);
  pushField(lines, "org:", ask.org_name, w);
  pushField(lines, "org id:", ask.org_id, w);
  pushValue(lines, `${labelled("args:")}${AGENT_LABEL} `, ask.preview, w);
  lines.push(labelled("shown:") + (ask.preview_cut ? SPEND_SHOWN.cut : SPEND_SHOWN.whole));
  lines.push(labelled("asked by:") + DESK_SIDE);
  lines.push(labelled("expires:") + expires);
  lines.push(labelled("approving:") + spendSummary(ask, w - VALUE_COLUMN, { hint: true, tooLong: "above" }));
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
  if (state === "approved" && stored.ask.kind === "spend") lines.push("  the desk makes the call now; no step runs here");
  if (state === "failed") lines.push(`  the step failed (${failureRef(stored.ref)}); nothing is retried`);
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
  const room = w - head.length - tail.length;
  const ask = stored.ask;
  return (
    head + (ask.kind === "spend" ? spendSummary(ask, room, { hint: false, tooLong: "cut" }) : summary(ask, room, siteOfAsk(ask), MIN_LIST_SITE_ROOM)) + tail
  );
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
  | { kind: "already-decided"; id: string; state: "approved" | "denied" | "expired" | "failed" }
  /** approve/deny of an ask whose recap this console has not written (it writes it first). */
  | { kind: "decide-on-recap"; id: string }
  /** approve/deny while the step of an earlier approval runs. */
  | { kind: "step-running"; id: string }
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
    case "decide-on-recap":
      return `${checkedId(note.id)}: not decided: read its recap above, then type the decision again`;
    case "step-running":
      return `${checkedId(note.id)}: its step is running; its result comes here`;
    case "narrow-not-decided":
      return `${checkedId(note.id)}: not decided`;
    case "narrow-not-shown":
      return `${checkedId(note.id)}: not shown`;
  }
}

// --- the step behind an approval (approver --on-approve) ---

/** Rows of the step's stderr shown to the person; the rest is left out, and the rows say so. */
const STEP_TEXT_ROWS = 4;
const STEP_LABEL = "(from the step)";

function failureRef(ref: string | undefined): string {
  if (ref === undefined || !isSafeRef(ref)) throw new RangeError("a failed ask's ref is not of the safe form");
  return ref;
}

/** Why a step failed, as the approver observed it. `stderr` and `firstLine` are the step's words. */
export type StepFailure =
  | { ref: "exit_status"; exitCode: number | null; signal: string | null; stderr: string }
  | { ref: "bad_first_line"; firstLine: string; stderr: string }
  | { ref: "output_too_large"; stream: "stdout" | "stderr"; limitBytes: number }
  | { ref: "timeout"; deadline: string; stderr: string }
  | { ref: "spawn_failed"; code: string }
  | { ref: "interrupted" };

/** `K7Q2M4XZ3A: approving: PAY ...` and the promise that the step runs once. */
export function renderStepStarted(stored: StoredAsk, deadline: string): string[] {
  const id = checkedId(stored.ask.approval_id);
  const head = `${id}: approving: `;
  return [head + summary(stored.ask, RECAP_WIDTH - head.length), `  running the step (deadline ${printableAscii(deadline)}); it runs once, whatever happens`];
}

/** A value of the step's own (first line, stderr) on at most STEP_TEXT_ROWS rows, labelled as its words. */
function pushStepText(lines: string[], label: string, text: string): void {
  const rows: string[] = [];
  pushValue(rows, `${labelled(label)}${STEP_LABEL} `, text, RECAP_WIDTH);
  lines.push(...rows.slice(0, STEP_TEXT_ROWS));
  if (rows.length > STEP_TEXT_ROWS) lines.push(`  (${rows.length - STEP_TEXT_ROWS} more rows not shown)`);
}

const printableAscii = (text: string): string => {
  if (!/^[\x21-\x5b\x5d-\x7e]{1,32}$/.test(text)) throw new RangeError("not a short printable ASCII word");
  return text;
};

/**
 * What the person reads when an approval's step failed: the decision row, what happened in the
 * approver's words, the step's own words escaped and labelled, and what to do.
 */
export function renderStepFailure(stored: StoredAsk, failure: StepFailure): string[] {
  const id = checkedId(stored.ask.approval_id);
  const head = `${id}: failed: `;
  const lines = [head + summary(stored.ask, RECAP_WIDTH - head.length)];
  switch (failure.ref) {
    case "exit_status":
      lines.push(
        failure.signal !== null
          ? `  the step was killed by ${printableAscii(failure.signal)}`
          : `  the step exited with status ${Number.isInteger(failure.exitCode) ? failure.exitCode : "unknown"}`,
      );
      if (failure.stderr !== "") pushStepText(lines, "stderr:", failure.stderr);
      break;
    case "bad_first_line":
      lines.push("  the step exited 0, but its first line is not a ref of 1-64 [A-Za-z0-9_-]");
      pushStepText(lines, "line 1:", failure.firstLine);
      if (failure.stderr !== "") pushStepText(lines, "stderr:", failure.stderr);
      break;
    case "output_too_large":
      lines.push(`  the step wrote over ${failure.limitBytes} bytes to ${failure.stream}; it was stopped`);
      break;
    case "timeout":
      lines.push(`  the step ran past its deadline (${printableAscii(failure.deadline)}); it was stopped`);
      if (failure.stderr !== "") pushStepText(lines, "stderr:", failure.stderr);
      break;
    case "spawn_failed":
      lines.push(`  the step could not start (${printableAscii(failure.code)})`);
      break;
    case "interrupted":
      lines.push("  the step was interrupted: the approver stopped while it ran");
      break;
  }
  lines.push("  it is not run again: check by hand what it did");
  return lines;
}
