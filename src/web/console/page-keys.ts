// Keys: create (the secret shown once, with a copy button), edit budget, allowlist, per-key
// prices and expiry, rotate, revoke; the budget used as a bar.
import { api, query } from "./api.ts";
import type { KeyView, OrgView, ToolView } from "../../core/desk/wire.ts";
import { field, fill, h, labelled, table } from "./dom.ts";
import { confirmButton } from "./dom.ts";
import { hint, mc, parseMc } from "../../core/money/millicents.ts";
import { attempt, budgetBar, money, mono, notify, orgSelect, type Page, rerender, section, utcFromLocalInput, when } from "./ui.ts";

function status(k: KeyView): { text: string; cls: string } {
  if (k.revoked_at !== null) return { text: "revoked", cls: "bad" };
  if (k.expires_at !== null && Date.parse(k.expires_at) <= Date.now()) return { text: "expired", cls: "bad" };
  return { text: "active", cls: "good" };
}

/** The one place a key secret is ever shown: until "Done", never stored by the console. */
function secretPanel(host: HTMLElement, keyId: string, secret: string, what: string): void {
  const input = h("input", { class: "mono secret", readonly: true, value: secret, "aria-label": "Key secret", spellcheck: "false" });
  const copy = h("button", { type: "button", class: "primary" }, "Copy");
  copy.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(secret);
      notify("Secret copied to the clipboard.");
    } catch {
      input.select();
      notify("The browser refused the clipboard: the secret is selected, copy it with the keyboard.", "error");
    }
  });
  const done = h("button", { type: "button", class: "quiet" }, "Done");
  done.addEventListener("click", () => fill(host));
  fill(
    host,
    h(
      "section",
      { class: "card secret-panel", "data-secret-for": keyId },
      h("h2", {}, `${what}: ${keyId}`),
      h("p", {}, "Shown once. The desk keeps only a hash of it: copy it now and hand it to the agent."),
      h("div", { class: "row" }, input, copy, done),
    ),
  );
}

function allowBoxes(tools: ToolView[], allowed: Set<string>): HTMLElement {
  if (tools.length === 0) return h("p", { class: "muted" }, "No tools yet: register an upstream first.");
  return h(
    "div",
    { class: "checks" },
    ...tools.map((t) =>
      h("label", { class: "check" }, h("input", { type: "checkbox", name: "allow", value: t.name, checked: allowed.has(t.name) }), mono(t.name)),
    ),
  );
}

const checkedTools = (form: HTMLFormElement) => Array.from(form.querySelectorAll<HTMLInputElement>('input[name="allow"]:checked')).map((i) => i.value);

function mcInput(name: string, value: string, placeholder = ""): HTMLInputElement {
  return h("input", { name, inputmode: "numeric", class: "mono num", value, placeholder, autocomplete: "off" });
}

/** The approval threshold as typed: empty is "never" (null), else whole mc; undefined when it is neither. */
function thresholdOf(text: string): number | null | undefined {
  if (text.trim() === "") return null;
  return parseMc(text) ?? undefined;
}

const THRESHOLD_HINT = "a call priced above this waits for a person on the approver; empty: never";

