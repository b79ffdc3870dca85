// The operator console in a real browser (the headless Chromium of the npm package
// @sparticuz/chromium, driven by playwright-core) against the
// compiled desk and a fixture upstream: sign in, register an upstream with a sealed credential,
// price a tool, create an org and a key, a paid call through the REST API, the audit and its
// chart, the receipt verified in the browser (and a tampered copy failing), the export, rotate
// and revoke with the next call refused. Throughout: no CSP violation, no request to any other
// host, and the admin token never in a cookie, localStorage or the URL. Screenshots of each page
// go to test-artifacts/console/.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { RESOURCE_DOCUMENT, type ResourceServer, startResourceServer } from "../fixtures/oauth-resource.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { CHROMIUM_ARGS, npmChromium, npmChromiumVersion } from "../helpers/browser.ts";
import { type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { type OAuthServer, startOAuthServer } from "../helpers/oauth-server.ts";
import { tempDir } from "../helpers/tmp.ts";

const TOKEN = "console-e2e-admin-token-abcdefghijklmnopqrstuvwxyz";
const CREDENTIAL = { name: "x-api-key", value: "sealed-credential-value-4f7c2a" };
const SHOTS = resolve(import.meta.dir, "../../test-artifacts/console");
const STEP_MS = 10_000;

const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

let fx: UpstreamFixture;
let oauth: OAuthServer | undefined;
let api: ResourceServer | undefined;
let desk: DeskProcess;
let context: BrowserContext;
let page: Page;
const tmp = tempDir("ask-only-console-");
const requests: string[] = [];
const cspViolations: string[] = [];
const pageErrors: string[] = [];

/** Text of the status line once it matches `re` (the console reports every action there). */
async function statusMatching(re: RegExp): Promise<string> {
  const handle = await page.waitForFunction(
    (source) => {
      const el = document.querySelector(".status");
      return el !== null && new RegExp(source).test(el.textContent ?? "") ? el.textContent : null;
    },
    re.source,
    { timeout: STEP_MS },
  );
  return (await handle.jsonValue()) as string;
}

async function go(hash: string, pageId: string): Promise<void> {
  await page.evaluate((h) => {
    location.hash = h;
  }, hash);
  await page.locator(`.page[data-page="${pageId}"] section`).first().waitFor({ timeout: STEP_MS });
}

async function shot(name: string): Promise<void> {
  await page.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: true });
}

function call(secret: string, text: string): Promise<Response> {
  return fetch(`${desk.url}/v1/tools/fx__echo`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
    body: JSON.stringify({ text }),
  });
}

/** The registration form of the upstreams page (each row's credential form has the same labels). */
const registerForm = () => page.locator("section:has(h2:text('Register an upstream')) form");

afterAll(async () => {
  await context?.close();
  await desk?.stop();
  await fx?.stop();
  await api?.stop();
  await oauth?.stop();
  tmp[Symbol.dispose]();
});

