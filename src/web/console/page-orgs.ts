// Organizations: create one, list them, jump to an organization's keys or audit.
import { api } from "./api.ts";
import type { OrgView } from "../../core/desk/wire.ts";
import { field, h, labelled, table } from "./dom.ts";
import { attempt, mono, notify, type Page, rerender, section, when } from "./ui.ts";

export const orgsPage: Page = {
  id: "orgs",
  title: "Organizations",
  async render(root) {
    const orgs = await api<OrgView[]>("GET", "/admin/orgs");
    const form = h(
      "form",
      { class: "row" },
      labelled("Name", h("input", { name: "name", required: true, maxlength: 200, class: "wide-ish", placeholder: "e.g. Acme research" })),
      h("button", { type: "submit", class: "primary" }, "Create organization"),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Creating the organization", async () => {
        const org = await api<{ org_id: string; name: string }>("POST", "/admin/orgs", { name: field(form, "name") });
        notify(`Created organization ${org.name} (${org.org_id}).`);
        await rerender(orgsPage, root);
      });
    });
    const rows = orgs.map((o) =>
      h(
        "tr",
        {},
        h("td", {}, mono(o.org_id)),
        h("td", {}, o.name),
        h("td", { class: "nowrap" }, when(o.created_at)),
        h(
          "td",
          { class: "actions" },
          h("a", { href: `#keys?org_id=${encodeURIComponent(o.org_id)}` }, "Keys"),
          h("a", { href: `#finance?org_id=${encodeURIComponent(o.org_id)}` }, "Finance"),
          h("a", { href: `#audit?org_id=${encodeURIComponent(o.org_id)}` }, "Audit"),
        ),
      ),
    );
    root.append(
      section("New organization", form),
      section(`All organizations (${orgs.length})`, table(["ID", "Name", "Created", ""], rows, "No organization yet.")),
    );
  },
};
