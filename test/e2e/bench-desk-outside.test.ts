// The outsider's benchmark in a small size: Node's fetch and an MCP SDK upstream run by `node`
// around the compiled desk. It must run through and print every figure, with the desk's calls
// really cleared (the agent fails the run on any status it did not expect).
import { expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { BINARY } from "../helpers/binary.ts";

const root = resolve(import.meta.dir, "../..");

test("bench:desk-outside runs in a small size and prints the direct, desk, added and refusal figures", async () => {
  const proc = Bun.spawn(
    [process.execPath, join(root, "scripts/bench/desk-outside.ts"), "--calls", "30", "--rate", "200", "--seconds", "1", "--binary", BINARY],
    { cwd: root, stdout: "pipe", stderr: "pipe" },
  );
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
  const figure = /p50 (-?\d+\.\d{3})\s+p99 (-?\d+\.\d{3})\s+p99\.9 (-?\d+\.\d{3}) ms/;
  for (const what of ["direct", "via the desk", "added by the desk", "refusal"]) {
    const lines = out.split("\n").filter((line) => line.trimStart().startsWith(what) && figure.test(line));
    expect({ what, lines: lines.length }).toEqual({ what, lines: 2 });
  }
  expect(out).toContain("(30 calls)");
  expect(out).toMatch(/achieved \d+\/s/);
}, 120_000);
