// Upstreams: register an MCP server or a REST API described by OpenAPI (its document pasted, or
// its URL), with a credential whose secrets go to the desk once and are never shown again; list
// them with their kind, their credential's type, settings and state (a refused grant shows as
// needing a new one); re-read their tools; give one a new credential.
import { api } from "./api.ts";
import type { AuthView, RegisteredView, UpstreamView } from "../../core/desk/wire.ts";
import { type AuthFields, authFields } from "./auth-fields.ts";
import { field, h, labelled, table } from "./dom.ts";
import { attempt, mono, notify, type Page, rerender, section, when } from "./ui.ts";

const AUTH_NAMES: Record<string, string> = {
  header: "header",
  query: "query key",
  bearer: "bearer token",
  basic: "basic",
  oauth2_client_credentials: "OAuth client credentials",
  oauth2_refresh_token: "OAuth refresh token",
};

/** What the operator may see of a credential: its type, its settings, its state; never a secret. */
function credentialCell(auth: AuthView | null): HTMLElement {
  if (auth === null) return h("span", { class: "muted" }, "none");
  const settings =
    auth.type === "header"
      ? auth.header_names.join(", ")
      : auth.type === "query"
        ? `?${auth.name}=…`
        : auth.type === "oauth2_client_credentials" || auth.type === "oauth2_refresh_token"
          ? `${auth.client_id} at ${auth.token_url}`
          : "";
  const state =
    auth.state === "ok"
      ? h("div", { class: "small muted" }, "secrets sealed")
      : h("div", { class: "small error", "data-state": "needs_grant" }, `needs a new grant (${auth.reason}, since ${when(auth.since)})`);
  return h("div", {}, h("span", {}, AUTH_NAMES[auth.type] ?? auth.type), settings === "" ? null : h("div", { class: "small mono" }, settings), state);
}

function registerForm(root: HTMLElement): HTMLFormElement {
  const kind = h("select", { name: "kind" }, h("option", { value: "mcp" }, "MCP server"), h("option", { value: "rest" }, "REST API (OpenAPI)"));
  const mcpFields = h(
    "div",
    { class: "row" },
    labelled("MCP URL", h("input", { name: "url", type: "url", placeholder: "https://mcp.example.com/mcp", class: "mono wide" })),
  );
  const restFields = h(
    "div",
    { class: "stack" },
    h(
      "div",
      { class: "row" },
      labelled(
        "Base URL",
        h("input", { name: "base_url", type: "url", placeholder: "https://api.example.com/v2", class: "mono wide" }),
        "every request goes here",
      ),
      labelled(
        "OpenAPI URL",
        h("input", { name: "openapi_url", type: "url", placeholder: "https://api.example.com/openapi.json", class: "mono wide" }),
        "or paste it below",
      ),
    ),
    labelled(
      "OpenAPI document",
      h("textarea", { name: "openapi", rows: 6, class: "mono", placeholder: '{"openapi": "3.1.0", ...}' }),
      "JSON, OpenAPI 3.0 or 3.1",
    ),
  );
  const form = h(
    "form",
    { class: "stack" },
    h(
      "div",
      { class: "row" },
      labelled("Kind", kind),
      labelled(
        "Name",
        h("input", { name: "name", required: true, pattern: "[a-z][a-z0-9\\-]{0,31}", placeholder: "e.g. search", class: "mono" }),
        "a–z, 0–9, -",
      ),
    ),
    mcpFields,
    restFields,
  );
  const auth: AuthFields = authFields(form);
  form.append(auth.element, h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Register upstream")));
  const show = () => {
    mcpFields.hidden = kind.value !== "mcp";
    restFields.hidden = kind.value !== "rest";
  };
  kind.addEventListener("change", show);
  show();
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await attempt("Registering the upstream", async () => {
      const credential = auth.read();
      const withAuth = credential === null ? {} : { auth: credential };
      let body: Record<string, unknown>;
      if (kind.value === "mcp") {
        body = { name: field(form, "name"), url: field(form, "url"), ...withAuth };
      } else {
        const text = field(form, "openapi");
        let document: { openapi: unknown } | { openapi_url: string };
        if (text === "") document = { openapi_url: field(form, "openapi_url") };
        else {
          try {
            document = { openapi: JSON.parse(text) as unknown };
          } catch {
            throw new Error("the OpenAPI document is not JSON");
          }
        }
        body = { name: field(form, "name"), base_url: field(form, "base_url"), ...document, ...withAuth };
      }
      const made = await api<RegisteredView>("POST", "/admin/upstreams", body);
      await rerender(upstreamsPage, root);
      const left = made.skipped.length === 0 ? "" : ` (${made.skipped.length} operation(s) left out)`;
      notify(`Registered ${made.name}: ${made.tools.length} tool(s)${left}. Set their prices under Tools & prices.`);
    });
  });
  return form;
}

/** The form under a row that gives its upstream a new credential (a new grant after a refused one). */
function replaceForm(root: HTMLElement, u: UpstreamView): HTMLFormElement {
  const form = h("form", { class: "stack", "data-replace": u.name });
  const auth = authFields(form);
  form.append(auth.element, h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Save credential")));
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    await attempt("Replacing the credential", async () => {
      await api<UpstreamView>("PUT", `/admin/upstreams/${encodeURIComponent(u.name)}/auth`, { auth: auth.read() });
      await rerender(upstreamsPage, root);
      notify(`Replaced the credential of ${u.name}.`);
    });
  });
  return form;
}

export const upstreamsPage: Page = {
  id: "upstreams",
  title: "Upstreams",
  async render(root) {
    const upstreams = await api<UpstreamView[]>("GET", "/admin/upstreams");
    const rows = upstreams.flatMap((u) => {
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
      const editRow = h("tr", { class: "edit", hidden: true }, h("td", { colspan: 7 }, replaceForm(root, u)));
      const replace = h("button", { type: "button", class: "quiet" }, "Replace credential");
      replace.addEventListener("click", () => {
        editRow.hidden = !editRow.hidden;
      });
      const row = h(
        "tr",
        { "data-upstream": u.name },
        h("td", {}, mono(u.name)),
        h("td", {}, u.kind === "rest" ? "REST" : "MCP"),
        h("td", {}, mono(u.url, "url"), u.openapi_url === null ? null : h("div", { class: "small muted" }, "document: ", mono(u.openapi_url, "url"))),
        h("td", {}, credentialCell(u.auth)),
        h("td", { class: "nowrap" }, when(u.created_at)),
        h("td", { class: "nowrap" }, when(u.refreshed_at)),
        h("td", { class: "actions" }, refresh, replace),
      );
      return [row, editRow];
    });
    root.append(
      section(
        "Register an upstream",
        h(
          "p",
          { class: "muted" },
          "The desk reads every tool before storing anything: an MCP server's list, or one tool per operation of a REST API's OpenAPI document.",
        ),
        registerForm(root),
      ),
      section(`Upstreams (${upstreams.length})`, table(["Name", "Kind", "URL", "Credential", "Registered", "Tools read", ""], rows, "No upstream yet.")),
    );
  },
};
