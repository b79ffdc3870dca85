// A private directory and the private files in it: the one place that decides whether a file on
// disk can be trusted with a key or a ledger, and the one exclusive-file writer. Used by `certs`,
// the desk's data directory and the approver's ask ledger (SPEC 2, 6 and 8.1).
//
// The threat is another local user. A directory they own or can write lets them plant a key the
// desk would sign with, swap a file for a link between our check and our write (so a chmod or a
// write lands on a file of their choosing), or read what we keep. So: modes are set on the open
// descriptor, never by name; links are never followed; a file we read is judged by fstat of the
// very descriptor that is read, so a swap after the check cannot slip past it; a file SQLite
// opens is judged by lstat (never opened here, see checkPrivateFile) before and after SQLite's
// open, in a directory nobody else can change.
import {
  closeSync,
  constants,
  fchmodSync,
  fstatSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  readFileSync,
  realpathSync,
  renameSync,
  type Stats,
  writeSync,
} from "node:fs";
import { basename, dirname, join, resolve } from "node:path";

export type PrivatePathProblem =
  | "missing"
  | "exists"
  | "symlink"
  | "not-directory"
  | "not-file"
  | "foreign-owner"
  | "open-to-others"
  | "unsafe-parent"
  | "replaced"
  | "io";

/** A directory or file that cannot be trusted or written: the message names it, the hint says what to do. */
export class PrivatePathError extends Error {
  override name = "PrivatePathError";
  constructor(
    readonly problem: PrivatePathProblem,
    readonly path: string,
    message: string,
    readonly hint?: string,
  ) {
    super(message);
  }
}

/** Which file a name pointed at, to see that what SQLite opened is what was checked. */
export type FileIdentity = { dev: number; ino: number };

const STICKY = 0o1000;
const GROUP_OTHER_WRITE = 0o022;
const GROUP_OTHER_ANY = 0o077;
const READ_NO_FOLLOW = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK;

const octal = (mode: number) => (mode & 0o7777).toString(8).padStart(4, "0");
const errno = (err: unknown) => (err as NodeJS.ErrnoException)?.code ?? "error";
const euid = () => process.geteuid!();

function lstatOrNull(path: string): Stats | null {
  return lstatSync(path, { throwIfNoEntry: false }) ?? null;
}

/**
 * The absolute path with every symbolic link in its existing parents resolved, the last
 * component left as it is (a link there is refused, never followed). Every later open uses this
 * path, so a link in a parent cannot be re-pointed between the check and the use.
 */
export function canonicalPath(path: string): string {
  const abs = resolve(path);
  const parent = dirname(abs);
  return parent === abs ? abs : join(realParent(parent), basename(abs));
}

function realParent(path: string): string {
  try {
    return realpathSync(path);
  } catch (err) {
    const up = dirname(path);
    if (errno(err) !== "ENOENT" || up === path) throw ioError(path, err);
    return join(realParent(up), basename(path));
  }
}

function ioError(path: string, err: unknown): PrivatePathError {
  return new PrivatePathError("io", path, `cannot open ${path}: ${errno(err)}`);
}

/**
 * A parent may be owned only by this user or root, and written by group or others only when it
 * is sticky (as /tmp): anyone else who can rename entries in it could swap our directory.
 */
function checkParents(dir: string, guarded: string): void {
  for (let p = dir; ; p = dirname(p)) {
    const st = lstatOrNull(p);
    if (st === null || st.isSymbolicLink() || !st.isDirectory()) {
      throw new PrivatePathError("replaced", p, `${p} changed while ${guarded} was being checked`, "try again");
    }
    if (st.uid !== 0 && st.uid !== euid()) {
      throw new PrivatePathError(
        "unsafe-parent",
        p,
        `${p} is owned by uid ${st.uid}, who could replace ${guarded}`,
        "keep it under directories that only you or root own",
      );
    }
    if ((st.mode & GROUP_OTHER_WRITE) !== 0 && (st.mode & STICKY) === 0) {
      throw new PrivatePathError(
        "unsafe-parent",
        p,
        `${p} can be written by group or others (mode ${octal(st.mode)}), who could replace ${guarded}`,
        `run: chmod go-w ${p}, or keep it under directories that only you or root can write`,
      );
    }
    if (dirname(p) === p) return;
  }
}

