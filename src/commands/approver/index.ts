// `ask-only approver`: checks its files, takes its ledger, loads its decision-signing key,
// listens with mutual TLS only (the agents' listener, and the desk's when asked), and runs the
// console where the person decides. Stops cleanly on SIGINT or SIGTERM, after the steps that
// run. `--print-decision-keys` and `--export-decisions` read the ledger and exit.
import { createInterface } from "node:readline";
import { serveHardened } from "../../adapters/bun/serve.ts";
import { failure, info, type Streams } from "../../cli/voice.ts";
import { askObject, type StoredAsk } from "../../core/asks.ts";
import { formatDuration } from "../../core/duration.ts";
import { urlHost } from "../../core/http/listen.ts";
import { mintDemoRef } from "../../core/ids.ts";
import { canonicalJson } from "../../core/receipt/canonical.ts";
import { jwksOf } from "../../core/receipt/sign.ts";
import { loadDeskCa, loadTlsFiles, TlsLoadError } from "../../core/tls/load.ts";
import { type ApproverConfig, type ApproverFlags, type ApproverMode, resolveApproverMode } from "./config.ts";
import { ApproverConsole, type StepRunner } from "./console.ts";
import { approverTls, makeApproverApi } from "./http.ts";
import { lockLedger, openState, type State } from "./state.ts";
import { runStep } from "./step.ts";

export type { ApproverFlags } from "./config.ts";

const errnoCode = (err: unknown) => (err as NodeJS.ErrnoException)?.code ?? (err instanceof Error ? err.name : "unknown");

export async function runApprover(flags: ApproverFlags, streams: Streams): Promise<void> {
  const mode = resolveApproverMode(flags, process.env, process.cwd());
  if (mode.kind === "serve") return serve(mode.config, streams);
  return readLedger(mode, streams);
}

/** `--print-decision-keys`: the JWKS of the decision keys; `--export-decisions`: every record, one JSON line each. */
function readLedger(mode: Exclude<ApproverMode, { kind: "serve" }>, streams: Streams): void {
  const clock = () => new Date();
  const state = openState(mode.dbPath, clock);
  try {
    if (mode.kind === "print-decision-keys") {
      streams.out(`${JSON.stringify(jwksOf(state.key.publicJwk(), state.ledger.knownKeys()))}\n`);
      return;
    }
    // Asks that expired since the serving approver last looked get their records first.
    state.ledger.sealExpired();
    const lines: string[] = [];
    for (const envelope of state.ledger.decisionRecords()) {
      lines.push(JSON.stringify(envelope));
      if (lines.length >= 1000) streams.out(`${lines.splice(0).join("\n")}\n`);
    }
    if (lines.length > 0) streams.out(`${lines.join("\n")}\n`);
  } finally {
    state.ledger.close();
  }
}

function listen(config: { hostname: string; port: number }, tls: ReturnType<typeof approverTls>, fetch: (req: Request) => Promise<Response>, flag: string) {
  try {
    return serveHardened({ hostname: config.hostname, port: config.port, tls, fetch });
  } catch (err) {
    throw failure(
      `cannot listen on ${config.hostname}:${config.port}: ${errnoCode(err)}`,
      `another process may hold the port; choose another with ${flag} HOST:PORT`,
    );
  }
}

