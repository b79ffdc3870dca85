// A desk built in-process for the integration tests: a real ledger (production migrations, in a
// temp dir), a real signer and sealing key, and the same fetch handler the binary serves.
import { expect } from "bun:test";
import { join } from "node:path";
import { Desk } from "../../src/core/desk/desk.ts";
import type { ApproverConnection } from "../../src/core/desk/ports.ts";
import { createHandler, type Handler } from "../../src/commands/desk/http.ts";
import { importSealingKey } from "../../src/core/desk/seal.ts";
import { sha256 } from "../../src/core/desk/secrets.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";
import { tempDir } from "../helpers/tmp.ts";

export const ADMIN_TOKEN = "test-admin-token-0123456789abcdefghijklmnop";

/** A clock a test moves by hand. */
export function manualClock(startIso: string): { now: () => number; set(iso: string): void; advance(ms: number): void } {
  let t = Date.parse(startIso);
  return {
    now: () => t,
    set(iso) {
      t = Date.parse(iso);
    },
    advance(ms) {
      t += ms;
    },
  };
}

export type TestDesk = {
  desk: Desk;
  ledger: SqliteDeskLedger;
  handler: Handler;
  dbPath: string;
  dir: string;
  logs: string[];
  admin(method: string, path: string, body?: unknown): Promise<Response>;
  call(secret: string, tool: string, args: unknown): Promise<Response>;
  /** Org + key in one go; returns the secret. */
  makeKey(body: Record<string, unknown>): Promise<{ orgId: string; keyId: string; secret: string }>;
} & AsyncDisposable;

export type MakeDeskOptions = {
  now?: () => number;
  upstreamTimeoutMs?: number;
  /** The sealing key's 32 bytes (default: new ones), to open a ledger again as the same desk. */
  sealingKeyBytes?: Uint8Array;
  /** A directory of the caller's that holds the ledger and outlives the desk (default: a temp dir removed with it). */
  dir?: string;
  /** The approver calls above a key's threshold wait on (default: none). */
  approver?: ApproverConnection;
  /** How long a receipts export waits for a thread, and how long its reader may take nothing (defaults: the desk's). */
  exportPlaceWaitMs?: number;
  exportIdleMs?: number;
};

export async function makeDesk(options: MakeDeskOptions = {}): Promise<TestDesk> {
  const tmp = options.dir === undefined ? tempDir("desk-int-") : { path: options.dir, [Symbol.dispose]: () => {} };
  const dbPath = join(tmp.path, "desk.db");
  const ledger = new SqliteDeskLedger(dbPath, { backgroundCheckpointMs: 200, exportPlaceWaitMs: options.exportPlaceWaitMs });
  const logs: string[] = [];
  const desk = await Desk.open({
    ledger,
    connectors: { mcp: mcpConnector, rest: restConnector },
    openCredential,
    signer: loadSigner(generateSigningKey().privatePem),
    sealingKey: await importSealingKey(options.sealingKeyBytes ?? crypto.getRandomValues(new Uint8Array(32))),
    now: options.now,
    upstreamTimeoutMs: options.upstreamTimeoutMs ?? 5000,
    log: (line) => logs.push(line),
    ...(options.approver ? { approver: options.approver } : {}),
  });
  const handler = createHandler(desk, {
    adminTokenSha256: sha256(ADMIN_TOKEN),
    onInternal: (err) => logs.push(`internal: ${String(err)}`),
    exportIdleMs: options.exportIdleMs,
  });
  const admin = (method: string, path: string, body?: unknown) =>
    handler(
      new Request(`http://desk.test${path}`, {
        method,
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    );
  const call = (secret: string, tool: string, args: unknown) =>
    handler(
      new Request(`http://desk.test/v1/tools/${tool}`, {
        method: "POST",
        headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
        body: JSON.stringify(args),
      }),
    );
  let orgId: string | null = null;
  const makeKey = async (body: Record<string, unknown>) => {
    if (orgId === null) orgId = ((await (await admin("POST", "/admin/orgs", { name: "acme" })).json()) as { org_id: string }).org_id;
    const r = await admin("POST", "/admin/keys", { org_id: orgId, ...body });
    if (r.status !== 201) throw new Error(`key creation failed: ${r.status} ${await r.text()}`);
    const k = (await r.json()) as { key_id: string; secret: string };
    return { orgId: orgId!, keyId: k.key_id, secret: k.secret };
  };
  return {
    desk,
    ledger,
    handler,
    dbPath,
    dir: tmp.path,
    logs,
    admin,
    call,
    makeKey,
    async [Symbol.asyncDispose]() {
      await desk.close();
      await ledger.close();
      tmp[Symbol.dispose]();
    },
  };
}

/**
 * makeDesk with the fixture upstream at `fxUrl` registered as `fx` and each of `prices.tools`
 * priced (the set-up most desk tests share).
 */
export async function makeDeskOnFixture(
  fxUrl: string,
  prices: { tools: readonly string[]; priceMc: number; upstreamCostMc: number },
  options: MakeDeskOptions = {},
): Promise<TestDesk> {
  const t = await makeDesk(options);
  expect((await t.admin("POST", "/admin/upstreams", { name: "fx", url: fxUrl })).status).toBe(201);
  for (const tool of prices.tools) {
    expect((await t.admin("PUT", `/admin/tools/${tool}`, { price_mc: prices.priceMc, upstream_cost_mc: prices.upstreamCostMc })).status).toBe(200);
  }
  return t;
}
