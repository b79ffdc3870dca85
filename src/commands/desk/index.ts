// `ask-only desk` and `ask-only desk check`: settings (settings.ts) → the port → data dir →
// ledger, signer, sealing key → the Desk → its HTTP handler. Unsafe configuration stops here,
// before anything listens.
import { existsSync } from "node:fs";
import { serveHardened } from "../../adapters/bun/serve.ts";
import { ApproverLink } from "../../adapters/approver-link/client.ts";
import { FileDecisionKeys } from "../../adapters/approver-link/decision-keys.ts";
import { mcpConnector } from "../../adapters/mcp-upstream/connector.ts";
import { type DatabaseTarget, describeTarget } from "../../adapters/postgres/connection.ts";
import type { LeaseTiming } from "../../adapters/postgres/node.ts";
import { SigningKeyTaken } from "../../adapters/postgres/records.ts";
import { restConnector } from "../../adapters/rest-upstream/connector.ts";
import { checkThreadCount, ThreadedReceiptChecker } from "../../adapters/threads/receipt-checker.ts";
import { openCredential } from "../../adapters/upstream-auth/open.ts";
import { DESK_ENV, DESK_FLAGS, envSettingOf, flagOf } from "../../cli/flags.ts";
import { failure, info, type Streams, usageError } from "../../cli/voice.ts";
import { importSealingKey } from "../../core/desk/seal.ts";
import { newAdminToken, sha256 } from "../../core/desk/secrets.ts";
import { urlHost } from "../../core/http/listen.ts";
import { generateSigningKey, loadSigner, ReceiptKeyError } from "../../core/receipt/index.ts";
import { checkLedger } from "../../core/desk/check.ts";
import { Desk } from "../../core/desk/desk.ts";
import { ABANDON_MARGIN_MS, APPROVER_TIMEOUT_MS } from "../../core/desk/limits.ts";
import { type ApproverConnection, type DeskLedger, LedgerUnavailable } from "../../core/desk/ports.ts";
import { SealedHeadersError } from "../../core/desk/registry.ts";
import { SealedFieldError } from "../../core/upstream/credential-store.ts";
import { consoleRoutes } from "./console.ts";
import { dataDirPaths, lockDataDir, openDeskLedger, prepareDataDir, readSecret, replaceSecretFile } from "./data-dir.ts";
import { AlertDelivery } from "../../adapters/webhooks/alert-delivery.ts";
import { createHandler, type Handler } from "./http.ts";
import { type ApproverSettings, type DeskRun, deskSettings } from "./settings.ts";
import { checkSealingKey, nodeIdOf, openSharedLedger } from "./shared-ledger.ts";

export type { DeskFlags } from "./settings.ts";

const DEFAULT_DATA = flagOf(DESK_FLAGS, "--data").default;
const ADMIN_TOKEN_META = "admin_token_sha256";
/** How often the WAL is checkpointed, off the request path. */
const CHECKPOINT_EVERY_MS = 200;
/**
 * How often a node on a shared ledger reads the catalog's version (one row) and reloads what
 * another node changed: a catalog change reaches every node within this and one reload.
 */
const SHARED_CATALOG_CHECK_MS = 1_000;

/** Runs `step` every `ms` after the previous run finished (never two at once) until stopped. */
function repeat(ms: number, step: () => Promise<unknown>): { stop(): void } {
  let timer: ReturnType<typeof setTimeout> | null = null;
  let stopped = false;
  const next = () => {
    if (stopped) return;
    timer = setTimeout(async () => {
      await step().catch(() => {});
      next();
    }, ms);
  };
  next();
  return {
    stop() {
      stopped = true;
      if (timer !== null) clearTimeout(timer);
    },
  };
}

