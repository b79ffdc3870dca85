// Pieces every page uses: the status line, money and id cells, times, the page contract.
import { ApiError } from "./api.ts";
import { h } from "./dom.ts";
import { hint, mc } from "../../core/money/millicents.ts";

export type Page = {
  id: string;
  title: string;
  /** Draws the page into `root`; `params` come from the hash (`#keys?org_id=...`). */
  render(root: HTMLElement, params: URLSearchParams): Promise<void>;
};

let statusLine: HTMLElement | null = null;

export function setStatusLine(el: HTMLElement): void {
  statusLine = el;
}

/** Shows one line of news (ok) or of trouble (the desk's error code). */
export function notify(text: string, kind: "ok" | "error" = "ok"): void {
  if (!statusLine) return;
  statusLine.textContent = text;
  statusLine.className = `status ${kind}`;
  statusLine.setAttribute("role", kind === "error" ? "alert" : "status");
}

/** Runs an action and reports its failure as the desk's code (never a stack or a body). */
export async function attempt(what: string, act: () => Promise<void>): Promise<void> {
  try {
    await act();
  } catch (err) {
    const reason =
      err instanceof ApiError ? (err.pointsAt === undefined ? err.code : `${err.code} (${err.pointsAt})`) : err instanceof Error ? err.message : "error";
    notify(`${what} failed: ${reason}`, "error");
  }
}

/** An amount cell: exact mc in monospace with a cents/dollars hint. */
export function money(value: number): HTMLElement {
  return h("span", { class: "money" }, h("span", { class: "mono" }, mc(value)), h("small", { class: "hint" }, hint(value)));
}

export function mono(text: string, cls = ""): HTMLElement {
  return h("span", { class: `mono ${cls}`.trim(), title: text }, text);
}

/** `2026-11-30 12:34:56 UTC` from an RFC 3339 time (null shows as a dash). */
export function when(iso: string | null): string {
  if (iso === null) return "—";
  return `${iso.slice(0, 10)} ${iso.slice(11, 19)} UTC`;
}

export function section(title: string, ...children: (Node | null)[]): HTMLElement {
  return h("section", { class: "card" }, h("h2", {}, title), ...children);
}

/** A `datetime-local` value read as UTC, as the desk's RFC 3339 form (or undefined when empty). */
export function utcFromLocalInput(value: string): string | undefined {
  if (value === "") return undefined;
  const ms = Date.parse(`${value.length === 16 ? `${value}:00` : value}Z`);
  return Number.isFinite(ms) ? new Date(ms).toISOString() : undefined;
}

/** Draws a page again in place (after a change), keeping the hash's parameters. */
export async function rerender(page: Page, root: HTMLElement, params = new URLSearchParams(location.hash.split("?", 2)[1] ?? "")): Promise<void> {
  root.replaceChildren();
  await page.render(root, params);
}

/** A `<select>` of organizations, with an optional "all" entry. */
export function orgSelect(name: string, orgs: { org_id: string; name: string }[], selected: string | null, allLabel?: string): HTMLSelectElement {
  const select = h("select", { name });
  if (allLabel !== undefined) select.append(h("option", { value: "" }, allLabel));
  for (const o of orgs) select.append(h("option", { value: o.org_id, selected: o.org_id === selected }, `${o.name} — ${o.org_id}`));
  return select;
}

/** A budget bar: spent over budget, drawn with CSSOM (no inline style attribute under the CSP). */
export function budgetBar(spent: number, budget: number): HTMLElement {
  const share = budget === 0 ? 1 : Math.min(1, spent / budget);
  const fillEl = h("span", { class: `fill${share >= 0.9 ? " high" : ""}` });
  fillEl.style.width = `${(share * 100).toFixed(1)}%`;
  return h(
    "span",
    { class: "bar", role: "meter", "aria-valuemin": 0, "aria-valuemax": budget, "aria-valuenow": spent, title: `${Math.round(share * 100)}% used` },
    fillEl,
  );
}