async function serve(config: ApproverConfig, streams: Streams): Promise<void> {
  const clock = () => new Date();

  let tls: ReturnType<typeof loadTlsFiles>;
  let deskCa: ReturnType<typeof loadDeskCa> | undefined;
  try {
    tls = loadTlsFiles(config.tls, { side: "approver", labels: config.labels, now: clock(), cwd: process.cwd() });
    if (config.desk) deskCa = loadDeskCa(config.desk.ca, { label: config.desk.caLabel, approver: tls, now: clock(), cwd: process.cwd() });
  } catch (err) {
    if (err instanceof TlsLoadError) throw failure(err.message, err.hint);
    throw err;
  }

  // One approver per ledger: a second one would take the first one's running steps for
  // interrupted ones. The lock goes with the process, however it ends.
  const lock = lockLedger(config.dbPath);
  let state: State;
  try {
    state = openState(config.dbPath, clock);
  } catch (err) {
    lock.release();
    throw err;
  }
  const { ledger, signer } = state;
  // Steps the last run was stopped in the middle of: failed, never run again.
  const interrupted = ledger.failInterruptedSteps();
  let sealedUpTo = ledger.sealExpired();

  const stdout = process.stdout;
  const isTTY = stdout.isTTY === true;
  const step: StepRunner | undefined = config.onApprove && {
    deadline: formatDuration(config.onApprove.timeoutMs),
    run: (stored: StoredAsk) =>
      runStep(
        { command: config.onApprove!.command, timeoutMs: config.onApprove!.timeoutMs, path: process.env.PATH, home: process.env.HOME, cwd: process.cwd() },
        { approvalId: stored.ask.approval_id, verb: stored.ask.kind, stdin: `${canonicalJson(askObject(stored.ask))}\n` },
      ),
  };
  const onFault = (what: string) => info(streams, `internal fault (${what})`);
  const consoleUi = new ApproverConsole({
    ledger,
    clock,
    out: (text) => streams.out(text),
    isTTY,
    columns: () => (isTTY ? stdout.columns : undefined),
    mintRef: () => mintDemoRef(),
    ...(step ? { step } : {}),
    onFault,
  });

  // Each expiry gets its signed record when it comes: a timer set for the next one.
  let expiryTimer: Timer | undefined;
  const sealAndPlan = () => {
    try {
      sealedUpTo = ledger.sealExpired(sealedUpTo);
    } catch (err) {
      onFault(`sealing expired asks: ${err instanceof Error ? err.name : "non-error thrown"}`);
    }
    planExpiry();
  };
  const planExpiry = () => {
    clearTimeout(expiryTimer);
    const next = ledger.nextExpiry();
    if (next !== undefined) expiryTimer = setTimeout(sealAndPlan, Math.max(0, next.getTime() - clock().getTime()) + 1);
  };

  const apiOptions = {
    ledger,
    ttlMs: config.ttlMs,
    maxPending: config.maxPending,
    maxAmount: config.maxAmount,
    sealExpired: () => {
      sealedUpTo = ledger.sealExpired(sealedUpTo);
    },
    onCreated: (stored: StoredAsk) => {
      consoleUi.announce(stored);
      planExpiry();
    },
    onFault: (what: string) => info(streams, `internal fault while answering a request (${what})`),
  };

  const servers: ReturnType<typeof serveHardened>[] = [];
  try {
    servers.push(listen(config, approverTls(tls), makeApproverApi({ ...apiOptions, side: "agent" }), "--listen"));
    if (config.desk && deskCa) {
      servers.push(listen(config.desk, approverTls({ ...tls, ca: deskCa.ca }), makeApproverApi({ ...apiOptions, side: "desk" }), "--desk-listen"));
    }
  } catch (err) {
    for (const server of servers) await server.stop(true);
    ledger.close();
    lock.release();
    throw err;
  }

  // Signals are caught before start-up is announced: whoever saw the announcement can stop it.
  const { promise: stopped, resolve: stop } = Promise.withResolvers<string>();
  const onSignal = (signal: NodeJS.Signals) => stop(signal);
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);

  info(streams, `approver listening on https://${urlHost(config.hostname)}:${servers[0]!.port} (mutual TLS only)`);
  if (config.desk && deskCa) {
    info(streams, `approver listening for the desk on https://${urlHost(config.desk.hostname)}:${servers[1]!.port} (mutual TLS, desk CA only)`);
  }
  info(streams, `ask ledger: ${config.dbPath}`);
  info(streams, `trusting clients certified by ${tls.caSubject} (${tls.paths.ca}, sha256 ${tls.caFingerprint256})`);
  if (deskCa) info(streams, `trusting the desk certified by ${deskCa.caSubject} (${deskCa.path}, sha256 ${deskCa.caFingerprint256})`);
  info(
    streams,
    `decisions signed with ${state.keyPath} (kid ${signer.kid}${state.keyCreated ? ", new" : ""}); ask-only approver --print-decision-keys prints the key set`,
  );
  if (config.onApprove)
    info(streams, `an approved pay or account ask runs the --on-approve step once (deadline ${formatDuration(config.onApprove.timeoutMs)})`);
  info(streams, `asks wait ${formatDuration(config.ttlMs)} for a decision; at most ${config.maxPending} pending; amounts up to ${config.maxAmount}`);
  info(streams, 'type "help" for the console commands');

  const onResize = () => consoleUi.resized();
  if (isTTY) stdout.on("resize", onResize);

  consoleUi.announceInterrupted(interrupted);
  // Asks still pending from before a restart are shown again.
  consoleUi.announcePending();
  planExpiry();

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
  for (const server of servers) await server.stop(true);
  if (consoleUi.stepsRunning > 0) {
    // A step that is let finish gets its result recorded; one cut off here would be `interrupted`.
    info(streams, `waiting for ${consoleUi.stepsRunning} running ${consoleUi.stepsRunning === 1 ? "step" : "steps"} to end (at most their deadline)`);
    await consoleUi.stepsDone();
  }
  clearTimeout(expiryTimer);
  ledger.close();
  lock.release();
  info(streams, `approver stopped (${why})`);
}
