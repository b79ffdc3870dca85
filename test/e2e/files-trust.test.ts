// The desk and the approver trust their files on disk only as core/private-files.ts allows
// (SPEC 6, 7.1, 8.1), checked through the compiled binary as the review did: another user's
// directory or key, a directory others can write, links, a ledger others can read. Each refusal
// is exit 1 before listening, one error line and a hint, and leaves every file as it was.
// "Another user" is uid 65534 (chown, see other-user.ts).
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { chmodSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { generateSigningKey } from "../../src/core/receipt/index.ts";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { approverArgs, startApprover } from "../helpers/approver-process.ts";
import { runBinary } from "../helpers/binary.ts";
import { DESK_TOKEN, startDeskProcess } from "../helpers/desk-process.ts";
import { giveToOtherUser, OTHER_UID } from "../helpers/other-user.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);
const ME = process.geteuid!();

/** Every entry under `dir` (and `dir` itself): name, type, mode, owner and contents. */
function snapshot(dir: string): string[] {
  const rows: string[] = [];
  const walk = (p: string, name: string) => {
    const st = lstatSync(p);
    const what = st.isSymbolicLink() ? "link" : st.isDirectory() ? "dir" : Buffer.from(readFileSync(p)).toString("base64");
    rows.push(`${name} ${(st.mode & 0o7777).toString(8)} ${st.uid} ${what}`);
    if (st.isDirectory() && !st.isSymbolicLink()) for (const e of readdirSync(p).sort()) walk(join(p, e), `${name}/${e}`);
  };
  walk(dir, ".");
  return rows;
}

function expectRefused(r: { code: number; stdout: string; stderr: string }, error: string, hint: string) {
  expect(r).toEqual({ code: 1, stdout: "", stderr: `ask-only: error: ${error}\nask-only: hint: ${hint}\n` });
}

describe("the desk's data directory (binary)", () => {
  const desk = (data: string) => runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data], { env: { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN } });
  const FOREIGN_FILE_HINT = "only this user's own files are trusted: remove it if you do not know where it came from";

  test("a 0777 directory another user prepared with its own signing key is refused, untouched", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    mkdirSync(data);
    chmodSync(data, 0o777);
    writeFileSync(join(data, "receipt-signing.key"), generateSigningKey().privatePem, { mode: 0o600 });
    writeFileSync(join(data, "sealing.key"), new Uint8Array(32).fill(7), { mode: 0o600 });
    giveToOtherUser(data, join(data, "receipt-signing.key"), join(data, "sealing.key"));
    const before = snapshot(data);
    expectRefused(await desk(data), `${data} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`, "use a directory of your own, or run as its owner");
    expect(snapshot(data)).toEqual(before);
  });

  test("a directory of this user that others can write is refused, untouched", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    mkdirSync(data);
    chmodSync(data, 0o777);
    expectRefused(await desk(data), `${data} can be written by group or others (mode 0777)`, `run: chmod go-w ${data}`);
    expect(snapshot(data)).toEqual([". 777 0 dir"]);
  });

  test("a key another user put in the directory is refused, naming it; nothing is made", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    mkdirSync(data, { mode: 0o700 });
    const key = join(data, "receipt-signing.key");
    writeFileSync(key, generateSigningKey().privatePem, { mode: 0o600 });
    giveToOtherUser(key);
    const before = snapshot(data);
    expectRefused(await desk(data), `${key} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`, FOREIGN_FILE_HINT);
    expect(snapshot(data)).toEqual(before);
  });

  test("links are refused: the directory, a key, the ledger, the lock; a planted -wal too", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    const first = await startDeskProcess(data);
    expect(await first.stop()).toBe(0);
    const elsewhere = join(tmp.path, "elsewhere");
    mkdirSync(elsewhere, { mode: 0o700 });

    const linkedDir = join(tmp.path, "linked-data");
    symlinkSync(data, linkedDir);
    expectRefused(await desk(linkedDir), `${linkedDir} is a symbolic link; refusing to follow it`, "give the real directory's path");

    for (const name of ["receipt-signing.key", "sealing.key", "desk.db", "desk.lock"]) {
      const path = join(data, name);
      const moved = join(elsewhere, name);
      renameSync(path, moved);
      symlinkSync(moved, path);
      const before = snapshot(tmp.path);
      expectRefused(await desk(data), `${path} is a symbolic link; refusing to follow it`, "put the file itself there");
      expect(snapshot(tmp.path)).toEqual(before);
      rmSync(path);
      renameSync(moved, path);
    }

    const wal = join(data, "desk.db-wal");
    writeFileSync(wal, "their pages", { mode: 0o600 });
    giveToOtherUser(wal);
    expectRefused(await desk(data), `${wal} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`, FOREIGN_FILE_HINT);
    expect(readFileSync(wal, "utf8")).toBe("their pages");
    rmSync(wal);

    // Put back as it was, the directory serves again.
    const again = await startDeskProcess(data);
    expect(await again.stop()).toBe(0);
  });

  test("a parent others can write (not sticky) is refused before the directory is made", async () => {
    await using tmp = tempDir();
    const shared = join(tmp.path, "shared");
    mkdirSync(shared);
    chmodSync(shared, 0o777);
    const data = join(shared, "desk-data");
    expectRefused(
      await desk(data),
      `${shared} can be written by group or others (mode 0777), who could replace ${data}`,
      `run: chmod go-w ${shared}, or keep it under directories that only you or root can write`,
    );
    expect(readdirSync(shared)).toEqual([]);
  });

  test("desk check holds the same rules", async () => {
    await using tmp = tempDir();
    const data = join(tmp.path, "desk-data");
    const first = await startDeskProcess(data);
    expect(await first.stop()).toBe(0);
    chmodSync(join(data, "desk.db"), 0o644);
    expectRefused(
      await runBinary(["desk", "check", "--data", data]),
      `${join(data, "desk.db")} is readable by others (mode 0644)`,
      `run: chmod 600 ${join(data, "desk.db")}`,
    );
  });
});

