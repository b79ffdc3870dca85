// core/private-files.ts: the one exclusive-file writer and the rules every trusted directory and
// file passes (SPEC 2, 6, 8.1). "Another user" is uid 65534, made with chown (see other-user.ts).
import { describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { join, relative } from "node:path";
import {
  canonicalPath,
  checkPrivateFile,
  createPrivateFile,
  createPrivateFileIfMissing,
  expectSameFile,
  openPrivateDir,
  PrivatePathError,
  readPrivateFile,
} from "../../src/core/private-files.ts";
import { giveToOtherUser, OTHER_UID } from "../helpers/other-user.ts";
import { tempDir } from "../helpers/tmp.ts";

const ME = process.geteuid!();
const mode = (p: string) => statSync(p).mode & 0o7777;

/** Runs `f`, expecting a PrivatePathError; returns it for its fields. */
function refusal(f: () => unknown): PrivatePathError {
  try {
    f();
  } catch (err) {
    if (err instanceof PrivatePathError) return err;
    throw err;
  }
  throw new Error("expected a PrivatePathError, and nothing was refused");
}

function withUmask<T>(mask: number, f: () => T): T {
  const old = process.umask(mask);
  try {
    return f();
  } finally {
    process.umask(old);
  }
}

describe("createPrivateFile", () => {
  test("creates the file with its mode, whatever the umask", () => {
    using tmp = tempDir();
    withUmask(0o277, () => {
      createPrivateFile(join(tmp.path, "a.pem"), "public", { mode: 0o644 });
      createPrivateFile(join(tmp.path, "a.key"), "secret");
    });
    withUmask(0, () => createPrivateFile(join(tmp.path, "b.key"), "secret"));
    expect(mode(join(tmp.path, "a.pem"))).toBe(0o644);
    expect(mode(join(tmp.path, "a.key"))).toBe(0o600);
    expect(mode(join(tmp.path, "b.key"))).toBe(0o600);
    expect(readFileSync(join(tmp.path, "a.key"), "utf8")).toBe("secret");
  });

  test("an existing file is left as it was", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "client.key");
    writeFileSync(path, "precious");
    expect(() => createPrivateFile(path, "new key")).toThrow(`${path} already exists; refusing to overwrite it`);
    expect(readFileSync(path, "utf8")).toBe("precious");
  });

  test("a link that points nowhere is not followed (O_EXCL)", () => {
    using tmp = tempDir();
    const target = join(tmp.path, "elsewhere.key");
    const path = join(tmp.path, "client.key");
    symlinkSync(target, path);
    expect(refusal(() => createPrivateFile(path, "new key")).problem).toBe("exists");
    expect(existsSync(target)).toBe(false);
  });

  test("a link swapped in for the name right after the open changes no other file's mode", () => {
    // The race of the review, made deterministic: between the open and the mode change the name
    // is moved aside and replaced by a link to another user's file.
    using tmp = tempDir();
    const victim = join(tmp.path, "victim");
    writeFileSync(victim, "theirs");
    chmodSync(victim, 0o644);
    giveToOtherUser(victim);
    const path = join(tmp.path, "client.key");
    const aside = join(tmp.path, "opened");
    createPrivateFile(path, "secret", {
      testOnlyAfterOpen: (p) => {
        renameSync(p, aside);
        symlinkSync(victim, p);
      },
    });
    expect(mode(victim)).toBe(0o644);
    expect(statSync(victim).uid).toBe(OTHER_UID);
    expect(readFileSync(victim, "utf8")).toBe("theirs");
    // The file that was opened got the mode and the contents.
    expect(mode(aside)).toBe(0o600);
    expect(readFileSync(aside, "utf8")).toBe("secret");
  });

  test("createPrivateFileIfMissing makes the contents only for a new file", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "k");
    let made = 0;
    const contents = () => `key ${++made}`;
    expect(createPrivateFileIfMissing(path, contents)).toBe(true);
    expect(createPrivateFileIfMissing(path, contents)).toBe(false);
    symlinkSync(join(tmp.path, "nowhere"), join(tmp.path, "l"));
    expect(createPrivateFileIfMissing(join(tmp.path, "l"), contents)).toBe(false);
    expect(made).toBe(1);
    expect(existsSync(join(tmp.path, "nowhere"))).toBe(false);
  });

  test("no source file sets a mode by name: only fchmod on an open descriptor", () => {
    const src = join(import.meta.dir, "../../src");
    const offenders: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        const p = join(dir, e.name);
        if (e.isDirectory()) walk(p);
        else if (/\.tsx?$/.test(e.name) && /(?<![A-Za-z])l?chmod(Sync)?\s*\(/.test(readFileSync(p, "utf8"))) {
          offenders.push(relative(src, p));
        }
      }
    };
    walk(src);
    expect(offenders).toEqual([]);
  });
});