/** A directory or file is trusted only when it is this user's: nobody else could have put it there. */
function checkOwner(path: string, st: Stats, hint: string): void {
  if (st.uid !== euid()) {
    throw new PrivatePathError("foreign-owner", path, `${path} is owned by uid ${st.uid}, not by this user (uid ${euid()})`, hint);
  }
}

/** Makes one directory 0700 whatever the umask, through its descriptor; false if it existed. */
function makeDir(path: string): boolean {
  try {
    mkdirSync(path, { mode: 0o700 });
  } catch (err) {
    if (errno(err) === "EEXIST") return false;
    throw new PrivatePathError("io", path, `cannot create ${path}: ${errno(err)}`);
  }
  try {
    const fd = openSync(path, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      fchmodSync(fd, 0o700);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    // A umask that took the owner's own read bit leaves a directory it cannot open.
    throw new PrivatePathError("io", path, `cannot create ${path}: ${errno(err)}`, "check the umask (umask 077 is the strictest that works)");
  }
  return true;
}

export type PrivateDir = {
  /** The canonical path (canonicalPath): name every file in it through this one. */
  path: string;
  /** Whether this call made it (mode 0700). */
  created: boolean;
};

/**
 * Checks (and with `create`, makes, mode 0700, with any missing parents) a directory for files
 * only this user may trust: it is this user's, no link, not writable by group or others, and no
 * parent lets anyone but this user or root replace it (checkParents). Nothing is created when a
 * check fails.
 */
export function openPrivateDir(path: string, options: { create: boolean }): PrivateDir {
  const target = canonicalPath(path);
  // The deepest parent that exists is checked before anything below it is made.
  const missing: string[] = [];
  let existing = dirname(target);
  while (existing !== target && lstatOrNull(existing) === null) {
    missing.unshift(basename(existing));
    if (dirname(existing) === existing) break;
    existing = dirname(existing);
  }
  if (missing.length > 0 && !options.create) {
    throw new PrivatePathError("missing", target, `${target} does not exist`);
  }
  if (existing !== target) checkParents(existing, target);
  for (const name of missing) {
    existing = join(existing, name);
    if (!makeDir(existing)) checkParents(existing, target);
  }

  let created = false;
  if (lstatOrNull(target) === null) {
    if (!options.create) throw new PrivatePathError("missing", target, `${target} does not exist`);
    created = makeDir(target);
  }
  const seen = lstatOrNull(target);
  if (seen === null) throw new PrivatePathError("replaced", target, `${target} changed while it was being checked`, "try again");
  if (seen.isSymbolicLink()) {
    throw new PrivatePathError("symlink", target, `${target} is a symbolic link; refusing to follow it`, "give the real directory's path");
  }
  if (!seen.isDirectory()) throw new PrivatePathError("not-directory", target, `${target} exists and is not a directory`);
  let st: Stats;
  try {
    const fd = openSync(target, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
    try {
      st = fstatSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch (err) {
    throw ioError(target, err);
  }
  if (st.dev !== seen.dev || st.ino !== seen.ino) {
    throw new PrivatePathError("replaced", target, `${target} changed while it was being checked`, "try again");
  }
  checkOwner(target, st, "use a directory of your own, or run as its owner");
  if ((st.mode & GROUP_OTHER_WRITE) !== 0) {
    throw new PrivatePathError("open-to-others", target, `${target} can be written by group or others (mode ${octal(st.mode)})`, `run: chmod go-w ${target}`);
  }
  return { path: target, created };
}

export type CreateOptions = {
  /** 0600 for secrets (the default), 0644 for a certificate others may read. */
  mode?: 0o600 | 0o644;
  /** Runs between the open and the mode change: lets a test swap the name for a link there. */
  testOnlyAfterOpen?: (path: string) => void;
};

/**
 * Creates a file that did not exist and writes `contents` to disk (fsync), with exactly `mode`
 * whatever the umask. O_EXCL and O_NOFOLLOW: an existing file or link is neither overwritten nor
 * followed. The mode is set on the descriptor: a link swapped in for the name after the open
 * cannot make it change another file's mode.
 */
export function createPrivateFile(path: string, contents: string | Uint8Array, options: CreateOptions = {}): void {
  const mode = options.mode ?? 0o600;
  let fd: number;
  try {
    fd = openSync(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
  } catch (err) {
    if (errno(err) === "EEXIST") throw new PrivatePathError("exists", path, `${path} already exists; refusing to overwrite it`);
    throw new PrivatePathError("io", path, `cannot write ${path}: ${errno(err)}`);
  }
  try {
    options.testOnlyAfterOpen?.(path);
    fchmodSync(fd, mode);
    const bytes = typeof contents === "string" ? Buffer.from(contents) : contents;
    for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * createPrivateFile with `contents()` (made only when needed), or false when the name exists,
 * as a file or a link: the caller then checks what is there.
 */
export function createPrivateFileIfMissing(path: string, contents: () => string | Uint8Array): boolean {
  if (lstatOrNull(path) !== null) return false;
  try {
    createPrivateFile(path, contents());
    return true;
  } catch (err) {
    if (err instanceof PrivatePathError && err.problem === "exists") return false;
    throw err;
  }
}

/** Replaces a private file atomically: a new file beside it (exclusive), renamed over it. */
export function replacePrivateFile(path: string, contents: string | Uint8Array): void {
  const partial = `${path}.${process.pid}.new`;
  createPrivateFile(partial, contents);
  renameSync(partial, path);
}

const symlinkError = (path: string) => new PrivatePathError("symlink", path, `${path} is a symbolic link; refusing to follow it`, "put the file itself there");

/** The rules of a private file, on its stat: a regular file, this user's, no access for group or others. */
function judgeFile(path: string, st: Stats): void {
  if (st.isSymbolicLink()) throw symlinkError(path);
  if (!st.isFile()) throw new PrivatePathError("not-file", path, `${path} is not a regular file`);
  checkOwner(path, st, "only this user's own files are trusted: remove it if you do not know where it came from");
  if ((st.mode & GROUP_OTHER_ANY) !== 0) {
    const may = [st.mode & 0o044 && "readable", st.mode & 0o022 && "writable", st.mode & 0o011 && "executable"].filter(Boolean);
    throw new PrivatePathError("open-to-others", path, `${path} is ${may.join(" and ")} by others (mode ${octal(st.mode)})`, `run: chmod 600 ${path}`);
  }
}

/**
 * Checks a private file by lstat, without opening it; null when it is missing and `mayBeMissing`.
 * For files another component opens (SQLite): closing any descriptor of a file drops every POSIX
 * lock this process holds on it, SQLite's included, so these are never opened here. The name
 * cannot be swapped by anyone else after the check, because the directory passed openPrivateDir.
 */
export function checkPrivateFile(path: string, options: { mayBeMissing?: boolean } = {}): FileIdentity | null {
  const st = lstatOrNull(path);
  if (st === null) {
    if (options.mayBeMissing) return null;
    throw new PrivatePathError("missing", path, `cannot read ${path}: ENOENT`);
  }
  judgeFile(path, st);
  return { dev: st.dev, ino: st.ino };
}

/**
 * Reads a private file: opened without following a link (O_NOFOLLOW; O_NONBLOCK, so a FIFO
 * cannot hang the read) and judged by fstat of the very descriptor that is then read.
 */
export function readPrivateFile(path: string): Buffer {
  let fd: number;
  try {
    fd = openSync(path, READ_NO_FOLLOW);
  } catch (err) {
    // ELOOP: O_NOFOLLOW met a link (even one that points nowhere).
    if (errno(err) === "ELOOP") throw symlinkError(path);
    if (errno(err) === "ENOENT") throw new PrivatePathError("missing", path, `cannot read ${path}: ENOENT`);
    throw new PrivatePathError("io", path, `cannot read ${path}: ${errno(err)}`);
  }
  try {
    judgeFile(path, fstatSync(fd));
    return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Refuses when `path` no longer names the file `before` identified (it was swapped meanwhile). */
export function expectSameFile(path: string, before: FileIdentity): void {
  const now = lstatOrNull(path);
  if (now === null || now.isSymbolicLink() || now.dev !== before.dev || now.ino !== before.ino) {
    throw new PrivatePathError(
      "replaced",
      path,
      `${path} was replaced while it was being opened`,
      "start again; if it happens again, find what changes that directory",
    );
  }
}