describe("the approver's ask ledger (binary)", () => {
  const dir = tempDir("ask-only-files-");
  let link: LinkPaths;
  beforeAll(async () => {
    mkdirSync(join(dir.path, "link"), { mode: 0o700 });
    link = await writeLink(join(dir.path, "link"));
  });
  afterAll(() => dir[Symbol.dispose]());

  test("asks.db, -wal and -shm are 0600 and the state directory 0700, whatever the umask", async () => {
    const state = join(dir.path, "state-ok", "ask-only");
    const db = join(state, "asks.db");
    // The binary inherits the shell's umask; 022 is the usual one that made the ledger 0644.
    const old = process.umask(0o022);
    let ap: Awaited<ReturnType<typeof startApprover>>;
    try {
      ap = await startApprover({ files: approverFiles(link), db });
    } finally {
      process.umask(old);
    }
    await ap.err.waitFor(/type "help"/);
    const modes = [state, db, `${db}-wal`, `${db}-shm`].map((p) => `${p} ${(statSync(p).mode & 0o777).toString(8)}`);
    expect(await ap.stop()).toBe(0);
    expect(modes).toEqual([`${state} 700`, `${db} 600`, `${db}-wal 600`, `${db}-shm 600`]);
    for (const f of readdirSync(state)) expect(`${f} ${(statSync(join(state, f)).mode & 0o777).toString(8)}`).toBe(`${f} 600`);
  });

  test("a ledger group or others can read stops the approver before it listens, untouched", async () => {
    const state = join(dir.path, "state-open");
    const db = join(state, "asks.db");
    {
      await using ap = await startApprover({ files: approverFiles(link), db });
      await ap.err.waitFor(/type "help"/);
    }
    chmodSync(db, 0o640);
    const before = snapshot(state);
    expectRefused(await runBinary(approverArgs({ files: approverFiles(link), db })), `${db} is readable by others (mode 0640)`, `run: chmod 600 ${db}`);
    expect(snapshot(state)).toEqual(before);
  });

  test("another user's state directory or ledger, a linked ledger, a directory others can write: refused", async () => {
    const run = (db: string) => runBinary(approverArgs({ files: approverFiles(link), db }));
    const theirs = join(dir.path, "theirs");
    mkdirSync(theirs, { mode: 0o700 });
    giveToOtherUser(theirs);
    expectRefused(
      await run(join(theirs, "asks.db")),
      `${theirs} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`,
      "use a directory of your own, or run as its owner",
    );
    expect(readdirSync(theirs)).toEqual([]);

    const mine = join(dir.path, "mine");
    mkdirSync(mine, { mode: 0o700 });
    const planted = join(mine, "asks.db");
    writeFileSync(planted, "", { mode: 0o600 });
    giveToOtherUser(planted);
    expectRefused(
      await run(planted),
      `${planted} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`,
      "only this user's own files are trusted: remove it if you do not know where it came from",
    );

    const real = join(dir.path, "state-open", "asks.db");
    const linked = join(dir.path, "linked");
    mkdirSync(linked, { mode: 0o700 });
    symlinkSync(real, join(linked, "asks.db"));
    expectRefused(await run(join(linked, "asks.db")), `${join(linked, "asks.db")} is a symbolic link; refusing to follow it`, "put the file itself there");

    const open = join(dir.path, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    expectRefused(await run(join(open, "asks.db")), `${open} can be written by group or others (mode 0777)`, `run: chmod go-w ${open}`);
    expect(readdirSync(open)).toEqual([]);
  });
});
