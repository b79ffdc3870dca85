// `ask-only desk` and `ask-only desk check`: flags → data dir → ledger, signer, sealing key →
// the Desk → Bun.serve. Unsafe configuration stops here, before anything listens.
import { existsSync, readFileSync } from "node:fs";
import { DESK_ENV, DESK_FLAGS, envSettingOf, flagOf } from "../../cli/flags.ts";
import { failure, info, type Streams, usageError } from "../../cli/voice.ts";
import { isLinkLocalOrUnspecified } from "../../core/desk/network.ts";
import { importSealingKey } from "../../core/desk/seal.ts";
import { newAdminToken, sha256 } from "../../core/desk/secrets.ts";
import type { DeskLedger } from "../../core/ledger/desk.ts";
import { generateSigningKey, loadSigner, ReceiptKeyError } from "../../core/receipt/index.ts";
import { checkLedger } from "./check.ts";
import { consoleRoutes } from "./console.ts";
import { dataDirPaths, lockDataDir, openDeskLedger, prepareDataDir, readSecret, replaceSecretFile } from "./data-dir.ts";
import { ABANDON_MARGIN_MS, DEFAULT_UPSTREAM_TIMEOUT_MS, Desk, SealedHeadersError } from "./desk.ts";
import { createHandler, type Handler } from "./http.ts";

const ADMIN_TOKEN_ENV = envSettingOf(DESK_ENV, "ASK_ONLY_DESK_ADMIN_TOKEN").env;
const ALLOW_UPSTREAM_HOST_ENV = flagOf(DESK_FLAGS, "--allow-upstream-host").env;
const DEFAULT_LISTEN = flagOf(DESK_FLAGS, "--listen").default;
const DEFAULT_DATA = flagOf(DESK_FLAGS, "--data").default;
const MIN_ADMIN_TOKEN_CHARS = 32;
const ADMIN_TOKEN_META = "admin_token_sha256";
/** How often the WAL is checkpointed, off the request path. */
const CHECKPOINT_EVERY_MS = 200;

export type DeskFlags = {
  listen?: string;
  data?: string;
  adminTokenFile?: string;
  tlsCert?: string;
  tlsKey?: string;
  upstreamTimeout?: string;
  /** Extra Host values for the MCP endpoint (repeatable --allowed-host). */
  allowedHost?: string[];
  trustProxy?: boolean;
  /** Link-local or unspecified addresses an upstream may have (repeatable --allow-upstream-host). */
  allowUpstreamHost?: string[];
};

export type DeskRun = { flags: DeskFlags; env: Record<string, string | undefined>; streams: Streams };

function parseListen(text: string): { hostname: string; port: number } {
  const m = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(text);
  const port = m ? Number(m[3]) : Number.NaN;
  if (!m || port > 65535) throw usageError(`--listen ${text} is not HOST:PORT`, "e.g. --listen 127.0.0.1:8787");
  return { hostname: m[1] ?? m[2]!, port };
}

function parseTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_UPSTREAM_TIMEOUT_MS;
  const secs = Number(text);
  if (!/^\d+(\.\d+)?$/.test(text) || secs <= 0 || secs > 600) {
    throw usageError(`--upstream-timeout ${text} is not a number of seconds between 0 and 600`);
  }
  return Math.round(secs * 1000);
}

/** --allowed-host values: NAME or NAME:PORT, checked here so a typo stops the desk at start. */
function parseAllowedHosts(values: string[] | undefined): string[] {
  return (values ?? []).map((v) => {
    if (!/^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?$/.test(v)) {
      throw usageError(`--allowed-host ${v} is not NAME or NAME:PORT`, "e.g. --allowed-host desk.example.com");
    }
    return v.toLowerCase();
  });
}

/**
 * --allow-upstream-host values (else ASK_ONLY_DESK_ALLOW_UPSTREAM_HOST, comma-separated), each a
 * link-local or unspecified address, as a URL's hostname writes it. Anything else stops the desk
 * at start: a name would read as allowed although names are never resolved.
 */
function parseUpstreamHostAllowance(run: DeskRun): string[] {
  const given = run.flags.allowUpstreamHost ?? [];
  const values = given.length > 0 ? given : (run.env[ALLOW_UPSTREAM_HOST_ENV] ?? "").split(",").map((v) => v.trim()).filter((v) => v !== "");
  const from = given.length > 0 ? "--allow-upstream-host" : ALLOW_UPSTREAM_HOST_ENV;
  return values.map((v) => {
    const literal = v.includes(":") && !v.startsWith("[") ? `[${v}]` : v;
    const hostname = URL.canParse(`http://${literal}/`) ? new URL(`http://${literal}/`).hostname : null;
    if (hostname === null || !isLinkLocalOrUnspecified(hostname)) {
      throw usageError(`${from} ${v} is not a link-local or unspecified address`, "e.g. --allow-upstream-host 169.254.169.254");
    }
    return hostname;
  });
}

