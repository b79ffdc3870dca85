// The console's routes in-process (run from source, so the page is bundled in memory): every
// answer carries the security headers, the page references only its own assets, and nothing
// but GET and HEAD of known names is served. The compiled binary's copy is covered by
// test/e2e/desk-console.test.ts.
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CONSOLE_HEADERS, consoleRoutes } from "../../src/commands/desk/console.ts";

const routes = consoleRoutes();
const page = (method = "GET") => routes["/console"](new Request("http://127.0.0.1/console", { method }));
const asset = (name: string, method = "GET") =>
  routes["/console/assets/:name"](Object.assign(new Request(`http://127.0.0.1/console/assets/${name}`, { method }), { params: { name } }));

function expectHeaders(res: Response): void {
  for (const [k, v] of Object.entries(CONSOLE_HEADERS)) expect(`${k}: ${res.headers.get(k)}`).toBe(`${k}: ${v}`);
}

describe("console routes", () => {
  test("the page: headers, no inline code, assets under /console/assets/ only", async () => {
    const res = await page();
    expect(res.status).toBe(200);
    expectHeaders(res);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    const html = await res.text();
    expect(html).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son[a-z]+=/i);
    const refs = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(refs.filter((r) => r !== "data:," && !r.startsWith("/console/assets/"))).toEqual([]);
    for (const ref of refs.filter((r) => r.startsWith("/console/assets/"))) {
      const a = await asset(ref.slice("/console/assets/".length));
      expect(a.status).toBe(200);
      expectHeaders(a);
      expect(a.headers.get("content-type")).toMatch(/^text\/(javascript|css)/);
    }
  });

  test("unknown assets and other methods are refused, with the headers still on", async () => {
    for (const res of [await asset("nope.js"), await asset("../desk.db"), await page("POST"), await page("DELETE")]) {
      expect(res.status).toBe(404);
      expectHeaders(res);
      expect(await res.json()).toEqual({ error: "NOT_FOUND" });
    }
    const head = await page("HEAD");
    expect(head.status).toBe(200);
    expect(await head.text()).toBe("");
  });

  test("the console's code has no HTML sink and keeps the token out of cookies and localStorage", () => {
    // Values from upstreams and agents reach the page; any API that parses a string as HTML
    // (or script) would let one of them run. The token belongs in sessionStorage only.
    const dir = join(import.meta.dir, "../../src/web/console");
    const files = readdirSync(dir).filter((f) => f.endsWith(".ts") || f.endsWith(".html"));
    expect(files.length).toBeGreaterThan(5);
    const sinks =
      /\.(innerHTML|outerHTML|insertAdjacentHTML)\b|document\.write|\beval\(|new Function\(|setAttribute\(\s*["']on|\blocalStorage\.|document\.cookie|createContextualFragment|DOMParser/;
    for (const f of files) expect(`${f}: ${sinks.exec(readFileSync(join(dir, f), "utf8"))?.[0] ?? "none"}`).toBe(`${f}: none`);
  });
});