describe("openPrivateDir", () => {
  test("creates the directory and its missing parents 0700 whatever the umask", () => {
    using tmp = tempDir();
    const dir = join(tmp.path, "a", "b", "data");
    const opened = withUmask(0o277, () => openPrivateDir(dir, { create: true }));
    expect(opened).toEqual({ path: dir, created: true });
    for (const p of [join(tmp.path, "a"), join(tmp.path, "a", "b"), dir]) expect(mode(p)).toBe(0o700);
    expect(openPrivateDir(dir, { create: false })).toEqual({ path: dir, created: false });
  });

  test("an existing directory of this user that others cannot write is accepted", () => {
    using tmp = tempDir();
    const dir = join(tmp.path, "d");
    mkdirSync(dir);
    chmodSync(dir, 0o755);
    expect(openPrivateDir(dir, { create: true })).toEqual({ path: dir, created: false });
    expect(mode(dir)).toBe(0o755);
  });

  test("a directory group or others can write is refused, sticky or not, and left as it was", () => {
    using tmp = tempDir();
    for (const m of [0o777, 0o770, 0o702, 0o1777]) {
      const dir = join(tmp.path, `d${m.toString(8)}`);
      mkdirSync(dir);
      chmodSync(dir, m);
      const err = refusal(() => openPrivateDir(dir, { create: true }));
      expect(err.problem).toBe("open-to-others");
      expect(err.message).toBe(`${dir} can be written by group or others (mode ${m.toString(8).padStart(4, "0")})`);
      expect(err.hint).toBe(`run: chmod go-w ${dir}`);
      expect(mode(dir)).toBe(m);
      expect(readdirSync(dir)).toEqual([]);
    }
  });

  test("a directory another user owns is refused, naming the owner", () => {
    using tmp = tempDir();
    const dir = join(tmp.path, "theirs");
    mkdirSync(dir, { mode: 0o700 });
    giveToOtherUser(dir);
    const err = refusal(() => openPrivateDir(dir, { create: true }));
    expect(err.problem).toBe("foreign-owner");
    expect(err.message).toBe(`${dir} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`);
    expect(err.hint).toBe("use a directory of your own, or run as its owner");
  });

  test("a symbolic link as the directory is refused, even to a good directory", () => {
    using tmp = tempDir();
    const real = join(tmp.path, "real");
    mkdirSync(real, { mode: 0o700 });
    const link = join(tmp.path, "link");
    symlinkSync(real, link);
    const err = refusal(() => openPrivateDir(link, { create: true }));
    expect(err.problem).toBe("symlink");
    expect(err.message).toBe(`${link} is a symbolic link; refusing to follow it`);
    const dangling = join(tmp.path, "dangling");
    symlinkSync(join(tmp.path, "nowhere"), dangling);
    expect(refusal(() => openPrivateDir(dangling, { create: true })).problem).toBe("symlink");
    expect(existsSync(join(tmp.path, "nowhere"))).toBe(false);
  });

  test("a file in the directory's place is refused", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "f");
    writeFileSync(path, "");
    expect(refusal(() => openPrivateDir(path, { create: true })).message).toBe(`${path} exists and is not a directory`);
  });

  test("a missing directory without create is refused", () => {
    using tmp = tempDir();
    expect(refusal(() => openPrivateDir(join(tmp.path, "x", "y"), { create: false })).problem).toBe("missing");
    expect(existsSync(join(tmp.path, "x"))).toBe(false);
  });

  test("a parent others can write is refused unless it is sticky; nothing is made below it", () => {
    using tmp = tempDir();
    const open = join(tmp.path, "open");
    mkdirSync(open);
    chmodSync(open, 0o777);
    const err = refusal(() => openPrivateDir(join(open, "a", "data"), { create: true }));
    expect(err.problem).toBe("unsafe-parent");
    expect(err.message).toBe(`${open} can be written by group or others (mode 0777), who could replace ${join(open, "a", "data")}`);
    expect(err.hint).toBe(`run: chmod go-w ${open}, or keep it under directories that only you or root can write`);
    expect(readdirSync(open)).toEqual([]);
    chmodSync(open, 0o1777);
    expect(openPrivateDir(join(open, "a", "data"), { create: true }).created).toBe(true);
  });

  test("a parent another user owns is refused", () => {
    using tmp = tempDir();
    const theirs = join(tmp.path, "theirs");
    mkdirSync(theirs, { mode: 0o755 });
    const mine = join(theirs, "mine");
    mkdirSync(mine, { mode: 0o700 });
    giveToOtherUser(theirs);
    const err = refusal(() => openPrivateDir(mine, { create: true }));
    expect(err.problem).toBe("unsafe-parent");
    expect(err.message).toBe(`${theirs} is owned by uid ${OTHER_UID}, who could replace ${mine}`);
  });

  test("links in the parents are resolved once: every later name goes through the real path", () => {
    using tmp = tempDir();
    const real = join(tmp.path, "real");
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, join(tmp.path, "via"));
    expect(canonicalPath(join(tmp.path, "via", "data"))).toBe(join(real, "data"));
    expect(openPrivateDir(join(tmp.path, "via", "data"), { create: true })).toEqual({ path: join(real, "data"), created: true });
    // The last component is never resolved: a link there is refused, not followed.
    expect(canonicalPath(join(tmp.path, "via"))).toBe(join(tmp.path, "via"));
  });
});

