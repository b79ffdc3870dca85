// bench:desk-approval in a small size: the compiled desk and approver, the person typing on a
// PTY. It must run through and print each figure; any answer it did not expect fails the run.
import { expect, test } from "bun:test";
import { join, resolve } from "node:path";

const root = resolve(import.meta.dir, "../..");

test("bench:desk-approval runs in a small size and prints the baseline, 202, pending and approved figures", async () => {
  const proc = Bun.spawn([process.execPath, join(root, "scripts/bench/desk-approval.ts"), "--asks", "3", "--baseline", "20"], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  expect({ code, err: code === 0 ? "" : err }).toEqual({ code: 0, err: "" });
  for (const what of ["charged (baseline)", "202 (spend ask sent)", "pending repeat", "approved repeat"]) {
    expect({
      what,
      found: new RegExp(`${what.replace(/[()]/g, "\\$&")}\\s+p50 \\d+\\.\\d\\d ms\\s+p99 \\d+\\.\\d\\d ms\\s+p50 ratio \\d+\\.\\d\\d`).test(out),
    }).toEqual({
      what,
      found: true,
    });
  }
}, 120_000);
