// Upstreams: register an MCP server (with one sealed credential header: its value goes to the
// desk once and is never shown again, only its name), list them, re-read their tools.
import { api } from "./api.ts";
import type { UpstreamView } from "../../core/desk/wire.ts";
import { field, h, labelled, table } from "./dom.ts";
import { attempt, mono, notify, type Page, rerender, section, when } from "./ui.ts";

export const upstreamsPage: Page = {
  id: "upstreams",
  title: "Upstreams",
  async render(root) {
    const upstreams = await api<UpstreamView[]>("GET", "/admin/upstreams");
    const form = h(
      "form",
      { class: "stack" },
      h(
        "div",
        { class: "row" },
        labelled(
          "Name",
          h("input", { name: "name", required: true, pattern: "[a-z][a-z0-9\\-]{0,31}", placeholder: "e.g. search", class: "mono" }),
          "a–z, 0–9, -",
        ),
        labelled("MCP URL", h("input", { name: "url", required: true, type: "url", placeholder: "https://mcp.example.com/mcp", class: "mono wide" })),
      ),
      h(
        "div",
        { class: "row" },
        labelled("Credential header", h("input", { name: "header_name", placeholder: "e.g. Authorization", class: "mono", autocomplete: "off" }), "optional"),
        labelled(
          "Header value",
          h("input", { name: "header_value", type: "password", autocomplete: "new-password", class: "mono" }),
          "sealed by the desk; never shown again",
        ),
      ),
      h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Register upstream")),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Registering the upstream", async () => {
        const headerName = field(form, "header_name");
        const headerValue = (form.elements.namedItem("header_value") as HTMLInputElement).value;
        if ((headerName === "") !== (headerValue === "")) throw new Error("give both the header name and its value, or neither");
        const made = await api<{ name: string; tools: string[] }>("POST", "/admin/upstreams", {
          name: field(form, "name"),
          url: field(form, "url"),
          ...(headerName === "" ? {} : { headers: { [headerName]: headerValue } }),
        });
        await rerender(upstreamsPage, root);
        notify(`Registered ${made.name}: ${made.tools.length} tool(s). Set their prices under Tools & prices.`);
      });
    });
    const rows = upstreams.map((u) => {
      const refresh = h("button", { type: "button", class: "quiet" }, "Refresh tools");
      refresh.addEventListener("click", () =>
        attempt("Refreshing the tools", async () => {
          refresh.disabled = true;
          const r = await api<{ name: string; tools: string[] }>("POST", `/admin/upstreams/${encodeURIComponent(u.name)}/refresh`);
          await rerender(upstreamsPage, root);
          notify(`Refreshed ${r.name}: ${r.tools.length} tool(s).`);
        }).finally(() => {
          refresh.disabled = false;
        }),
      );
      return h(
        "tr",
        { "data-upstream": u.name },
        h("td", {}, mono(u.name)),
        h("td", {}, mono(u.url, "url")),
        h(
          "td",
          {},
          u.header_names.length === 0 ? h("span", { class: "muted" }, "none") : h("span", { class: "mono" }, u.header_names.join(", ")),
          u.header_names.length > 0 ? h("div", { class: "small muted" }, "value sealed") : null,
        ),
        h("td", { class: "nowrap" }, when(u.created_at)),
        h("td", { class: "nowrap" }, when(u.refreshed_at)),
        h("td", { class: "actions" }, refresh),
      );
    });
    root.append(
      section("Register an upstream", h("p", { class: "muted" }, "The desk runs the MCP handshake and reads the tool list before storing anything."), form),
      section(`Upstreams (${upstreams.length})`, table(["Name", "URL", "Credential headers", "Registered", "Tools read", ""], rows, "No upstream yet.")),
    );
  },
};
