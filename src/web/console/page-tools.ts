// Tools and prices: every tool the upstreams offer, its default price and what the upstream
// costs the operator (PUT /admin/tools/{tool}); the margin per call beside them.
import { api } from "./api.ts";
import type { ToolView } from "../../core/desk/wire.ts";
import { h, table } from "./dom.ts";
import { parseMc } from "../../core/money/millicents.ts";
import { attempt, money, mono, notify, type Page, section } from "./ui.ts";

export const toolsPage: Page = {
  id: "tools",
  title: "Tools & prices",
  async render(root) {
    const tools = await api<ToolView[]>("GET", "/admin/tools");
    const rows = tools.map((t) => {
      const price = h("input", {
        name: "price_mc",
        value: String(t.price_mc),
        inputmode: "numeric",
        class: "mono num",
        "aria-label": `Price of ${t.name} (mc)`,
      });
      const cost = h("input", {
        name: "upstream_cost_mc",
        value: String(t.upstream_cost_mc),
        inputmode: "numeric",
        class: "mono num",
        "aria-label": `Upstream cost of ${t.name} (mc)`,
      });
      const margin = h("td", {}, money(t.price_mc - t.upstream_cost_mc));
      const showMargin = () => {
        const p = parseMc(price.value);
        const c = parseMc(cost.value);
        margin.replaceChildren(p === null || c === null ? h("span", { class: "muted" }, "—") : money(p - c));
      };
      price.addEventListener("input", showMargin);
      cost.addEventListener("input", showMargin);
      const save = h("button", { type: "button", class: "primary small" }, "Save");
      save.addEventListener("click", () =>
        attempt(`Pricing ${t.name}`, async () => {
          const p = parseMc(price.value);
          const c = parseMc(cost.value);
          if (p === null || c === null) throw new Error("prices are whole numbers of mc");
          await api("PUT", `/admin/tools/${encodeURIComponent(t.name)}`, { price_mc: p, upstream_cost_mc: c });
          notify(`Saved the price of ${t.name}.`);
        }),
      );
      return h(
        "tr",
        { "data-tool": t.name, class: t.active ? "" : "inactive" },
        h("td", {}, mono(t.name), t.active ? null : h("div", { class: "small muted" }, "inactive (gone from the upstream)")),
        h("td", {}, mono(t.upstream)),
        h("td", { class: "desc", title: t.description }, t.description),
        h("td", {}, price),
        h("td", {}, cost),
        margin,
        h("td", { class: "actions" }, save),
      );
    });
    root.append(
      section(
        `Tools (${tools.length})`,
        h("p", { class: "muted" }, "Amounts in millicents: 1 cent = 1,000 mc. A key can carry its own price per tool (Keys → Edit)."),
        table(["Tool", "Upstream", "Description", "Price (mc)", "Upstream cost (mc)", "Margin per call", ""], rows, "No tools: register an upstream."),
      ),
    );
  },
};
