// An MCP client that is not ours: the MCP Inspector CLI lists the tool (--strict: no schema
// portability problems) and calls it against a real approver (scripts/inspector-check.ts).
import { expect, setDefaultTimeout, test } from "bun:test";
import { resolve } from "node:path";

setDefaultTimeout(60_000);

test("the MCP Inspector CLI lists and calls `request`", async () => {
  const proc = Bun.spawn([process.execPath, resolve(import.meta.dir, "../../scripts/inspector-check.ts")], { stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, stderr }).toEqual({ code: 0, stderr: "" });
  expect(stdout).toMatch(/^inspector-check: tools\/list --strict ok \(\d+ ms\): request; /m);
  expect(stdout).toMatch(/^inspector-check: tools\/call ok \(\d+ ms\): \{"approval_id":"[0-9A-Z]{10}","state":"pending","expires_at":"[^"]+"\}$/m);
});
