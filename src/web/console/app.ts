// The operator console: sign-in, navigation by the URL fragment (never holding the token), and
// one module per page.
import { api, token, whenSignedOut } from "./api.ts";
import { field, fill, h, labelled } from "./dom.ts";
import { auditPage } from "./page-audit.ts";
import { financePage } from "./page-finance.ts";
import { keysPage } from "./page-keys.ts";
import { orgsPage } from "./page-orgs.ts";
import { receiptsPage } from "./page-receipts.ts";
import { sandboxPage } from "./page-sandbox.ts";
import { toolsPage } from "./page-tools.ts";
import { upstreamsPage } from "./page-upstreams.ts";
import { attempt, notify, type Page, setStatusLine } from "./ui.ts";

const PAGES: Page[] = [orgsPage, keysPage, financePage, upstreamsPage, toolsPage, auditPage, receiptsPage, sandboxPage];

const root = document.getElementById("app")!;

function signIn(): void {
  const input = h("input", { name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const status = h("p", { class: "status" });
  setStatusLine(status);
  const form = h(
    "form",
    { class: "signin card" },
    h("h1", {}, "ask-only desk"),
    h("p", { class: "muted" }, "Operator console. Sign in with the desk's admin token; it is kept in this tab only and forgotten when the tab closes."),
    labelled("Admin token", input),
    h("button", { type: "submit", class: "primary" }, "Sign in"),
    status,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const value = field(form, "token");
    if (value === "") return;
    token.set(value);
    await attempt("Sign-in", async () => {
      await api("GET", "/admin/orgs");
      input.value = "";
      showShell();
    });
  });
  fill(root, form);
  input.focus();
}

function currentRoute(): { page: Page; params: URLSearchParams } {
  const [id, q] = location.hash.replace(/^#/, "").split("?", 2);
  return { page: PAGES.find((p) => p.id === id) ?? PAGES[0]!, params: new URLSearchParams(q ?? "") };
}

let main: HTMLElement | null = null;
let nav: HTMLElement | null = null;

/** The first page after sign-in keeps the "Signed in." line; later pages start blank. */
let first = true;

async function route(): Promise<void> {
  if (main === null || nav === null) return;
  const { page, params } = currentRoute();
  for (const a of Array.from(nav.querySelectorAll("a"))) a.classList.toggle("active", a.getAttribute("href") === `#${page.id}`);
  document.title = `${page.title} · ask-only desk`;
  const view = h("div", { class: "page", "data-page": page.id });
  if (!first) notify("");
  first = false;
  fill(main, h("h1", {}, page.title), view);
  await attempt(`Loading ${page.title.toLowerCase()}`, () => page.render(view, params));
}

function showShell(): void {
  const status = h("p", { class: "status", role: "status" });
  setStatusLine(status);
  nav = h("nav", {}, ...PAGES.map((p) => h("a", { href: `#${p.id}` }, p.title)));
  main = h("main", {});
  const signOut = h("button", { type: "button", class: "quiet" }, "Sign out");
  signOut.addEventListener("click", () => {
    token.clear();
    location.hash = "";
    signIn();
  });
  fill(root, h("header", {}, h("span", { class: "brand" }, "ask-only desk"), nav, signOut), status, main);
  first = true;
  notify("Signed in.");
  void route();
}

whenSignedOut(() => {
  token.clear();
  signIn();
  notify("The desk refused the admin token.", "error");
});
window.addEventListener("hashchange", () => void route());

if (token.get() === null) signIn();
else showShell();
