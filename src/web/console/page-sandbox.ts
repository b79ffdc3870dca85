// The public sandbox (SPEC 8.13): off until turned on here; one or two tools, a budget and a
// lifetime for each key handed out at POST /v1/sandbox/keys.
import { api } from "./api.ts";
import type { SandboxView, ToolView } from "../../core/desk/wire.ts";
import { confirmButton, field, h, labelled } from "./dom.ts";
import { parseMc } from "../../core/money/millicents.ts";
import { attempt, money, mono, notify, type Page, rerender, section, when } from "./ui.ts";

export const sandboxPage: Page = {
  id: "sandbox",
  title: "Sandbox",
  async render(root) {
    const [sandbox, allTools] = await Promise.all([api<SandboxView>("GET", "/admin/sandbox"), api<ToolView[]>("GET", "/admin/tools")]);
    const tools = allTools.filter((t) => t.active);
    const on = sandbox.enabled ? sandbox : null;
    const chosen = new Set(on?.tools ?? []);
    const form = h(
      "form",
      { class: "stack" },
      h("h3", {}, "Tools (one or two)"),
      h(
        "div",
        { class: "checks" },
        ...tools.map((t) =>
          h("label", { class: "check" }, h("input", { type: "checkbox", name: "tool", value: t.name, checked: chosen.has(t.name) }), mono(t.name)),
        ),
      ),
      h(
        "div",
        { class: "row" },
        labelled(
          "Budget per key (mc)",
          h("input", { name: "budget_mc", class: "mono num", inputmode: "numeric", value: String(on?.budget_mc ?? 2000) }),
          "0 – 100,000; 2,000 mc = 2 cents",
        ),
        labelled(
          "Key lifetime (seconds)",
          h("input", { name: "ttl_s", class: "mono num", inputmode: "numeric", value: String(on?.ttl_s ?? 3600) }),
          "60 – 86,400",
        ),
        labelled(
          "Keys per day, all networks",
          h("input", { name: "keys_per_day", class: "mono num", inputmode: "numeric", value: String(on?.keys_per_day ?? 200) }),
          "1 – 100,000",
        ),
        h("button", { type: "submit", class: "primary" }, on ? "Save sandbox" : "Turn the sandbox on"),
      ),
    );
    form.addEventListener("submit", async (ev) => {
      ev.preventDefault();
      await attempt("Saving the sandbox", async () => {
        const picked = Array.from(form.querySelectorAll<HTMLInputElement>('input[name="tool"]:checked')).map((i) => i.value);
        const budget = parseMc(field(form, "budget_mc"));
        const ttl = parseMc(field(form, "ttl_s"));
        const keysPerDay = parseMc(field(form, "keys_per_day"));
        if (budget === null || ttl === null || keysPerDay === null) throw new Error("budget, lifetime and keys per day are whole numbers");
        await api("PUT", "/admin/sandbox", { tools: picked, budget_mc: budget, ttl_s: ttl, keys_per_day: keysPerDay });
        await rerender(sandboxPage, root);
        notify("The sandbox is on with these settings.");
      });
    });
    const state = on
      ? h(
          "div",
          { class: "row sandbox-state" },
          h("span", { class: "badge good" }, "on"),
          h("span", {}, "Each key: ", money(on.budget_mc)),
          h("span", {}, `for ${on.ttl_s} s, tools `, mono(on.tools.join(", "))),
          h("span", {}, `at most ${on.keys_per_day} keys a day`),
          h("span", { class: "muted" }, `since ${when(on.updated_at)}`),
          confirmButton("Turn off", "Confirm: turn the sandbox off", () =>
            attempt("Turning the sandbox off", async () => {
              await api("DELETE", "/admin/sandbox");
              await rerender(sandboxPage, root);
              notify("The sandbox is off. Keys already handed out run until they expire.");
            }),
          ),
        )
      : h(
          "div",
          { class: "row sandbox-state" },
          h("span", { class: "badge bad" }, "off"),
          h("span", { class: "muted" }, "POST /v1/sandbox/keys answers 404 SANDBOX_OFF."),
        );
    root.append(
      section("State", state),
      section(
        on ? "Settings" : "Turn it on",
        h(
          "p",
          { class: "muted" },
          "Anyone may then take a small key without signing in, each in its own organization, at most five per network and the daily number below across all networks, per UTC day. Changes apply to keys handed out afterwards.",
        ),
        form,
      ),
    );
  },
};
