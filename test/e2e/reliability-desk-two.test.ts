// Two desk processes on one data directory: the second refuses to start (exit 1, a clear error)
// while the first serves, so it can never refund the first one's calls in flight as abandoned;
// a desk killed with SIGKILL leaves no lock behind, and the next one starts and recovers.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { existsSync, mkdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { adminJson, callTool, DESK_TOKEN, startDeskProcess, tryStartDesk } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";

setDefaultTimeout(30_000);

let fx: UpstreamFixture;
beforeAll(() => {
  fx = startUpstreamFixture();
});
afterAll(async () => {
  await fx.stop();
});

describe("one desk per data directory (binary)", () => {
  test("a second desk on the same directory exits 1 and leaves the first one's call in flight alone", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const first = await startDeskProcess(data, ["--upstream-timeout", "20"]);
    try {
      await adminJson(first, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
      await adminJson(first, "PUT", "/admin/tools/fx__hang", { price_mc: 700, upstream_cost_mc: 0 });
      const org = (await adminJson(first, "POST", "/admin/orgs", { name: "two" })).org_id as string;
      const key = await adminJson(first, "POST", "/admin/keys", { org_id: org, budget_mc: 700, reset: "none", allow: ["fx__hang"] });
      const hangingBefore = fx.hanging();
      const inFlight = callTool(first.url, key.secret as string, "fx__hang", {});
      await fx.whenHanging(hangingBefore + 1);

      const second = await tryStartDesk(data);
      expect(second.code).toBe(1);
      expect(second.stdout).toBe("");
      expect(second.stderr).toBe(
        `ask-only: error: another desk is running on ${data} (it holds ${join(data, "desk.lock")})\n` +
          "ask-only: hint: stop that desk first, or give this desk its own --data directory\n",
      );
      expect((statSync(join(data, "desk.lock")).mode & 0o777).toString(8)).toBe("600");

      // Had the second desk started, its start-up sweep would have refunded this reservation
      // as abandoned and the first desk would answer 504 for an upstream answer it received.
      fx.release();
      const answer = await inFlight;
      expect(answer.status).toBe(200);
      expect(answer.headers.get("x-clearing-outcome")).toBe("charged");
      expect(((await answer.json()) as { receipt: { receipt: { outcome: string } } }).receipt.receipt.outcome).toBe("charged");
    } finally {
      expect(await first.stop()).toBe(0);
    }
    // A desk stopped normally released the lock: the next start succeeds.
    const next = await startDeskProcess(data);
    expect(await next.stop()).toBe(0);
  });

  test("SIGKILL leaves no stale lock: the restart starts at once and refunds the abandoned call", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    const first = await startDeskProcess(data, ["--upstream-timeout", "20"]);
    await adminJson(first, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
    await adminJson(first, "PUT", "/admin/tools/fx__hang", { price_mc: 700, upstream_cost_mc: 0 });
    const org = (await adminJson(first, "POST", "/admin/orgs", { name: "two" })).org_id as string;
    const key = await adminJson(first, "POST", "/admin/keys", { org_id: org, budget_mc: 700, reset: "none", allow: ["fx__hang"] });
    const hangingBefore = fx.hanging();
    const inFlight = callTool(first.url, key.secret as string, "fx__hang", {}).catch((err: unknown) => err);
    await fx.whenHanging(hangingBefore + 1);
    expect(await first.kill()).not.toBe(0);
    expect(await inFlight).toBeInstanceOf(Error);

    const again = await startDeskProcess(data);
    try {
      expect(again.stderr()).toContain("refunded 1 abandoned reservation(s)");
      const k = await adminJson(again, "GET", `/admin/keys/${key.key_id}`);
      expect(k.spent_mc).toBe(0);
    } finally {
      expect(await again.stop()).toBe(0);
    }
    const check = await runBinary(["desk", "check", "--data", data]);
    expect(check.code).toBe(0);
  });

  test("a second desk on another directory but the same port exits 1 before it creates anything: it never shares the port", async () => {
    await using tmp = tempDir();
    const first = await startDeskProcess(join(tmp.path, "a"));
    try {
      const port = new URL(first.url).port;
      const r = await runBinary(["desk", "--listen", `127.0.0.1:${port}`, "--data", join(tmp.path, "b")], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN } });
      expect(r).toEqual({
        code: 1,
        stdout: "",
        stderr: `ask-only: error: cannot listen on 127.0.0.1:${port}: EADDRINUSE\nask-only: hint: another process may hold the port; choose another with --listen HOST:PORT\n`,
      });
      // The port is checked first: no data directory, key or token was made for nothing.
      expect(existsSync(join(tmp.path, "b"))).toBe(false);
    } finally {
      expect(await first.stop()).toBe(0);
    }
  });

  test("a lock file that is not one stops the desk with a hint, before it touches the ledger", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "d");
    mkdirSync(data, { mode: 0o700 });
    writeFileSync(join(data, "desk.lock"), "x".repeat(200), { mode: 0o600 });
    const r = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN } });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe("");
    expect(r.stderr).toBe(
      `ask-only: error: cannot lock ${join(data, "desk.lock")}: SQLITE_NOTADB\nask-only: hint: if no desk runs on this directory, remove that file\n`,
    );
    expect(() => statSync(join(data, "desk.db"))).toThrow();
  });

  test("SIGTERM sent the moment the desk says it listens stops it cleanly (exit 0), start after start", async () => {
    await using tmp = tempDir();
    const codes: number[] = [];
    // Before the fix the signal handlers went in after that line: 3 stops in 4 died of the signal (143).
    for (let i = 0; i < 10; i++) {
      const desk = await startDeskProcess(join(tmp.path, "d"));
      codes.push(await desk.stop());
    }
    expect(codes).toEqual(new Array(10).fill(0));
  });
});