function editPanel(host: HTMLElement, k: KeyView, tools: ToolView[], done: () => Promise<void>): void {
  const priceRows = tools.map((t) =>
    h(
      "tr",
      {},
      h("td", {}, mono(t.name)),
      h("td", {}, money(t.price_mc)),
      h("td", {}, mcInput(`price:${t.name}`, Object.hasOwn(k.prices, t.name) ? String(k.prices[t.name]) : "", "tool default")),
    ),
  );
  const form = h(
    "form",
    { class: "stack" },
    h(
      "div",
      { class: "row" },
      labelled("Name", h("input", { name: "name", value: k.name, maxlength: 200 })),
      labelled("Budget (mc)", mcInput("budget_mc", String(k.budget_mc)), "1 cent = 1,000 mc"),
      labelled("Expires (UTC)", h("input", { name: "expires_at", type: "datetime-local", value: k.expires_at ? k.expires_at.slice(0, 16) : "" })),
      labelled("Approve above (mc)", mcInput("approve_above_mc", k.approve_above_mc === null ? "" : String(k.approve_above_mc), "never"), THRESHOLD_HINT),
      labelled("Reset", h("input", { value: k.reset, readonly: true, class: "mono" }), "fixed when the key is made"),
    ),
    h("h3", {}, "Allowed tools"),
    allowBoxes(tools, new Set(k.allow)),
    h("h3", {}, "Prices for this key"),
    table(["Tool", "Tool default", "Key price (mc)"], priceRows, "No tools."),
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", class: "primary" }, "Save changes"),
      h("button", { type: "button", class: "quiet", onclick: () => fill(host) }, "Cancel"),
    ),
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await attempt("Saving the key", async () => {
      const budget = parseMc(field(form, "budget_mc"));
      if (budget === null) throw new Error("the budget is not a whole number of mc");
      const prices: Record<string, number> = {};
      for (const t of tools) {
        const text = field(form, `price:${t.name}`);
        if (text === "") continue;
        const p = parseMc(text);
        if (p === null) throw new Error(`the price of ${t.name} is not a whole number of mc`);
        prices[t.name] = p;
      }
      const expires = field(form, "expires_at");
      const threshold = thresholdOf(field(form, "approve_above_mc"));
      if (threshold === undefined) throw new Error("the approval threshold is not a whole number of mc");
      await api("PATCH", `/admin/keys/${encodeURIComponent(k.key_id)}`, {
        ...(field(form, "name") === "" ? {} : { name: field(form, "name") }),
        budget_mc: budget,
        allow: checkedTools(form),
        prices,
        expires_at: expires === "" ? null : (utcFromLocalInput(expires) ?? null),
        approve_above_mc: threshold,
      });
      notify(`Saved key ${k.key_id}.`);
      await done();
    });
  });
  fill(host, section(`Edit key ${k.key_id}`, form));
  host.scrollIntoView({ block: "nearest" });
}