/** The admin token given by file or environment (checked) and where it came from, or null when neither is set. */
function configuredAdminToken(run: DeskRun): { token: string; from: string } | null {
  let token: string | undefined;
  let from: string;
  if (run.flags.adminTokenFile !== undefined) {
    from = run.flags.adminTokenFile;
    try {
      token = readFileSync(from, "utf8").replace(/\r?\n$/, "");
    } catch (err) {
      throw failure(`cannot read the admin token file ${from}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  } else {
    token = run.env[ADMIN_TOKEN_ENV];
    from = ADMIN_TOKEN_ENV;
    if (token === undefined || token === "") return null;
  }
  // A short token can be guessed online: refuse to start with one.
  if (token.length < MIN_ADMIN_TOKEN_CHARS || !/^[\x21-\x7e]+$/.test(token)) {
    throw failure(
      `the admin token from ${from} is shorter than ${MIN_ADMIN_TOKEN_CHARS} characters or holds spaces or control characters`,
      "generate one with: openssl rand -base64 33",
    );
  }
  return { token, from: run.flags.adminTokenFile !== undefined ? `the file ${from} (--admin-token-file)` : from };
}

function loadTls(flags: DeskFlags): { cert: string; key: string } | undefined {
  if (flags.tlsCert === undefined && flags.tlsKey === undefined) return undefined;
  if (flags.tlsCert === undefined || flags.tlsKey === undefined) throw usageError("--tls-cert and --tls-key go together");
  const read = (p: string) => {
    try {
      return readFileSync(p, "utf8");
    } catch (err) {
      throw failure(`cannot read ${p}: ${(err as NodeJS.ErrnoException).code ?? "error"}`);
    }
  };
  return { cert: read(flags.tlsCert), key: read(flags.tlsKey) };
}

/** Runs the desk until SIGINT or SIGTERM. */
export async function runDesk(run: DeskRun): Promise<void> {
  const { streams, flags } = run;
  const listenText = flags.listen ?? DEFAULT_LISTEN;
  const listen = parseListen(listenText);
  const timeoutMs = parseTimeout(flags.upstreamTimeout);
  const allowedHosts = parseAllowedHosts(flags.allowedHost);
  const allowUpstreamHosts = parseUpstreamHostAllowance(run);
  const configured = configuredAdminToken(run);
  const tls = loadTls(flags);
  const log = (line: string) => info(streams, line);

  // The port comes first: a desk that cannot listen has created no file and shown no token.
  // A request that arrives while the rest starts waits for the handler.
  const { promise: ready, resolve: handlerReady, reject: startFailed } = Promise.withResolvers<Handler>();
  ready.catch(() => {});
  // An upstream call may be silent for the whole timeout: keep the agent's connection open.
  const idleSeconds = Math.ceil(timeoutMs / 1000) + 15;
  let server: ReturnType<typeof Bun.serve>;
  try {
    server = Bun.serve({
      hostname: listen.hostname,
      port: listen.port,
      // The operator console (embedded page and assets, with its security headers).
      routes: consoleRoutes(),
      fetch: async (req, srv) => (await ready)(req, srv),
      // Never development mode (the default when NODE_ENV is not "production", and a compiled
      // binary reports "development"): it answers an uncaught error with its stack trace.
      development: false,
      // Explicit: outside development mode Bun turns SO_REUSEPORT on, and a second desk (another
      // data directory) on the same port would silently take a share of the calls.
      reusePort: false,
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
    started = await startDesk(run, { configured, timeoutMs, allowUpstreamHosts, log });
  } catch (err) {
    startFailed(err);
    await server.stop(true);
    throw err;
  }
  const { desk, ledger, lock, sweep } = started;
  handlerReady(
    createHandler(desk, {
      adminTokenSha256: started.adminHash,
      listenHostname: listen.hostname,
      allowedHosts,
      trustProxy: flags.trustProxy === true,
      onInternal: (err) => log(`internal error: ${err instanceof Error ? `${err.name}: ${err.message}` : "unknown"}`),
    }),
  );
  // Everything started above holds the process open (the sweep timer, the checkpoint worker).
  const shutdown = async () => {
    clearInterval(sweep);
    await desk.close();
    await ledger.stopCheckpointer();
    ledger.close();
    lock.release();
  };
  // The handlers go in before the line that says the desk listens: a supervisor that sends
  // SIGTERM as soon as it reads that line must get a clean stop, not the default death (143).
  const stopped = new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
  });
  const host = listen.hostname.includes(":") ? `[${listen.hostname}]` : listen.hostname;
  log(`desk listening on ${tls ? "https" : "http"}://${host}:${server.port}`);

  await stopped;
  await server.stop();
  await shutdown();
  log("desk stopped");
}

/** The data directory, keys, ledger, admin token and Desk, once the port is known to be free. */
async function startDesk(
  run: DeskRun,
  o: { configured: { token: string; from: string } | null; timeoutMs: number; allowUpstreamHosts: string[]; log: (line: string) => void },
): Promise<{ desk: Desk; ledger: DeskLedger; lock: ReturnType<typeof lockDataDir>; sweep: ReturnType<typeof setInterval>; adminHash: Uint8Array }> {
  const { streams, flags } = run;
  const { configured, timeoutMs, allowUpstreamHosts, log } = o;
  const paths = dataDirPaths(flags.data ?? DEFAULT_DATA);
  // Held until exit (the kernel drops it even on SIGKILL): one desk per data directory.
  const lock = lockDataDir(paths);
  const { created } = prepareDataDir(paths, () => generateSigningKey().privatePem);

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

  const ledger = openDeskLedger(paths, { backgroundCheckpointMs: CHECKPOINT_EVERY_MS });

  // Where the admin token comes from is said at every start, so an operator who lost it knows
  // which one opens /admin.
  let adminHash: Uint8Array;
  const stored = ledger.getMeta(ADMIN_TOKEN_META);
  if (configured !== null) {
    adminHash = sha256(configured.token);
    log(`admin token: from ${configured.from}${stored !== null ? " (it replaces the one made at the first start)" : ""}`);
  } else if (stored !== null) {
    adminHash = new Uint8Array(Buffer.from(stored, "hex"));
    log(`admin token: the one shown at the first start (only its hash is stored, in ${paths.db})`);
  } else {
    const token = newAdminToken();
    adminHash = sha256(token);
    if (!ledger.setMetaOnce(ADMIN_TOKEN_META, Buffer.from(adminHash).toString("hex"))) {
      throw failure("another desk stored an admin token at the same moment", "start the desk again");
    }
    log(`admin token: made now and shown once on stdout; only its hash is stored, in ${paths.db}`);
    streams.out(`admin token (shown once; only its hash is stored): ${token}\n`);
  }

  let desk: Desk;
  try {
    desk = await Desk.open({
      ledger,
      signer,
      sealingKey,
      upstreamTimeoutMs: timeoutMs,
      log,
      storeSigningKey: (pem) => replaceSecretFile(paths.signingKey, pem),
      allowUpstreamHosts,
    });
  } catch (err) {
    ledger.close();
    if (err instanceof SealedHeadersError) throw failure(err.message, `${paths.sealingKey} must be the key they were sealed with`);
    throw err;
  }
  if (created.length > 0) log(`created ${created.join(", ")} in ${paths.path}`);
  streams.out(`receipt signing key: kid ${signer.kid}\n`);

  // Whatever was in flight when the last desk stopped can no longer be answered: refund it.
  desk.sweepAbandoned(Number.POSITIVE_INFINITY);
  const sweep = setInterval(
    () => {
      try {
        desk.sweepStale();
      } catch (err) {
        log(`sweep of abandoned reservations failed: ${err instanceof Error ? err.name : "error"}`);
      }
    },
    Math.max(1000, (timeoutMs + ABANDON_MARGIN_MS) / 2),
  );
  return { desk, ledger, lock, sweep, adminHash };
}

/** `desk check`: exit 0 when the ledger is sound, else a failure listing what is wrong. */
export async function runDeskCheck(run: { data: string; streams: Streams }): Promise<void> {
  const paths = dataDirPaths(run.data);
  if (!existsSync(paths.db)) throw failure(`no desk ledger at ${paths.db}`, "give the data directory of a desk with --data DIR");
  const ledger = openDeskLedger(paths, { backgroundCheckpointMs: CHECKPOINT_EVERY_MS });
  try {
    const report = checkLedger(ledger);
    for (const line of report.ok) run.streams.out(`ok: ${line}\n`);
    for (const line of report.problems) run.streams.out(`FAILED: ${line}\n`);
    if (report.problems.length > 0) throw failure(`the desk ledger has ${report.problems.length} problem(s)`);
  } finally {
    ledger.close();
  }
}
