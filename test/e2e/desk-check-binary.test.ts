// `desk check` as the compiled binary runs it, on a ledger of many pages: the worker threads are
// built into the binary (it passes from a working directory with no source in it), a planted
// forgery is found on them, and SIGINT or SIGTERM mid-check stops it with how far it got, the
// word that it is incomplete, and exit 1: a stopped check never reads as a pass.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { BINARY, runBinary, testEnv } from "../helpers/binary.ts";
import { fillReceipts } from "../helpers/receipt-ledger.ts";
import { tempDir } from "../helpers/tmp.ts";

const RECEIPTS = 20_000;
/** No progress line within the hour: stderr holds only the verdict, however loaded the machine. */
const QUIET = { ASK_ONLY_DESK_CHECK_PROGRESS_MS: "3600000" };
const dir = tempDir("desk-check-bin-");
const data = join(dir.path, "d");
const elsewhere = tempDir("desk-check-cwd-");

beforeAll(async () => {
  mkdirSync(data, { mode: 0o700 });
  const ledger = new SqliteDeskLedger(join(data, "desk.db"));
  await fillReceipts(ledger, RECEIPTS);
  await ledger.close();
  chmodSync(join(data, "desk.db"), 0o600);
}, 120_000);

afterAll(() => {
  dir[Symbol.dispose]();
  elsewhere[Symbol.dispose]();
});

/** Starts `desk check` and sends `signal` once it has said how far it got. */
async function stoppedBy(signal: "SIGINT" | "SIGTERM") {
  const proc = Bun.spawn([BINARY, "desk", "check", "--data", data], {
    // One thread and a progress line every 20 ms: the signal lands mid-check.
    env: testEnv({ ASK_ONLY_DESK_CHECK_THREADS: "1", ASK_ONLY_DESK_CHECK_PROGRESS_MS: "20" }),
    cwd: elsewhere.path,
    stdout: "pipe",
    stderr: "pipe",
  });
  const stdout = new Response(proc.stdout).text();
  const reader = (proc.stderr as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  let stderr = "";
  while (!/receipts checked/.test(stderr)) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value, { stream: true });
  }
  proc.kill(signal);
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    stderr += decoder.decode(value, { stream: true });
  }
  return { code: await proc.exited, stdout: await stdout, stderr };
}

describe("desk check, the compiled binary", () => {
  test("a sound ledger of many pages passes, run from a directory with no source in it", async () => {
    const r = await runBinary(["desk", "check", "--data", data], { cwd: elsewhere.path, env: QUIET });
    expect(r).toEqual({
      code: 0,
      stdout: `ok: for every key and period, spent = charges + open reservations\nok: ${RECEIPTS} receipts: signatures, readable copies and 32 key chains intact\n`,
      stderr: "",
    });
  }, 60_000);

  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    test(`${signal} mid-check: how far it got, incomplete, exit 1`, async () => {
      const r = await stoppedBy(signal);
      expect(r.code).toBe(1);
      expect(r.stdout).toBe("ok: for every key and period, spent = charges + open reservations\n");
      const stopped = /ask-only: error: desk check stopped after (\d+) receipts: the check is incomplete\n/.exec(r.stderr);
      expect(stopped).not.toBeNull();
      expect(Number(stopped![1])).toBeLessThan(RECEIPTS);
      expect(r.stderr).toContain("ask-only: hint: run desk check again and let it finish\n");
      expect(r.stderr).toMatch(/^(ask-only: desk check: \d+ receipts checked, \d+\/s\n)+ask-only: error: /);
    }, 60_000);
  }

  test("a forged signature in the middle is found on the threads: FAILED, exit 1", async () => {
    const db = join(data, "desk.db");
    const ledger = new SqliteDeskLedger(db);
    const raw = ledger.testOnlyDatabase();
    const rows = raw.query("SELECT id, key_id, seq FROM receipts ORDER BY key_id, seq LIMIT 2 OFFSET 10000").all() as {
      id: string;
      key_id: string;
      seq: number;
    }[];
    const [victim, other] = rows as [(typeof rows)[0], (typeof rows)[0]];
    raw.run("DROP TRIGGER receipts_no_update");
    // Another receipt's signature over this one's payload.
    raw.query("UPDATE receipts SET signature = (SELECT signature FROM receipts WHERE id = ?) WHERE id = ?").run(other.id, victim.id);
    await ledger.close();
    const r = await runBinary(["desk", "check", "--data", data], { cwd: elsewhere.path, env: QUIET });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`FAILED: receipt ${victim.id} (key ${victim.key_id} seq ${victim.seq}): signature does not verify under kid `);
    expect(r.stdout).not.toContain("receipts: signatures, readable copies");
    expect(r.stderr).toBe("ask-only: error: the desk ledger has 1 problem(s)\n");
  }, 60_000);

  test("ASK_ONLY_DESK_CHECK_THREADS that is not a count is a usage error", async () => {
    const r = await runBinary(["desk", "check", "--data", data], { env: { ASK_ONLY_DESK_CHECK_THREADS: "all" } });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toStartWith("ask-only: error: ASK_ONLY_DESK_CHECK_THREADS must be a whole number from 1 to 999\n");
  });
});
