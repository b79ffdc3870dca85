// The README's main job, `npm start` (scripts/start.ts after the build), in a copy of the layout
// it expects (scripts/ and dist/ side by side): it makes certificates, prints the exact
// `claude mcp add` line, and runs the approver in the same terminal. The printed line, taken
// apart and run as an MCP client would, connects an agent whose ask is decided on that console.
import { afterAll, expect, setDefaultTimeout, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, symlinkSync } from "node:fs";
import { isAbsolute, join, resolve } from "node:path";
import { OutputWatch } from "../helpers/approver-process.ts";
import { BINARY } from "../helpers/binary.ts";
import { connectServeMcp } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-start-");
afterAll(() => dir[Symbol.dispose]());

test("npm start: certificates made (said so), the claude mcp add line, the approver on this terminal", async () => {
  const root = dir.path;
  mkdirSync(join(root, "scripts"));
  mkdirSync(join(root, "dist"));
  copyFileSync(resolve(import.meta.dir, "../../scripts/start.ts"), join(root, "scripts/start.ts"));
  symlinkSync(BINARY, join(root, "dist/ask-only"));
  const probe = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = probe.port;
  probe.stop(true);

  const proc = Bun.spawn([process.execPath, join(root, "scripts/start.ts"), "--listen", `127.0.0.1:${port}`, "--db", join(root, "asks.db")], {
    cwd: root,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: root, NO_COLOR: "1", TZ: "Etc/UTC" },
    stdin: "pipe",
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = new OutputWatch(proc.stdout);
  const err = new OutputWatch(proc.stderr);
  try {
    const line = (await out.waitFor(/^claude mcp add .*$/m))[0];
    await err.waitFor(/listening on https:\/\/127\.0\.0\.1:\d+/);
    expect(err.text).toContain(`start: no certificates in ${join(root, "certs")}; making them now`);
    expect(existsSync(join(root, "certs/client.key"))).toBe(true);

    // claude mcp add --transport stdio ask-only -e K=V ... -- /abs/dist/ask-only serve-mcp
    const words = line.split(" ");
    expect(words.slice(0, 6)).toEqual(["claude", "mcp", "add", "--transport", "stdio", "ask-only"]);
    const env: Record<string, string> = {};
    let i = 6;
    for (; words[i] === "-e"; i += 2) {
      const [k, ...v] = words[i + 1]!.split("=");
      env[k!] = v.join("=");
    }
    expect(words.slice(i)).toEqual(["--", join(root, "dist/ask-only"), "serve-mcp"]);
    expect(Object.keys(env).sort()).toEqual(["ASK_ONLY_PAY_CA", "ASK_ONLY_PAY_CLIENT_CERT", "ASK_ONLY_PAY_CLIENT_KEY", "ASK_ONLY_PAY_URL"]);
    expect(env.ASK_ONLY_PAY_URL).toBe(`https://localhost:${port}`);
    for (const k of ["ASK_ONLY_PAY_CA", "ASK_ONLY_PAY_CLIENT_CERT", "ASK_ONLY_PAY_CLIENT_KEY"]) {
      expect(isAbsolute(env[k]!)).toBe(true);
      expect(existsSync(env[k]!)).toBe(true);
    }

    await using mcp = await connectServeMcp({ PATH: "/usr/bin:/bin", ...env });
    const id = (
      await mcp.request({
        verb: "pay",
        merchant: "Example Shop",
        amount: "19.00",
        currency: "EUR",
        card_handle: "card-2",
        checkout_url: "https://shop.example/checkout/123",
      })
    ).sc.approval_id as string;
    await out.waitFor(new RegExp(`approve ${id}   or   deny ${id}`));
    const at = out.text.length;
    proc.stdin.write(`approve ${id}\n`);
    proc.stdin.flush();
    await out.waitFor(new RegExp(`^${id}: approved: PAY 19\\.00 EUR at shop\\.example$`, "m"), at);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc.state).toBe("approved");
  } finally {
    proc.kill("SIGTERM");
    expect(await proc.exited).toBe(0);
  }
});
