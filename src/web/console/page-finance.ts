// Finance for one organization: its budget as a bar, setting it and its alert thresholds,
// top-ups and the signed budget records, the alerts with their delivery state, and a signed
// statement downloaded for a month or a day (checked offline with verify-receipt --receipts).
import { api, apiText, query } from "./api.ts";
import type { AlertView, OrgDetailView, OrgView } from "../../core/desk/wire.ts";
import { field, h, labelled, table } from "./dom.ts";
import { hint, mc, parseMc } from "../../core/money/millicents.ts";
import { attempt, budgetBar, mono, notify, orgSelect, type Page, rerender, section, when } from "./ui.ts";

type RecordLine = { record: { seq: number; type: string; issued_at: string; amount_mc: number; budget_mc: number | null; reference: string | null } };

/** Saves `text` as a file the browser downloads (the request needed the bearer header, so no plain link). */
function download(text: string, name: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

const thresholdsOf = (text: string): number[] =>
  text
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "")
    .map(Number);

function budgetCard(org: OrgDetailView): HTMLElement {
  const b = org.budget;
  if (b === null) return section("Budget", h("p", { class: "muted" }, "No organization budget: its keys are limited by their own budgets only."));
  if (b.budget_mc === null) return section("Budget", h("p", {}, `Unlimited; ${mc(b.spent_mc)} spent in ${b.period} (${b.reset}).`));
  return section(
    "Budget",
    h(
      "div",
      { class: "budget", "data-org-budget": org.org_id },
      budgetBar(b.spent_mc, b.budget_mc),
      h("div", { class: "mono small" }, `${mc(b.spent_mc)} of ${mc(b.budget_mc)}`),
      h("div", { class: "hint" }, `${hint(b.spent_mc)} of ${hint(b.budget_mc)}; period ${b.period} (${b.reset}); ${mc(b.remaining_mc ?? 0)} left`),
    ),
  );
}

