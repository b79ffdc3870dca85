// The audit log: one row per call (outcome, price, upstream cost, margin, receipt), filtered by
// organization, key and time, with spend and margin per day drawn above it. The per-day sums are
// computed here from GET /admin/audit.
import { api, query } from "./api.ts";
import type { AuditView, KeyView, OrgView } from "../../core/desk/wire.ts";
import { field, h, labelled, table } from "./dom.ts";
import { perDay, spendChart } from "./chart.ts";
import { money, mono, orgSelect, type Page, section, utcFromLocalInput, when } from "./ui.ts";

/** The most rows one page asks for (the desk's own ceiling). */
const AUDIT_LIMIT = 10_000;

function outcomeBadge(outcome: string): HTMLElement {
  const cls = outcome === "charged" ? "good" : outcome.startsWith("refunded") ? "warn" : "bad";
  return h("span", { class: `badge ${cls}` }, outcome);
}

export const auditPage: Page = {
  id: "audit",
  title: "Audit",
  async render(root, params) {
    const orgId = params.get("org_id") ?? "";
    const keyId = params.get("key_id") ?? "";
    const since = params.get("since") ?? "";
    const until = params.get("until") ?? "";
    const [orgs, keys, rows] = await Promise.all([
      api<OrgView[]>("GET", "/admin/orgs"),
      api<KeyView[]>("GET", `/admin/keys${query({ org_id: orgId })}`),
      api<AuditView[]>("GET", `/admin/audit${query({ org_id: orgId, key_id: keyId, since: utcFromLocalInput(since), limit: String(AUDIT_LIMIT) })}`),
    ]);
    const untilIso = utcFromLocalInput(until);
    const shown = untilIso === undefined ? rows : rows.filter((r) => r.at < untilIso);

    const keySel = h("select", { name: "key_id" }, h("option", { value: "" }, "All keys"));
    for (const k of keys) keySel.append(h("option", { value: k.key_id, selected: k.key_id === keyId }, `${k.name || "(unnamed)"} — ${k.key_id}`));
    const form = h(
      "form",
      { class: "row filters" },
      labelled("Organization", orgSelect("org_id", orgs, orgId, "All organizations")),
      labelled("Key", keySel),
      labelled("From (UTC)", h("input", { name: "since", type: "datetime-local", value: since })),
      labelled("Until (UTC)", h("input", { name: "until", type: "datetime-local", value: until })),
      h("button", { type: "submit", class: "primary" }, "Apply"),
    );
    form.addEventListener("submit", (ev) => {
      ev.preventDefault();
      const q = query({ org_id: field(form, "org_id"), key_id: field(form, "key_id"), since: field(form, "since"), until: field(form, "until") });
      location.hash = `#audit${q}`;
    });

    const charged = shown.filter((r) => r.outcome === "charged");
    const sum = (f: (r: AuditView) => number) => charged.reduce((a, r) => a + f(r), 0);
    const totals = h(
      "div",
      { class: "totals" },
      h("div", {}, h("span", { class: "label" }, "Calls"), h("span", { class: "mono big" }, String(shown.length))),
      h("div", {}, h("span", { class: "label" }, "Charged"), h("span", { class: "mono big" }, String(charged.length))),
      h("div", {}, h("span", { class: "label" }, "Spend"), money(sum((r) => r.price_mc))),
      h("div", {}, h("span", { class: "label" }, "Upstream cost"), money(sum((r) => r.upstream_cost_mc))),
      h("div", {}, h("span", { class: "label" }, "Margin"), money(sum((r) => r.margin_mc))),
    );

    const tableRows = [...shown]
      .reverse()
      .map((r) =>
        h(
          "tr",
          { "data-receipt": r.receipt_id ?? "" },
          h("td", { class: "nowrap" }, when(r.at)),
          h("td", {}, mono(r.org_id, "small")),
          h("td", {}, mono(r.key_id, "small")),
          h("td", {}, mono(r.tool)),
          h("td", {}, outcomeBadge(r.outcome)),
          h("td", { class: "mono" }, String(r.http_status)),
          h("td", {}, money(r.price_mc)),
          h("td", {}, money(r.upstream_cost_mc)),
          h("td", {}, money(r.margin_mc)),
          h(
            "td",
            {},
            r.receipt_id === null
              ? h("span", { class: "muted" }, "—")
              : h("a", { href: `#receipts?id=${encodeURIComponent(r.receipt_id)}`, class: "mono small" }, r.receipt_id),
          ),
        ),
      );
    root.append(
      section("Filter", form),
      section("Spend and margin per day (UTC)", totals, spendChart(perDay(shown))),
      section(
        `Calls (${shown.length}${rows.length === AUDIT_LIMIT ? `, the first ${AUDIT_LIMIT} from the start time` : ""}, newest first)`,
        table(
          ["Time", "Organization", "Key", "Tool", "Outcome", "HTTP", "Price", "Upstream cost", "Margin", "Receipt"],
          tableRows,
          "No call in this selection.",
        ),
      ),
    );
  },
};