describe("operator console (chromium, compiled desk)", () => {
  // Named steps, not a beforeAll: whatever fails to start shows under its own name.
  test("the compiled desk starts beside a fixture upstream that wants a credential header", async () => {
    fx = startUpstreamFixture({ requireHeader: CREDENTIAL });
    desk = await startDeskProcess(join(tmp.path, "desk-data"), [], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: TOKEN }, token: TOKEN });
    expect(desk.url).toStartWith("http://127.0.0.1:");
  });

  test(`a headless Chromium starts (@sparticuz/chromium ${npmChromiumVersion()})`, async () => {
    mkdirSync(SHOTS, { recursive: true });
    context = await chromium.launchPersistentContext(join(tmp.path, "profile"), {
      executablePath: await npmChromium(),
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 1280, height: 860 },
      acceptDownloads: true,
    });
    // Runs before any page script, outside the page's CSP: records every violation the browser reports.
    await context.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) => {
        console.error(`CSP-VIOLATION ${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    context.on("request", (r) => requests.push(r.url()));
    page = context.pages()[0] ?? (await context.newPage());
    page.on("console", (m) => {
      if (m.text().startsWith("CSP-VIOLATION") || /Content Security Policy/i.test(m.text())) cspViolations.push(m.text());
    });
    page.on("pageerror", (err) => pageErrors.push(err.message));
    // The browser is the npm package's, whatever else the machine has installed.
    expect(await page.evaluate(() => navigator.userAgent)).toContain(`HeadlessChrome/${npmChromiumVersion().split(".")[0]}.`);
  }, 60_000);

  let secret = "";
  let keyId = "";
  let paidBody = "";

  test("the page and its assets come from the binary with the security headers", async () => {
    const res = await fetch(`${desk.url}/console`);
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(res.headers.get("content-security-policy")).toBe(CSP);
    expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    expect(res.headers.get("referrer-policy")).toBe("no-referrer");
    expect(res.headers.get("x-frame-options")).toBe("DENY");
    // No inline script or style for the CSP to have to allow.
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(html).not.toMatch(/<style|\sstyle=|\son[a-z]+=/i);
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.length).toBe(2);
    for (const path of assets) {
      const a = await fetch(`${desk.url}${path}`);
      expect(a.status).toBe(200);
      expect(a.headers.get("content-security-policy")).toBe(CSP);
      expect(a.headers.get("x-content-type-options")).toBe("nosniff");
      const body = await a.text();
      // The bundle is browser code: no Node polyfill was pulled in.
      expect(body).not.toContain("node:");
      expect(body.length).toBeLessThan(200_000);
    }
  });

  test("a wrong token is refused and nothing is kept; the right one signs in", async () => {
    await page.goto(`${desk.url}/console`);
    await page.getByLabel("Admin token").fill("not-the-admin-token-but-long-enough-000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    expect(await statusMatching(/ADMIN_TOKEN_INVALID/)).toContain("Sign-in failed");
    expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
    await shot("signin");

    await page.getByLabel("Admin token").fill(TOKEN);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.locator('.page[data-page="orgs"] section').first().waitFor({ timeout: STEP_MS });
    expect(await page.evaluate(() => sessionStorage.getItem("ask-only.admin-token"))).toBe(TOKEN);
    expect(await page.evaluate(() => localStorage.length)).toBe(0);
    expect(await context.cookies()).toEqual([]);
    expect(page.url()).not.toContain(TOKEN);
  });

  test("register an upstream with a sealed credential header: only its name comes back", async () => {
    await go("#upstreams", "upstreams");
    const form = registerForm();
    await form.locator('input[name="name"]').fill("fx");
    await form.getByLabel("MCP URL").fill(fx.url);
    await form.locator('select[name="auth_type"]').selectOption("header");
    await form.getByLabel("Credential header").fill(CREDENTIAL.name);
    await form.getByLabel("Header value").fill(CREDENTIAL.value);
    // Fields of the other kind and of other credential types are not shown.
    expect(await form.getByLabel("Base URL").isVisible()).toBe(false);
    expect(await form.getByLabel("Token URL").isVisible()).toBe(false);
    await form.getByRole("button", { name: "Register upstream" }).click();
    expect(await statusMatching(/Registered fx/)).toMatch(/Registered fx: \d+ tool/);
    const row = page.locator('tr[data-upstream="fx"]');
    expect(await row.textContent()).toContain(CREDENTIAL.name);
    expect(await row.textContent()).toContain("MCP");
    expect(await page.content()).not.toContain(CREDENTIAL.value);
    await row.getByRole("button", { name: "Refresh tools" }).click();
    await statusMatching(/Refreshed fx/);
    expect(fx.seenCredentials).toContain(CREDENTIAL.value);
    await shot("upstreams");
  });

  test("price a tool", async () => {
    await go("#tools", "tools");
    const row = page.locator('tr[data-tool="fx__echo"]');
    await row.getByLabel("Price of fx__echo (mc)").fill("2500");
    await row.getByLabel("Upstream cost of fx__echo (mc)").fill("1000");
    await row.getByRole("button", { name: "Save" }).click();
    await statusMatching(/Saved the price of fx__echo/);
    expect(await row.textContent()).toContain("1,500 mc");
    await shot("tools");
  });

  test("create an organization; a name that looks like HTML stays text", async () => {
    await go("#orgs", "orgs");
    const name = '<img src=x id="injected">Acme';
    await page.getByLabel("Name").fill(name);
    await page.getByRole("button", { name: "Create organization" }).click();
    await statusMatching(/Created organization/);
    await page.getByText(name, { exact: true }).waitFor({ timeout: STEP_MS });
    expect(await page.locator("#injected").count()).toBe(0);
    await shot("orgs");
  });

  test("create a key: the secret is shown once, with a copy button", async () => {
    await go("#keys", "keys");
    await page.getByLabel("Budget (mc)").fill("5000");
    await page.getByLabel("Name").fill("research-agent");
    await page.locator('label.check:has(input[value="fx__echo"]) input').check();
    await page.getByRole("button", { name: "Create key" }).click();
    const panel = page.locator(".secret-panel");
    await panel.waitFor({ timeout: STEP_MS });
    secret = await panel.getByLabel("Key secret").inputValue();
    keyId = (await panel.getAttribute("data-secret-for")) ?? "";
    expect(secret).toStartWith("cd_live_");
    expect(await panel.getByRole("button", { name: "Copy" }).count()).toBe(1);
    expect(await page.locator(`tr[data-key="${keyId}"]`).textContent()).toContain("5,000 mc");
  });

  test("edit the key's budget and its own price for a tool", async () => {
    const row = page.locator(`tr[data-key="${keyId}"]`);
    await row.getByRole("button", { name: "Edit" }).click();
    const form = page.locator("section:has(h2:text('Edit key'))");
    await form.locator('input[name="budget_mc"]').fill("7500");
    await form.locator('input[name="price:fx__echo"]').fill("2500");
    // Calls above 9,000 mc would wait for a person; this key's calls cost 2,500 and clear at once.
    await form.locator('input[name="approve_above_mc"]').fill("9000");
    await form.getByRole("button", { name: "Save changes" }).click();
    await statusMatching(/Saved key/);
    expect(await page.locator(`tr[data-key="${keyId}"]`).textContent()).toContain("7,500 mc");
    expect(await page.locator(`tr[data-key="${keyId}"]`).textContent()).toContain("a person approves above 9,000 mc");
    await page.locator(".secret-panel").waitFor({ state: "detached", timeout: STEP_MS });
  });

  test("a paid call through the REST API shows in the audit and the chart", async () => {
    const res = await call(secret, "hello console");
    paidBody = await res.text();
    expect(res.status).toBe(200);
    const receiptId = res.headers.get("x-clearing-receipt-id")!;
    await go("#audit", "audit");
    const row = page.locator(`tr[data-receipt="${receiptId}"]`);
    await row.waitFor({ timeout: STEP_MS });
    const text = await row.textContent();
    expect(text).toContain("charged");
    expect(text).toContain("2,500 mc");
    expect(text).toContain("1,000 mc");
    expect(text).toContain("1,500 mc");
    const today = new Date().toISOString().slice(0, 10);
    const day = page.locator(`svg.chart g.day[data-day="${today}"]`);
    expect(await day.locator("rect.spend title").textContent()).toContain("spend: 2,500 mc");
    expect(await day.locator("rect.margin title").textContent()).toContain("margin: 1,500 mc");
    await shot("audit");
  });

  test("a receipt opened from the audit verifies in the viewer as a bare envelope", async () => {
    await page.locator("tr[data-receipt] a").first().click();
    await page.locator(".verdict").waitFor({ timeout: STEP_MS });
    expect(await page.locator(".verdict").textContent()).toBe("All checks that apply pass.");
    expect(await page.locator(".checks-list li.ok").count()).toBe(2);
    expect(await page.locator(".checks-list li.skip").count()).toBe(2);
    expect(page.url()).not.toContain(TOKEN);
  });

  test("the receipt viewer runs the four checks in the browser; one changed character fails", async () => {
    await go("#receipts", "receipts");
    await page.locator('textarea[name="response"]').fill(paidBody);
    await page.locator('textarea[name="args"]').fill(JSON.stringify({ text: "hello console" }));
    await page.getByRole("button", { name: "Verify" }).click();
    await page.locator(".verdict").waitFor({ timeout: STEP_MS });
    const items = page.locator(".checks-list li");
    expect(await items.count()).toBe(4);
    expect(await page.locator(".checks-list li.ok").count()).toBe(4);
    expect(await page.locator(".verdict").textContent()).toBe("All checks that apply pass.");
    await shot("receipts");

    const tampered = paidBody.replace("hello console", "hello consolf");
    expect(tampered).not.toBe(paidBody);
    await page.locator('textarea[name="response"]').fill(tampered);
    await page.getByRole("button", { name: "Verify" }).click();
    await page.locator('.checks-list li.failed[data-check="result"]').waitFor({ timeout: STEP_MS });
    expect(await page.locator(".checks-list li.failed").count()).toBe(1);
    expect(await page.locator('.checks-list li[data-check="result"]').textContent()).toContain("FAILED result: result_sha256 differs");
  });

  test("the receipts export downloads as JSONL", async () => {
    const [download] = await Promise.all([page.waitForEvent("download", { timeout: STEP_MS }), page.getByRole("button", { name: "Download JSONL" }).click()]);
    const path = await download.path();
    const lines = readFileSync(path!, "utf8").trimEnd().split("\n");
    expect(lines.length).toBe(1);
    expect(JSON.parse(lines[0]!).receipt.key_id).toBe(keyId);
  });

  test("rotate stops the old secret; revoke refuses the next call", async () => {
    await go("#keys", "keys");
    const row = page.locator(`tr[data-key="${keyId}"]`);
    expect(await row.textContent()).toContain("2,500 mc of 7,500 mc");
    await shot("keys");
    await row.getByRole("button", { name: "Rotate" }).click();
    await row.getByRole("button", { name: "Confirm rotate" }).click();
    const panel = page.locator(".secret-panel");
    await panel.waitFor({ timeout: STEP_MS });
    const rotated = await panel.getByLabel("Key secret").inputValue();
    expect(rotated).not.toBe(secret);
    expect((await call(secret, "old secret")).status).toBe(401);
    expect((await call(rotated, "new secret")).status).toBe(200);

    const fresh = page.locator(`tr[data-key="${keyId}"]`);
    await fresh.getByRole("button", { name: "Revoke" }).click();
    await fresh.getByRole("button", { name: "Confirm revoke" }).click();
    await statusMatching(/Revoked key/);
    expect(await page.locator(`tr[data-key="${keyId}"] .badge`).textContent()).toBe("revoked");
    const refused = await call(rotated, "after revoke");
    expect(refused.status).toBe(401);
    expect(await refused.json()).toEqual({ error: "KEY_INVALID" });
  });

  test("finance: set the org budget, top up, see the bar and the records, download a signed statement", async () => {
    await go("#finance", "finance");
    const setForm = page.locator("section:has(h2:text('Set the budget'))");
    await setForm.locator('input[name="budget_mc"]').fill("100000");
    await setForm.locator('select[name="reset"]').selectOption("monthly");
    await setForm.getByRole("button", { name: "Save budget" }).click();
    await statusMatching(/Saved the budget/);
    const topup = page.locator("section:has(h2:text('Top up'))");
    await topup.locator('input[name="amount_mc"]').fill("5000");
    await topup.locator('input[name="reference"]').fill("invoice-1");
    await topup.getByRole("button", { name: "Top up" }).click();
    await statusMatching(/Topped up/);
    // The first budget counted the two calls already charged.
    expect(await page.locator("[data-org-budget]").textContent()).toContain("5,000 mc of 105,000 mc");
    expect(await page.locator("section:has(h2:text('Budget records (2)')) tbody tr").count()).toBe(2);
    await shot("finance");
    const [download] = await Promise.all([
      page.waitForEvent("download", { timeout: STEP_MS }),
      page.getByRole("button", { name: "Download statement" }).click(),
    ]);
    const statement = JSON.parse(readFileSync((await download.path())!, "utf8"));
    expect(statement.statement).toMatchObject({ type: "statement", closed: false, charges: { calls: 2, amount_mc: 5000 } });
    await statusMatching(/Statement for .* downloaded \(the period is still open\)/);
  });

  test("turn the sandbox on and off", async () => {
    await go("#sandbox", "sandbox");
    await page.locator('label.check:has(input[value="fx__echo"]) input').check();
    await page.getByRole("button", { name: "Turn the sandbox on" }).click();
    await statusMatching(/The sandbox is on/);
    const taken = await fetch(`${desk.url}/v1/sandbox/keys`, { method: "POST" });
    expect(taken.status).toBe(201);
    expect(((await taken.json()) as { allow: string[] }).allow).toEqual(["fx__echo"]);
    await shot("sandbox");
    await page.getByRole("button", { name: "Turn off" }).click();
    await page.getByRole("button", { name: "Confirm: turn the sandbox off" }).click();
    await statusMatching(/The sandbox is off/);
    const refused = await fetch(`${desk.url}/v1/sandbox/keys`, { method: "POST" });
    expect(refused.status).toBe(404);
    expect(await refused.json()).toEqual({ error: "SANDBOX_OFF" });
  });

  test("register a REST API from its pasted OpenAPI document behind OAuth; a refused client shows as needing a new grant until a new credential", async () => {
    oauth = await startOAuthServer();
    api = startResourceServer(oauth.issuer, oauth.clients.resource);
    const client = oauth.clients.basic;
    const wrong = "not-the-client-secret-93c1";
    await go("#upstreams", "upstreams");
    const form = registerForm();
    await form.locator('select[name="kind"]').selectOption("rest");
    await form.locator('input[name="name"]').fill("api");
    await form.getByLabel("Base URL").fill(api.url);
    await form.getByLabel("OpenAPI document").fill(JSON.stringify(RESOURCE_DOCUMENT));
    await form.locator('select[name="auth_type"]').selectOption("oauth2_client_credentials");
    await form.getByLabel("Token URL").fill(oauth.tokenUrl);
    await form.getByLabel("Client ID").fill(client.id);
    await form.getByLabel("Client secret").fill(wrong);
    await form.getByRole("button", { name: "Register upstream" }).click();
    expect(await statusMatching(/Registered api/)).toMatch(/Registered api: 1 tool/);
    const rowText = () => page.locator('tr[data-upstream="api"]').textContent();
    expect(await rowText()).toContain("REST");
    expect(await rowText()).toContain(`OAuth client credentials${client.id} at ${oauth.tokenUrl}secrets sealed`);

    // A call the provider refuses the client for: refunded, and the console says what to do.
    expect((await desk.admin("PUT", "/admin/tools/api__whoami", { price_mc: 10, upstream_cost_mc: 0 })).status).toBe(200);
    const org = (await (await desk.admin("POST", "/admin/orgs", { name: "api-org" })).json()) as { org_id: string };
    const k = (await (await desk.admin("POST", "/admin/keys", { org_id: org.org_id, budget_mc: 100, reset: "none", allow: ["api__whoami"] })).json()) as {
      secret: string;
    };
    const whoami = () =>
      fetch(`${desk.url}/v1/tools/api__whoami`, {
        method: "POST",
        headers: { authorization: `Bearer ${k.secret}`, "content-type": "application/json" },
        body: "{}",
      });
    expect(await (await whoami()).json()).toMatchObject({ error: "UPSTREAM_AUTH_FAILED" });
    await go("#tools", "tools");
    await go("#upstreams", "upstreams");
    expect(await page.locator('tr[data-upstream="api"] [data-state="needs_grant"]').textContent()).toContain("needs a new grant (invalid_client");
    await shot("upstreams-needs-grant");

    await page.locator('tr[data-upstream="api"]').getByRole("button", { name: "Replace credential" }).click();
    const replace = page.locator('form[data-replace="api"]');
    await replace.locator('select[name="auth_type"]').selectOption("oauth2_client_credentials");
    await replace.getByLabel("Token URL").fill(oauth.tokenUrl);
    await replace.getByLabel("Client ID").fill(client.id);
    await replace.getByLabel("Client secret").fill(client.secret);
    await replace.getByRole("button", { name: "Save credential" }).click();
    await statusMatching(/Replaced the credential of api/);
    expect(await rowText()).toContain("secrets sealed");
    expect((await whoami()).status).toBe(200);
    const content = await page.content();
    expect(content).not.toContain(wrong);
    expect(content).not.toContain(client.secret);
    await shot("upstreams");
  }, 30_000);

  test("no CSP violation, no page error, no request to any host but the desk", () => {
    expect(cspViolations).toEqual([]);
    expect(pageErrors).toEqual([]);
    const origin = new URL(desk.url).origin;
    const elsewhere = requests.filter((u) => !u.startsWith(`${origin}/`) && !u.startsWith("data:") && !u.startsWith("blob:"));
    expect(elsewhere).toEqual([]);
    expect(requests.length).toBeGreaterThan(10);
    // The token never travelled in a URL.
    expect(requests.filter((u) => u.includes(TOKEN))).toEqual([]);
    expect(desk.stderr()).not.toContain("internal error");
  });

  test("the checks above can fail: an injected inline script and style are blocked and recorded", async () => {
    const violation = (directive: string) =>
      page.waitForEvent("console", { predicate: (m) => m.text().startsWith(`CSP-VIOLATION ${directive}`), timeout: STEP_MS });
    const seen = Promise.all([violation("style-src"), violation("script-src")]);
    await page.evaluate(() => {
      const style = document.createElement("style");
      style.textContent = "body { background: red }";
      document.head.append(style);
      const script = document.createElement("script");
      script.textContent = "window.injectedRan = true";
      document.head.append(script);
    });
    await seen;
    expect(cspViolations.some((v) => v.startsWith("CSP-VIOLATION style-src"))).toBe(true);
    expect(await page.evaluate(() => (window as unknown as { injectedRan?: boolean }).injectedRan)).toBeUndefined();
  });
});