export const financePage: Page = {
  id: "finance",
  title: "Finance",
  async render(root, params) {
    const orgs = await api<OrgView[]>("GET", "/admin/orgs");
    const orgId = params.get("org_id") ?? orgs[0]?.org_id ?? null;
    const chooser = h("form", { class: "row" }, labelled("Organization", orgSelect("org_id", orgs, orgId)));
    chooser.addEventListener("change", () => {
      location.hash = `#finance${query({ org_id: field(chooser, "org_id") })}`;
    });
    if (orgId === null) {
      root.append(section("Organization", h("p", { class: "muted" }, "No organization yet.")));
      return;
    }
    const q = encodeURIComponent(orgId);
    const [org, recordsText, alerts] = await Promise.all([
      api<OrgDetailView>("GET", `/admin/orgs/${q}`),
      apiText(`/admin/orgs/${q}/records`),
      api<AlertView[]>("GET", `/admin/alerts${query({ org_id: orgId })}`),
    ]);
    const records =
      recordsText === ""
        ? []
        : recordsText
            .trimEnd()
            .split("\n")
            .map((l) => JSON.parse(l) as RecordLine);

    const setForm = h(
      "form",
      { class: "row" },
      labelled("Budget (mc)", h("input", { name: "budget_mc", inputmode: "numeric", value: org.budget?.budget_mc ?? "", placeholder: "empty: unlimited" })),
      org.budget === null ? labelled("Reset", h("select", { name: "reset" }, ...["monthly", "daily", "none"].map((r) => h("option", { value: r }, r)))) : null,
      labelled("Alert thresholds (%)", h("input", { name: "alert_thresholds", value: org.alert_thresholds.join(", ") }), "e.g. 80, 100"),
      h("button", { type: "submit", class: "primary" }, "Save budget"),
    );
    setForm.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Saving the budget", async () => {
        const text = field(setForm, "budget_mc");
        const budget = text === "" ? null : parseMc(text);
        if (text !== "" && budget === null) throw new Error("the budget is not a whole number of mc");
        const body: Record<string, unknown> = { budget_mc: budget, alert_thresholds: thresholdsOf(field(setForm, "alert_thresholds")) };
        if (org.budget === null) body.reset = field(setForm, "reset");
        await api("PATCH", `/admin/orgs/${q}`, body);
        await rerender(financePage, root, params);
        notify(`Saved the budget of ${org.name}.`);
      });
    });

    const topupForm = h(
      "form",
      { class: "row" },
      labelled("Amount (mc)", h("input", { name: "amount_mc", inputmode: "numeric", required: true })),
      labelled(
        "Reference",
        h("input", { name: "reference", required: true, maxlength: 200, placeholder: "e.g. invoice-2026-11" }),
        "counted once per reference",
      ),
      h("button", { type: "submit", class: "primary" }, "Top up"),
    );
    topupForm.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Topping up", async () => {
        const amount = parseMc(field(topupForm, "amount_mc"));
        if (amount === null) throw new Error("the amount is not a whole number of mc");
        const r = await api<{ added: boolean }>("POST", `/admin/orgs/${q}/topups`, { amount_mc: amount, reference: field(topupForm, "reference") });
        await rerender(financePage, root, params);
        notify(r.added ? `Topped up ${org.name} by ${mc(amount)}.` : "That reference was already counted: nothing added.");
      });
    });

    const recordRows = records.map((r) =>
      h(
        "tr",
        {},
        h("td", {}, String(r.record.seq)),
        h("td", {}, r.record.type),
        h("td", { class: "nowrap" }, when(r.record.issued_at)),
        h("td", {}, r.record.amount_mc === 0 ? "—" : mc(r.record.amount_mc)),
        h("td", {}, r.record.budget_mc === null ? "unlimited" : mc(r.record.budget_mc)),
        h("td", {}, r.record.reference === null ? "—" : mono(r.record.reference)),
      ),
    );
    const alertRows = alerts.map((a) =>
      h(
        "tr",
        { "data-alert": a.alert_id },
        h("td", { class: "nowrap" }, when(a.created_at)),
        h("td", {}, a.scope === "org" ? "organization" : mono(a.key_id)),
        h("td", {}, `${a.threshold_pct}% of ${mc(a.budget_mc)}`),
        h("td", {}, a.period),
        h("td", {}, h("span", { class: `badge ${a.state}` }, a.state)),
        h("td", {}, String(a.attempts)),
        h("td", {}, a.last_error ?? "—"),
      ),
    );

    const statementForm = h(
      "form",
      { class: "row" },
      labelled(
        "Period",
        h("input", { name: "period", required: true, value: new Date().toISOString().slice(0, 7), pattern: "\\d{4}-\\d{2}(-\\d{2})?" }),
        "YYYY-MM, or YYYY-MM-DD",
      ),
      h("button", { type: "submit", class: "primary" }, "Download statement"),
    );
    statementForm.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Making the statement", async () => {
        const period = field(statementForm, "period");
        const text = await apiText(`/admin/statements${query({ org_id: orgId, period })}`);
        const closed = (JSON.parse(text) as { statement: { closed: boolean } }).statement.closed;
        download(text, `statement-${orgId}-${period}.json`, "application/json");
        notify(
          `Statement for ${period} downloaded${closed ? "" : " (the period is still open)"}. Check it offline: ask-only verify-receipt FILE --keys JWKS.json --receipts EXPORT.jsonl`,
        );
      });
    });

    root.append(
      section("Organization", chooser),
      budgetCard(org),
      section("Set the budget", setForm),
      section("Top up", topupForm),
      section(`Budget records (${records.length})`, table(["Seq", "Type", "Issued", "Amount", "Budget after", "Reference"], recordRows, "No record yet.")),
      section(
        `Alerts (${alerts.length})`,
        table(["Raised", "Budget of", "Threshold", "Period", "Delivery", "Failed attempts", "Last error"], alertRows, "No alert yet."),
      ),
      section("Statement", statementForm),
    );
  },
};
