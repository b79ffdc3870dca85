// Receipts: the JSONL export (downloaded from a Blob, since the request needs the bearer
// header), the signing key set and its rotation, and a viewer that runs the four receipt checks
// in this browser with WebCrypto against the desk's published key set.
import type { Check } from "../../core/receipt/checks.ts";
import { readShape } from "../../core/receipt/shapes.ts";
import { importJwksWeb, verifyResponseWeb } from "../../core/receipt/verify-web.ts";
import { api, apiText, query } from "./api.ts";
import type { OrgView } from "../../core/desk/wire.ts";
import { confirmButton, field, fill, h, labelled, table } from "./dom.ts";
import { attempt, money, mono, notify, orgSelect, type Page, rerender, section, utcFromLocalInput } from "./ui.ts";

const JWKS_PATH = "/.well-known/receipt-signing-key.json";

/** One check as the CLI prints it: `ok signature (...)`, `FAILED result: ...`, `skip params (...)`. */
function describe(c: Check): { word: string; text: string; cls: string } {
  const label = c.name.replace("_", " ");
  if (c.skipped) return { word: "skip", text: `${label} (${c.detail ?? "not applicable"})`, cls: "skip" };
  if (c.ok) return { word: "ok", text: c.detail ? `${label} (${c.detail})` : label, cls: "ok" };
  return { word: "FAILED", text: `${label}: ${c.detail ?? "failed"}`, cls: "failed" };
}

function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    throw new Error(`the ${what} is not JSON`);
  }
}

/** The readable copy of the receipt the checks read (the same shape rule), for display only. */
function readableOf(body: unknown): Record<string, unknown> | null {
  const rec = (v: unknown) => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null);
  const read = readShape(body);
  return "shape" in read ? rec(rec(read.shape.envelope)?.receipt) : null;
}

function viewer(initial: string): HTMLElement {
  const results = h("div", { class: "results", "aria-live": "polite" });
  const response = h("textarea", {
    name: "response",
    rows: 10,
    class: "mono",
    spellcheck: "false",
    placeholder: '{"result": ..., "receipt": {"payload": ..., "signature": ..., "kid": ..., "receipt": {...}}}',
  });
  response.value = initial;
  const args = h("textarea", {
    name: "args",
    rows: 3,
    class: "mono",
    spellcheck: "false",
    placeholder: '{"text": "hello"} — optional: the arguments of the call',
  });
  const form = h(
    "form",
    { class: "stack" },
    labelled("Saved response (a desk REST body or refusal, an MCP tools/call result or its JSON-RPC response, or an envelope)", response),
    labelled("Arguments sent (optional)", args),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Verify")),
    results,
  );
  const run = async () => {
    fill(results);
    await attempt("Verifying", async () => {
      const body = parseJson(response.value, "saved response");
      const argText = field(form, "args");
      const argValue = argText === "" ? undefined : parseJson(argText, "arguments text");
      const res = await fetch(JWKS_PATH, { credentials: "omit", cache: "no-store" });
      if (!res.ok) throw new Error(`the key set answered HTTP ${res.status}`);
      const keys = await importJwksWeb(await res.json());
      const checks = await verifyResponseWeb(body, keys, argValue);
      const pass = checks.every((c) => c.ok);
      const readable = readableOf(body);
      fill(
        results,
        h("p", { class: `verdict ${pass ? "ok" : "failed"}` }, pass ? "All checks that apply pass." : "This receipt does NOT verify."),
        h(
          "ul",
          { class: "checks-list" },
          ...checks.map((c) => {
            const d = describe(c);
            return h("li", { class: d.cls, "data-check": c.name }, h("span", { class: "word mono" }, d.word), " ", d.text);
          }),
        ),
        readable
          ? table(
              ["Field", "Receipt (readable copy, as saved)"],
              Object.entries(readable).map(([k, v]) =>
                h(
                  "tr",
                  {},
                  h("td", { class: "mono" }, k),
                  h("td", {}, k.endsWith("_mc") && typeof v === "number" ? money(v) : mono(v === null ? "null" : String(v))),
                ),
              ),
            )
          : null,
      );
      notify(pass ? "Receipt verified in the browser." : "Receipt check FAILED.", pass ? "ok" : "error");
    });
  };
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    void run();
  });
  if (initial !== "") void run();
  return section(
    "Receipt viewer",
    h(
      "p",
      { class: "muted" },
      "Runs the four checks in this browser: the Ed25519 signature under the desk's published keys, the readable copy against the signed payload, the returned result and the arguments against their SHA-256 over canonical JSON.",
    ),
    form,
  );
}

export const receiptsPage: Page = {
  id: "receipts",
  title: "Receipts",
  async render(root, params) {
    const [orgs, jwks] = await Promise.all([api<OrgView[]>("GET", "/admin/orgs"), api<{ keys: { kid: string }[] }>("GET", JWKS_PATH)]);
    let initial = "";
    const id = params.get("id");
    if (id !== null) initial = JSON.stringify(await api<unknown>("GET", `/v1/receipts/${encodeURIComponent(id)}`), null, 2);

    const exportForm = h(
      "form",
      { class: "row" },
      labelled("Organization", orgSelect("org_id", orgs, null, "All organizations")),
      labelled("From (UTC)", h("input", { name: "since", type: "datetime-local" }), "a partial export starts mid-chain"),
      h("button", { type: "submit", class: "primary" }, "Download JSONL"),
    );
    exportForm.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Exporting receipts", async () => {
        const text = await apiText(`/admin/receipts${query({ org_id: field(exportForm, "org_id"), since: utcFromLocalInput(field(exportForm, "since")) })}`);
        const lines = text === "" ? 0 : text.trimEnd().split("\n").length;
        const url = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
        const a = h("a", { href: url, download: `receipts-${new Date().toISOString().slice(0, 10)}.jsonl` });
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10_000);
        notify(`Exported ${lines} receipt(s). Check them offline: ask-only verify-receipt --jsonl FILE --keys JWKS.json`);
      });
    });

    const rotate = confirmButton("Rotate signing key", "Confirm: rotate the signing key", async () =>
      attempt("Rotating the signing key", async () => {
        const r = await api<{ kid: string; retired_kid: string }>("POST", "/admin/signing-key/rotate");
        await rerender(receiptsPage, root, params);
        notify(`New signing key ${r.kid}; ${r.retired_kid} stays published for old receipts.`);
      }),
    );

    root.append(
      section("Export", exportForm),
      viewer(initial),
      section(
        "Signing keys",
        h("p", { class: "muted" }, "Published at ", mono(JWKS_PATH), ". The newest key signs; retired keys stay listed so older receipts still verify."),
        table(
          ["kid"],
          jwks.keys.map((k) => h("tr", {}, h("td", {}, mono(k.kid)))),
        ),
        h("div", { class: "row" }, rotate),
      ),
    );
  },
};
