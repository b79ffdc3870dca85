// Serves the operator console (src/web/console/) at /console with its security headers. The compiled
// binary carries the bundle Bun built from the HTML import (page.files: HTML, JS, CSS inside
// the executable); run from source, the same HTML is bundled once, in memory, on first request.
// Either way nothing is fetched from elsewhere and every answer carries the same headers.
import { errorResponse } from "../../core/errors.ts";
import page from "../../web/console/index.html";

/**
 * Headers on the console page and its assets. The CSP allows only the desk's own script, style
 * and API (no inline code, no other host), so text an upstream or agent slips into a value has
 * no script to run and nowhere to send anything; framing is refused (clickjacking on the
 * revoke and rotate buttons); the referrer never leaves.
 */
export const CONSOLE_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy":
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "cross-origin-opener-policy": "same-origin",
};

/** Where the console's bundled JS and CSS are served. */
const CONSOLE_ASSETS = "/console/assets/";

type Asset = { body: Blob; type: string };
type ConsoleBundle = { html: string; assets: Map<string, Asset> };

const baseName = (path: string) => path.slice(path.lastIndexOf("/") + 1);

/** The page with its asset references pointed at CONSOLE_ASSETS (Bun writes `/x` or `./x`). */
function rewriteHtml(html: string, names: Iterable<string>): string {
  let out = html;
  for (const name of names) out = out.replaceAll(new RegExp(`(src|href)="\\.?/${name.replace(/\./g, "\\.")}"`, "g"), `$1="${CONSOLE_ASSETS}${name}"`);
  return out;
}

async function loadBundle(): Promise<ConsoleBundle> {
  const assets = new Map<string, Asset>();
  let html: string | undefined;
  if (page.files) {
    for (const f of page.files) {
      if (f.loader === "html") html = await Bun.file(f.path).text();
      else assets.set(baseName(f.path), { body: Bun.file(f.path), type: f.headers["content-type"] });
    }
  } else {
    const built = await Bun.build({ entrypoints: [page.index], target: "browser", minify: true });
    if (!built.success) throw new Error("the console bundle did not build");
    for (const out of built.outputs) {
      if (out.path.endsWith(".html")) html = await out.text();
      else assets.set(baseName(out.path), { body: out, type: out.type });
    }
  }
  if (html === undefined) throw new Error("the console bundle has no page");
  return { html: rewriteHtml(html, assets.keys()), assets };
}

let bundle: Promise<ConsoleBundle> | undefined;

function respond(req: Request, body: Blob | string, type: string, cache: string): Response {
  if (req.method !== "GET" && req.method !== "HEAD") {
    return errorResponse("NOT_FOUND", CONSOLE_HEADERS);
  }
  return new Response(req.method === "HEAD" ? null : body, { headers: { ...CONSOLE_HEADERS, "content-type": type, "cache-control": cache } });
}

async function servePage(req: Request): Promise<Response> {
  bundle ??= loadBundle();
  return respond(req, (await bundle).html, "text/html;charset=utf-8", "no-cache");
}

async function serveAsset(req: Request & { params: Record<string, string> }): Promise<Response> {
  bundle ??= loadBundle();
  const asset = (await bundle).assets.get(req.params.name ?? "");
  if (asset === undefined) return errorResponse("NOT_FOUND", CONSOLE_HEADERS);
  // Content-hashed names: a new build gets new names, so a long cache is safe.
  return respond(req, asset.body, asset.type, "public, max-age=31536000, immutable");
}

/** Bun.serve routes for the console; everything else goes to the desk's fetch handler. */
export function consoleRoutes() {
  return {
    "/console": servePage,
    "/console/": servePage,
    "/console/assets/:name": serveAsset,
  };
}
