// `ask-only approver`: checks its files, opens the ask ledger, listens with mutual TLS only,
// and runs the console where the person decides. Stops cleanly on SIGINT or SIGTERM.
import { dirname } from "node:path";
import { createInterface } from "node:readline";
import { serveHardened } from "../../adapters/bun/serve.ts";
import { failure, info, type Streams } from "../../cli/voice.ts";
import { formatDuration } from "../../core/duration.ts";
import { urlHost } from "../../core/http/listen.ts";
import { mintDemoRef } from "../../core/ids.ts";
import { AskLedger } from "../../adapters/sqlite/asks.ts";
import { LedgerOpenError } from "../../adapters/sqlite/database.ts";
import { openPrivateDir, PrivatePathError } from "../../core/private-files.ts";
import { loadTlsFiles, TlsLoadError } from "../../core/tls/load.ts";
import { type ApproverFlags, resolveApproverConfig } from "./config.ts";
import { ApproverConsole } from "./console.ts";
import { approverTls, makeApproverApi } from "./http.ts";

export type { ApproverFlags } from "./config.ts";

const errnoCode = (err: unknown) => (err as NodeJS.ErrnoException)?.code ?? (err instanceof Error ? err.name : "unknown");

export async function runApprover(flags: ApproverFlags, streams: Streams): Promise<void> {
  const config = resolveApproverConfig(flags, process.env, process.cwd());
  const clock = () => new Date();

  let tls: ReturnType<typeof loadTlsFiles>;
  try {
    tls = loadTlsFiles(config.tls, { side: "approver", labels: config.labels, now: clock(), cwd: process.cwd() });
  } catch (err) {
    if (err instanceof TlsLoadError) throw failure(err.message, err.hint);
    throw err;
  }

  let ledger: AskLedger;
  try {
    // 0700, this user's, private files only: the asks of one person are nobody else's business
    // on a shared machine, and a ledger another user could write would hold their decisions.
    openPrivateDir(dirname(config.dbPath), { create: true });
    ledger = AskLedger.open(config.dbPath, clock);
  } catch (err) {
    if (err instanceof PrivatePathError) throw failure(err.message, err.hint);
    if (err instanceof LedgerOpenError) throw failure(`${config.dbPath}: ${err.message}`);
    throw failure(`cannot open the ask ledger ${config.dbPath}: ${errnoCode(err)}`, "check the path and its permissions, or choose another with --db PATH");
  }

  const stdout = process.stdout;
  const isTTY = stdout.isTTY === true;
  const consoleUi = new ApproverConsole({
    ledger,
    clock,
    out: (text) => streams.out(text),
    isTTY,
    columns: () => (isTTY ? stdout.columns : undefined),
    mintRef: () => mintDemoRef(),
  });

  const api = makeApproverApi({
    ledger,
    ttlMs: config.ttlMs,
    maxPending: config.maxPending,
    maxAmount: config.maxAmount,
    onCreated: (stored) => consoleUi.announce(stored),
    onFault: (what) => info(streams, `internal fault while answering a request (${what})`),
  });

  let server: ReturnType<typeof serveHardened>;
  try {
    server = serveHardened({ hostname: config.hostname, port: config.port, tls: approverTls(tls), fetch: api });
  } catch (err) {
    ledger.close();
    throw failure(`cannot listen on ${config.hostname}:${config.port}: ${errnoCode(err)}`, "another process may hold the port; choose another with --listen HOST:PORT");
  }

  // Signals are caught before start-up is announced: whoever saw the announcement can stop it.
  const { promise: stopped, resolve: stop } = Promise.withResolvers<string>();
  const onSignal = (signal: NodeJS.Signals) => stop(signal);
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  info(streams, `approver listening on https://${urlHost(config.hostname)}:${server.port} (mutual TLS only)`);
  info(streams, `ask ledger: ${config.dbPath}`);
  info(streams, `trusting clients certified by ${tls.caSubject} (${tls.paths.ca}, sha256 ${tls.caFingerprint256})`);
  info(streams, `asks wait ${formatDuration(config.ttlMs)} for a decision; at most ${config.maxPending} pending; amounts up to ${config.maxAmount}`);
  info(streams, 'type "help" for the console commands');

  const onResize = () => consoleUi.resized();
  if (isTTY) stdout.on("resize", onResize);

  // Asks still pending from before a restart are shown again.
  consoleUi.announcePending();

  const stdinIsTTY = process.stdin.isTTY === true;
  const lines = createInterface({ input: process.stdin, terminal: false });
  lines.on("line", (line) => consoleUi.command(line));
  lines.on("close", () => {
    // Ctrl-D on a terminal means the person is done; a closed pipe (a supervisor, nohup) does
    // not stop the server: asks stay stored and can be decided after a restart with a console.
    if (stdinIsTTY) stop("end of input");
    else info(streams, "console input closed; still serving; stop with Ctrl-C or SIGTERM");
  });

  const why = await stopped;
  process.off("SIGINT", onSignal);
  process.off("SIGTERM", onSignal);
  stdout.off("resize", onResize);
  lines.close();
  process.stdin.pause();
  process.stdin.unref?.();
  await server.stop(true);
  ledger.close();
  info(streams, `approver stopped (${why})`);
}
