// The export benchmark in a small size: it fills a ledger through the compiled desk, exports it
// with a slow reader while calls go on, and must print every figure with every receipt exported.
import { expect, test } from "bun:test";
import { join, resolve } from "node:path";
import { BINARY } from "../helpers/binary.ts";

const root = resolve(import.meta.dir, "../..");

test("bench:desk-export runs in a small size and prints the export, RSS and concurrent-call figures", async () => {
  const proc = Bun.spawn([process.execPath, join(root, "scripts/bench/desk-export.ts"), "--receipts", "300", "--binary", BINARY], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
  expect(out).toMatch(/export\s+\d+ lines in/);
  expect(out).toMatch(/desk RSS\s+\d+\.\d MB before, \d+\.\d MB at most during/);
  expect(out).toMatch(/calls meanwhile\s+p50 \d+\.\d\d ms, p99 \d+\.\d\d ms over \d+ calls/);
}, 120_000);