export const keysPage: Page = {
  id: "keys",
  title: "Keys",
  async render(root, params) {
    const orgId = params.get("org_id");
    const [orgs, keys, allTools] = await Promise.all([
      api<OrgView[]>("GET", "/admin/orgs"),
      api<KeyView[]>("GET", `/admin/keys${query({ org_id: orgId ?? undefined })}`),
      api<ToolView[]>("GET", "/admin/tools"),
    ]);
    const tools = allTools.filter((t) => t.active);
    const orgName = new Map(orgs.map((o) => [o.org_id, o.name]));
    const secretHost = h("div", {});
    const editHost = h("div", {});
    const again = () => rerender(keysPage, root, params);

    const budgetHint = h("small", { class: "hint" }, "1 cent = 1,000 mc");
    const budgetInput = mcInput("budget_mc", "", "e.g. 100000");
    budgetInput.addEventListener("input", () => {
      const v = parseMc(budgetInput.value);
      budgetHint.textContent = v === null ? "1 cent = 1,000 mc" : `${(v / 100_000).toFixed(5).replace(/0+$/, "").replace(/\.$/, "")} dollars`;
    });
    const create = h(
      "form",
      { class: "stack" },
      h(
        "div",
        { class: "row" },
        labelled("Organization", orgSelect("org_id", orgs, orgId)),
        labelled("Name", h("input", { name: "name", maxlength: 200, placeholder: "optional" })),
        h("label", {}, h("span", { class: "label" }, "Budget (mc)"), budgetInput, budgetHint),
        labelled(
          "Reset",
          h(
            "select",
            { name: "reset" },
            h("option", { value: "none" }, "none"),
            h("option", { value: "daily" }, "daily (UTC)"),
            h("option", { value: "monthly" }, "monthly (UTC)"),
          ),
        ),
        labelled("Expires (UTC)", h("input", { name: "expires_at", type: "datetime-local" }), "optional"),
        labelled("Approve above (mc)", mcInput("approve_above_mc", "", "never"), THRESHOLD_HINT),
      ),
      h("h3", {}, "Allowed tools"),
      allowBoxes(tools, new Set()),
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary", disabled: orgs.length === 0 }, "Create key")),
    );
    create.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Creating the key", async () => {
        const budget = parseMc(field(create, "budget_mc"));
        if (budget === null) throw new Error("the budget is not a whole number of mc");
        const expires = utcFromLocalInput(field(create, "expires_at"));
        const threshold = thresholdOf(field(create, "approve_above_mc"));
        if (threshold === undefined) throw new Error("the approval threshold is not a whole number of mc");
        const name = field(create, "name");
        const made = await api<{ key_id: string; secret: string }>("POST", "/admin/keys", {
          org_id: field(create, "org_id"),
          ...(name === "" ? {} : { name }),
          budget_mc: budget,
          reset: field(create, "reset"),
          allow: checkedTools(create),
          ...(expires === undefined ? {} : { expires_at: expires }),
          ...(threshold === null ? {} : { approve_above_mc: threshold }),
        });
        await again();
        secretPanelIn(root, made.key_id, made.secret, "New key");
        notify(`Created key ${made.key_id}.`);
      });
    });

    const filter = orgSelect("filter_org", orgs, orgId, "All organizations");
    filter.addEventListener("change", () => {
      location.hash = filter.value === "" ? "#keys" : `#keys?org_id=${encodeURIComponent(filter.value)}`;
    });

    const rows = keys.map((k) => {
      const st = status(k);
      const live = st.text === "active";
      const rotate = confirmButton(
        "Rotate",
        "Confirm rotate",
        async () =>
          attempt("Rotating the key", async () => {
            const r = await api<{ key_id: string; secret: string }>("POST", `/admin/keys/${encodeURIComponent(k.key_id)}/rotate`);
            await again();
            secretPanelIn(root, r.key_id, r.secret, "Rotated key");
            notify(`Rotated key ${k.key_id}: the old secret no longer works.`);
          }),
        "quiet",
      );
      const revoke = confirmButton("Revoke", "Confirm revoke", async () =>
        attempt("Revoking the key", async () => {
          await api("POST", `/admin/keys/${encodeURIComponent(k.key_id)}/revoke`);
          notify(`Revoked key ${k.key_id}.`);
          await again();
        }),
      );
      const edit = h("button", { type: "button", class: "quiet", onclick: () => editPanel(editHost, k, tools, again) }, "Edit");
      return h(
        "tr",
        { "data-key": k.key_id },
        h("td", {}, mono(k.key_id)),
        h("td", {}, k.name === "" ? h("span", { class: "muted" }, "—") : k.name),
        h("td", {}, orgName.get(k.org_id) ?? "", h("br"), mono(k.org_id, "small")),
        h(
          "td",
          { class: "budget" },
          budgetBar(k.spent_mc, k.budget_mc),
          h("div", { class: "mono small" }, `${mc(k.spent_mc)} of ${mc(k.budget_mc)}`),
          h("div", { class: "hint" }, `${hint(k.spent_mc)} of ${hint(k.budget_mc)}`),
        ),
        h("td", {}, money(k.remaining_mc)),
        h("td", {}, k.reset, h("br"), mono(k.period, "small")),
        h(
          "td",
          { title: k.allow.join("\n") },
          `${k.allow.length} tool${k.allow.length === 1 ? "" : "s"}`,
          Object.keys(k.prices).length > 0 ? h("div", { class: "small muted" }, `${Object.keys(k.prices).length} own price(s)`) : null,
          k.approve_above_mc === null ? null : h("div", { class: "small muted" }, `a person approves above ${mc(k.approve_above_mc)}`),
        ),
        h(
          "td",
          {},
          h("span", { class: `badge ${st.cls}` }, st.text),
          k.expires_at ? h("div", { class: "small muted" }, `expires ${when(k.expires_at)}`) : null,
        ),
        h("td", { class: "actions" }, live ? edit : null, live ? rotate : null, live ? revoke : null),
      );
    });

    root.append(
      secretHost,
      section("New key", create),
      section(
        `Keys (${keys.length})`,
        h("div", { class: "row" }, labelled("Show", filter)),
        table(["Key ID", "Name", "Organization", "Budget used", "Remaining", "Reset / period", "Allowed", "Status", ""], rows, "No key yet."),
      ),
      editHost,
    );
  },
};

function secretPanelIn(root: HTMLElement, keyId: string, secret: string, what: string): void {
  const host = root.firstElementChild;
  if (host instanceof HTMLElement) secretPanel(host, keyId, secret, what);
}
