// The compiled desk's start-up as an operator reads it: where its admin token comes from (a file,
// the environment, the stored hash, or newly made and shown once), and a port in use found before
// anything is created or any token shown.
import { describe, expect, test } from "bun:test";
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { DESK_TOKEN, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

const FILE_TOKEN = "file-admin-token-0123456789abcdefghijklmnopqrstuv";

/** The desk's `admin token:` log line. */
const tokenLine = (stderr: string) => stderr.split("\n").find((l) => l.startsWith("ask-only: admin token: "));

describe("desk start-up (binary)", () => {
  test("says where the admin token comes from: made and shown once, then the stored hash, then the environment or a file", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    const db = join(data, "desk.db");

    const first = await startDeskProcess(data, [], { env: {} });
    expect(await first.stop()).toBe(0);
    expect(tokenLine(first.stderr())).toBe(`ask-only: admin token: made now and shown once on stdout; only its hash is stored, in ${db}`);
    expect(first.stdout()).toMatch(/^admin token \(shown once; only its hash is stored\): [A-Za-z0-9_-]{43}\n/m);

    const second = await startDeskProcess(data, [], { env: {} });
    expect(await second.stop()).toBe(0);
    expect(tokenLine(second.stderr())).toBe(`ask-only: admin token: the one shown at the first start (only its hash is stored, in ${db})`);
    expect(second.stdout()).not.toContain("admin token");

    const fromEnv = await startDeskProcess(data);
    expect((await fromEnv.admin("GET", "/admin/orgs")).status).toBe(200);
    expect(await fromEnv.stop()).toBe(0);
    expect(tokenLine(fromEnv.stderr())).toBe("ask-only: admin token: from ASK_ONLY_DESK_ADMIN_TOKEN (it replaces the one made at the first start)");

    const file = join(tmp.path, "admin.token");
    writeFileSync(file, `${FILE_TOKEN}\n`, { mode: 0o600 });
    const fromFile = await startDeskProcess(join(tmp.path, "other"), ["--admin-token-file", file], {
      env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN },
      token: FILE_TOKEN,
    });
    expect((await fromFile.admin("GET", "/admin/orgs")).status).toBe(200);
    expect(await fromFile.stop()).toBe(0);
    expect(tokenLine(fromFile.stderr())).toBe(`ask-only: admin token: from the file ${file} (--admin-token-file)`);
  });

  test("a port in use stops it with a hint before it creates a file or shows a token", async () => {
    await using tmp = tempDir();
    const holder = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("taken") });
    try {
      const data = join(tmp.path, "desk-data");
      const r = await runBinary(["desk", "--listen", `127.0.0.1:${holder.port}`, "--data", data]);
      expect(r).toEqual({
        code: 1,
        stdout: "",
        stderr: `ask-only: error: cannot listen on 127.0.0.1:${holder.port}: EADDRINUSE\nask-only: hint: another process may hold the port; choose another with --listen HOST:PORT\n`,
      });
      expect(existsSync(data)).toBe(false);
    } finally {
      await holder.stop(true);
    }
  });
});