/** Runs the desk until SIGINT or SIGTERM. */
export async function runDesk(run: DeskRun): Promise<void> {
  const { streams, flags } = run;
  const { listenText, listen, timeoutMs, allowedHosts, allowUpstreamHosts, configured, tls, stripe, alerts, database, lease, approver } = deskSettings(run);
  const log = (line: string) => info(streams, line);

  // The port comes first: a desk that cannot listen has created no file and shown no token.
  // A request that arrives while the rest starts waits for the handler.
  const { promise: ready, resolve: handlerReady, reject: startFailed } = Promise.withResolvers<Handler>();
  ready.catch(() => {});
  // An upstream call may be silent for the whole timeout: keep the agent's connection open.
  const idleSeconds = Math.ceil(timeoutMs / 1000) + 15;
  let server: ReturnType<typeof serveHardened>;
  try {
    server = serveHardened({
      hostname: listen.hostname,
      port: listen.port,
      // The operator console (embedded page and assets, with its security headers).
      routes: consoleRoutes(),
      fetch: async (req, srv) => (await ready)(req, srv),
      idleTimeout: idleSeconds > 255 ? 0 : idleSeconds,
      ...(tls ? { tls } : {}),
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? "error";
    throw failure(
      `cannot listen on ${listenText}: ${code}`,
      code === "EADDRINUSE" ? "another process may hold the port; choose another with --listen HOST:PORT" : "choose another with --listen HOST:PORT",
    );
  }

  let started: Awaited<ReturnType<typeof startDesk>>;
  try {
    started = await startDesk(run, { configured, timeoutMs, allowUpstreamHosts, alerts, database, lease, approver, log });
  } catch (err) {
    startFailed(err);
    await server.stop(true);
    throw err;
  }
  const { desk, ledger, lock, sweep, delivery, shared } = started;
  handlerReady(
    createHandler(desk, {
      adminTokenSha256: started.adminHash,
      listenHostname: listen.hostname,
      allowedHosts,
      trustProxy: flags.trustProxy === true,
      stripe,
      log,
      onInternal: (err) => log(`internal error: ${err instanceof Error ? `${err.name}: ${err.message}` : "unknown"}`),
    }),
  );
  // Everything started above holds the process open (the sweep timer, the checkpoint worker).
  const shutdown = async () => {
    clearInterval(sweep);
    await delivery?.stop();
    shared?.stop();
    await desk.close();
    await ledger.close();
    lock.release();
  };
  // The handlers go in before the line that says the desk listens: a supervisor that sends
  // SIGTERM as soon as it reads that line must get a clean stop, not the default death (143).
  const stopped = new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  log(`desk listening on ${tls ? "https" : "http"}://${urlHost(listen.hostname)}:${server.port}`);

  await stopped;
  await server.stop();
  await shutdown();
  log("desk stopped");
}

/** The data directory, keys, ledger, admin token and Desk, once the port is known to be free. */
async function startDesk(
  run: DeskRun,
  o: {
    configured: { token: string; from: string } | null;
    timeoutMs: number;
    allowUpstreamHosts: string[];
    alerts: { url: URL; secret: Uint8Array } | null;
    database: DatabaseTarget | null;
    lease: LeaseTiming;
    approver: ApproverSettings | null;
    log: (line: string) => void;
  },
): Promise<{
  desk: Desk;
  ledger: DeskLedger;
  lock: ReturnType<typeof lockDataDir>;
  sweep: ReturnType<typeof setInterval>;
  shared: { stop(): void } | null;
  adminHash: Uint8Array;
  delivery: AlertDelivery | null;
}> {
  const { streams, flags } = run;
  const { configured, timeoutMs, allowUpstreamHosts, database, lease, log } = o;
  // The delivery loop is made once the desk is: until then a written alert waits for its first pass.
  let delivery: AlertDelivery | null = null;
  const paths = dataDirPaths(flags.data ?? DEFAULT_DATA);
  // Held until exit (the kernel drops it even on SIGKILL): one desk per data directory.
  const lock = lockDataDir(paths);
  const { created } = prepareDataDir(paths, () => generateSigningKey().privatePem, database === null ? "sqlite" : "postgres");

  let signer: ReturnType<typeof loadSigner>;
  try {
    signer = loadSigner(readSecret(paths.signingKey).toString("utf8"));
  } catch (err) {
    if (err instanceof ReceiptKeyError) throw failure(`${paths.signingKey}: ${err.message}`);
    throw err;
  }
  const sealingRaw = readSecret(paths.sealingKey);
  if (sealingRaw.length !== 32) throw failure(`${paths.sealingKey} is not a 256-bit key (${sealingRaw.length} bytes)`);
  const sealingKey = await importSealingKey(new Uint8Array(sealingRaw));

  let ledger: DeskLedger;
  const ledgerName = database === null ? paths.db : `the database ${describeTarget(database)}`;
  if (database === null) {
    ledger = openDeskLedger(paths, { backgroundCheckpointMs: CHECKPOINT_EVERY_MS });
  } else {
    const shared = await openSharedLedger(database, { nodeId: nodeIdOf(paths), lease, log });
    ledger = shared;
    try {
      await checkSealingKey(shared, paths.sealingKey, new Uint8Array(sealingRaw));
    } catch (err) {
      await shared.close();
      throw err;
    }
    const { from, to } = shared.migration;
    if (from !== to) log(`ledger: schema migrated from version ${from} to ${to}`);
    log(`ledger: ${ledgerName}, as node ${shared.nodeId}`);
  }

  // Where the admin token comes from is said at every start, so an operator who lost it knows
  // which one opens /admin.
  let adminHash: Uint8Array;
  const stored = await ledger.records.meta(ADMIN_TOKEN_META);
  if (configured !== null) {
    adminHash = sha256(configured.token);
    log(`admin token: from ${configured.from}${stored !== null ? " (it replaces the one made at the first start)" : ""}`);
  } else if (stored !== null) {
    adminHash = new Uint8Array(Buffer.from(stored, "hex"));
    log(`admin token: the one shown at the first start (only its hash is stored, in ${ledgerName})`);
  } else {
    const token = newAdminToken();
    adminHash = sha256(token);
    if (!(await ledger.records.setMetaOnce(ADMIN_TOKEN_META, Buffer.from(adminHash).toString("hex")))) {
      await ledger.close();
      throw failure("another desk stored an admin token at the same moment", "start the desk again");
    }
    log(`admin token: made now and shown once on stdout; only its hash is stored, in ${ledgerName}`);
    streams.out(`admin token (shown once; only its hash is stored): ${token}\n`);
  }

  let desk: Desk;
  try {
    desk = await Desk.open({
      ledger,
      connectors: { mcp: mcpConnector, rest: restConnector },
      openCredential,
      signer,
      sealingKey,
      upstreamTimeoutMs: timeoutMs,
      log,
      storeSigningKey: (pem) => replaceSecretFile(paths.signingKey, pem),
      allowUpstreamHosts,
      alertsWritten: () => delivery?.poke(),
      ...(o.approver === null ? {} : { approver: approverConnection(o.approver) }),
    });
  } catch (err) {
    await ledger.close();
    if (err instanceof SealedHeadersError || err instanceof SealedFieldError) {
      throw failure(err.message, `${paths.sealingKey} must be the key they were sealed with`);
    }
    if (err instanceof SigningKeyTaken) {
      throw failure(
        `${paths.signingKey}: ${err.message}`,
        "each node needs its own receipt-signing.key: remove it from this copied data directory to have one made",
      );
    }
    throw err;
  }
  if (created.length > 0) log(`created ${created.join(", ")} in ${paths.path}`);
  if (o.approver !== null) {
    const a = o.approver;
    log(`approver: ${a.url.href} (trusting ${a.tls.caSubject}), acting on decisions signed by ${a.keys.kids.join(", ")} (${a.keysPath})`);
  }
  streams.out(`receipt signing key: kid ${signer.kid}\n`);

  // Whatever was in flight when the last desk stopped can no longer be answered: refund it.
  await desk.sweepAbandoned(Number.POSITIVE_INFINITY);
  const sweep = setInterval(
    () => {
      desk.sweepStale().catch((err: unknown) => log(`sweep of abandoned reservations failed: ${err instanceof Error ? err.name : "error"}`));
    },
    Math.max(1000, (timeoutMs + ABANDON_MARGIN_MS) / 2),
  );
  // Another node's catalog changes, the settlements lost with the database once it answers, and
  // the calls of nodes whose lease ran out (refunded within a second of it).
  const shared =
    database === null
      ? null
      : repeat(SHARED_CATALOG_CHECK_MS, async () => {
          try {
            await desk.resolveUnsettled();
            await desk.refreshCatalog();
            await desk.sweepStale();
          } catch (err) {
            // An unreachable database is logged once by the ledger; anything else is said here.
            if (!(err instanceof LedgerUnavailable)) log(`shared ledger round failed: ${err instanceof Error ? err.name : "error"}`);
          }
        });
  if (o.alerts !== null) delivery = await startAlertDelivery(desk, ledger, o.alerts, log);
  return { desk, ledger, lock, sweep, shared, adminHash, delivery };
}

/**
 * Delivers the alert outbox to --alert-webhook. The leases this desk's last run left (SQLite:
 * every one, as one desk holds the data directory; PostgreSQL: those of this node's id) are
 * freed first, so those alerts are sent again at once under their ids.
 */
async function startAlertDelivery(desk: Desk, ledger: DeskLedger, alerts: { url: URL; secret: Uint8Array }, log: (line: string) => void) {
  const freed = await ledger.alerts.releaseLeases();
  if (freed > 0) log(`alerts: ${freed} attempt(s) cut by the last stop will be sent again`);
  const delivery = new AlertDelivery({
    url: alerts.url,
    secret: alerts.secret,
    // The v1a signature follows the signing key through rotations.
    signer: { signBytes: (bytes) => desk.signer.signBytes(bytes) },
    outbox: ledger.alerts,
    onAttempt: (r) => {
      if (r.ok) log(`alert ${r.id} delivered (attempt ${r.attempt})`);
      else
        log(`alert ${r.id} attempt ${r.attempt} failed: ${r.error}${r.nextAtMs === null ? "; given up" : `; next at ${new Date(r.nextAtMs).toISOString()}`}`);
    },
    onError: (err) => log(`alert delivery pass failed: ${err instanceof Error ? err.name : "error"}`),
  });
  delivery.start();
  log(`alerts: delivered to ${alerts.url.origin}`);
  return delivery;
}

/** The link to the approver, over mutual TLS with the desk's own certificate. */
function approverConnection(a: ApproverSettings): ApproverConnection {
  return {
    approver: new ApproverLink({ baseUrl: a.url, tls: { cert: a.tls.cert, key: a.tls.key, ca: a.tls.ca }, timeoutMs: APPROVER_TIMEOUT_MS }),
    keys: new FileDecisionKeys(a.keysPath, a.keys),
  };
}

/** Every how often a running `desk check` says on stderr how far it got (ASK_ONLY_DESK_CHECK_PROGRESS_MS). */
const CHECK_PROGRESS_EVERY_MS = Number(envSettingOf(DESK_ENV, "ASK_ONLY_DESK_CHECK_PROGRESS_MS").default);

/**
 * `desk check`: exit 0 when the ledger (in --data, or in the database) is sound, else a failure
 * listing what is wrong. Signatures are checked on one thread per core (ASK_ONLY_DESK_CHECK_THREADS
 * sets how many); how far it got is said on stderr every few seconds. SIGINT or SIGTERM stops it
 * after the pages in flight, and a stopped check says how far it got and fails: it never reads as
 * a pass.
 */
export async function runDeskCheck(run: {
  data: string | undefined;
  database: DatabaseTarget | null;
  streams: Streams;
  env: NodeJS.ProcessEnv;
}): Promise<void> {
  const threads = envCount(run.env, envSettingOf(DESK_ENV, "ASK_ONLY_DESK_CHECK_THREADS").env, checkThreadCount(), 1, 999);
  const progressMs = envCount(run.env, envSettingOf(DESK_ENV, "ASK_ONLY_DESK_CHECK_PROGRESS_MS").env, CHECK_PROGRESS_EVERY_MS, 10, 3_600_000);
  let ledger: DeskLedger;
  if (run.database !== null) {
    // No node: the check takes no call, sweeps nothing, and migrates nothing.
    ledger = await openSharedLedger(run.database, { nodeId: null, migrate: false, log: () => {} });
  } else {
    const paths = dataDirPaths(run.data ?? DEFAULT_DATA);
    if (!existsSync(paths.db)) throw failure(`no desk ledger at ${paths.db}`, "give the data directory of a desk with --data DIR");
    // A reader: no checkpointing thread (the desk serving beside it checkpoints its own WAL).
    ledger = openDeskLedger(paths, {});
  }
  const stop = new AbortController();
  const onSignal = () => stop.abort();
  process.once("SIGINT", onSignal);
  process.once("SIGTERM", onSignal);
  const started = performance.now();
  let checked = 0;
  const perSecond = () => Math.round(checked / ((performance.now() - started) / 1000));
  const progress = setInterval(() => info(run.streams, `desk check: ${checked} receipts checked, ${perSecond()}/s`), progressMs);
  try {
    const report = await checkLedger(ledger, {
      checker: (jwks) => new ThreadedReceiptChecker(jwks, threads),
      // Two pages per thread: one being checked, one waiting, while the next is read.
      pagesInFlight: 2 * threads,
      signal: stop.signal,
      onProgress: (n) => {
        checked = n;
      },
    });
    for (const line of report.ok) run.streams.out(`ok: ${line}\n`);
    for (const line of report.problems) run.streams.out(`FAILED: ${line}\n`);
    if (!report.complete) {
      const found = report.problems.length > 0 ? `; ${report.problems.length} problem(s) found so far` : "";
      throw failure(`desk check stopped after ${report.checked} receipts: the check is incomplete${found}`, "run desk check again and let it finish");
    }
    if (report.problems.length > 0) throw failure(`the desk ledger has ${report.problems.length} problem(s)`);
  } finally {
    clearInterval(progress);
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    await ledger.close();
  }
}

/** A whole number from the environment, within [min, max], or `fallback` when unset. */
function envCount(env: NodeJS.ProcessEnv, name: string, fallback: number, min: number, max: number): number {
  const value = env[name];
  if (value === undefined || value === "") return fallback;
  const n = /^[0-9]{1,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(n >= min && n <= max)) throw usageError(`${name} must be a whole number from ${min} to ${max}`, `leave it unset for ${fallback}`);
  return n;
}