describe("checkPrivateFile and readPrivateFile", () => {
  test("a file of this user that only it can read is read", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "k");
    createPrivateFile(path, "secret");
    expect(readPrivateFile(path).toString()).toBe("secret");
    expect(checkPrivateFile(path)).toEqual({ dev: statSync(path).dev, ino: statSync(path).ino });
  });

  test("a file group or others may read, write or run is refused with a chmod hint", () => {
    using tmp = tempDir();
    const cases: [number, string][] = [
      [0o644, "readable"],
      [0o640, "readable"],
      [0o604, "readable"],
      [0o620, "writable"],
      [0o666, "readable and writable"],
      [0o710, "executable"],
    ];
    for (const [m, words] of cases) {
      const path = join(tmp.path, `k${m.toString(8)}`);
      writeFileSync(path, "secret");
      chmodSync(path, m);
      for (const check of [() => readPrivateFile(path), () => checkPrivateFile(path)]) {
        const err = refusal(check);
        expect(err.problem).toBe("open-to-others");
        expect(err.message).toBe(`${path} is ${words} by others (mode ${m.toString(8).padStart(4, "0")})`);
        expect(err.hint).toBe(`run: chmod 600 ${path}`);
      }
      expect(mode(path)).toBe(m);
    }
  });

  test("a file another user owns is refused, naming it, even at mode 0600", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "receipt-signing.key");
    createPrivateFile(path, "their key");
    giveToOtherUser(path);
    const err = refusal(() => readPrivateFile(path));
    expect(err.problem).toBe("foreign-owner");
    expect(err.message).toBe(`${path} is owned by uid ${OTHER_UID}, not by this user (uid ${ME})`);
  });

  test("a symbolic link is refused, to a good file or to nowhere", () => {
    using tmp = tempDir();
    const real = join(tmp.path, "real");
    createPrivateFile(real, "secret");
    const link = join(tmp.path, "link");
    symlinkSync(real, link);
    const err = refusal(() => readPrivateFile(link));
    expect(err.problem).toBe("symlink");
    expect(err.message).toBe(`${link} is a symbolic link; refusing to follow it`);
    symlinkSync(join(tmp.path, "nowhere"), join(tmp.path, "dangling"));
    expect(refusal(() => checkPrivateFile(join(tmp.path, "dangling"), { mayBeMissing: true })).problem).toBe("symlink");
  });

  test("a FIFO or a directory is refused without blocking", () => {
    using tmp = tempDir();
    const fifo = join(tmp.path, "fifo");
    expect(Bun.spawnSync(["mkfifo", "-m", "600", fifo]).exitCode).toBe(0);
    expect(refusal(() => readPrivateFile(fifo)).message).toBe(`${fifo} is not a regular file`);
    mkdirSync(join(tmp.path, "d"), { mode: 0o700 });
    expect(refusal(() => checkPrivateFile(join(tmp.path, "d"))).problem).toBe("not-file");
  });

  test("a missing file is refused, or null when it may be missing", () => {
    using tmp = tempDir();
    expect(refusal(() => readPrivateFile(join(tmp.path, "x"))).problem).toBe("missing");
    expect(checkPrivateFile(join(tmp.path, "x"), { mayBeMissing: true })).toBeNull();
  });

  test("expectSameFile refuses a name that now holds another file", () => {
    using tmp = tempDir();
    const path = join(tmp.path, "db");
    createPrivateFile(path, "");
    const before = checkPrivateFile(path)!;
    expectSameFile(path, before);
    renameSync(path, join(tmp.path, "old"));
    createPrivateFile(path, "");
    expect(refusal(() => expectSameFile(path, before)).problem).toBe("replaced");
  });
});
