// Upstream credentials as the ledger keeps them across desks: sealed headers of a ledger made
// before credentials (migration "desk rest upstreams and credentials") become a header
// credential at start-up and keep reaching the upstream; a stored field that does not open
// under the desk's sealing key stops the desk, naming the upstream and the field.
import { expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { chmodSync } from "node:fs";
import { join } from "node:path";
import { mcpConnector } from "../../src/adapters/mcp-upstream/connector.ts";
import { restConnector } from "../../src/adapters/rest-upstream/connector.ts";
import { SqliteDeskLedger } from "../../src/adapters/sqlite/desk/ledger.ts";
import { DESK_MIGRATIONS } from "../../src/adapters/sqlite/desk/migrations.ts";
import { openCredential } from "../../src/adapters/upstream-auth/open.ts";
import { Desk } from "../../src/core/desk/desk.ts";
import { SealedHeadersError } from "../../src/core/desk/registry.ts";
import { importSealingKey, seal } from "../../src/core/desk/seal.ts";
import { generateSigningKey, loadSigner } from "../../src/core/receipt/index.ts";
import { SealedFieldError } from "../../src/core/upstream/credential-store.ts";
import { REST_DOCUMENT, startRestFixture } from "../fixtures/rest-server.ts";
import { startUpstreamFixture } from "../fixtures/upstream-server.ts";
import { tempDir } from "../helpers/tmp.ts";
import { makeDesk } from "./desk-harness.ts";

const SECRET = "sk-old-desk-HEADER-0123456789";

async function openDesk(path: string, keyBytes: Uint8Array) {
  const ledger = new SqliteDeskLedger(path);
  try {
    const desk = await Desk.open({
      ledger,
      connectors: { mcp: mcpConnector, rest: restConnector },
      openCredential,
      signer: loadSigner(generateSigningKey().privatePem),
      sealingKey: await importSealingKey(keyBytes),
      log: () => {},
    });
    return { desk, ledger };
  } catch (err) {
    await ledger.close();
    throw err;
  }
}

test("sealed headers of a ledger made before credentials become a header credential, and still reach the upstream", async () => {
  await using dir = tempDir("desk-old-headers-");
  await using paid = startUpstreamFixture({ requireHeader: { name: "x-api-key", value: SECRET } });
  const path = join(dir.path, "desk.db");
  const keyBytes = crypto.getRandomValues(new Uint8Array(32));
  const key = await importSealingKey(keyBytes);
  const before = DESK_MIGRATIONS.findIndex((m) => m.name === "desk rest upstreams and credentials");
  expect(before).toBeGreaterThan(0);
  const raw = new Database(path, { create: true, strict: true });
  for (const [i, m] of DESK_MIGRATIONS.slice(0, before).entries()) {
    raw.run(m.sql);
    raw.run(`PRAGMA user_version = ${i + 1}`);
  }
  // As the older desk stored them: one blob, the upstream's name as additional data.
  const blob = await seal(key, "paid", JSON.stringify({ "x-api-key": SECRET }));
  raw.run("INSERT INTO upstreams (name, url, sealed_headers, header_names, created_at, refreshed_at) VALUES ('paid', ?, ?, '[\"x-api-key\"]', 0, 0)", [
    paid.url,
    blob,
  ]);
  raw.run("INSERT INTO tools (name, upstream, upstream_tool, description, input_schema, price_mc) VALUES ('paid__echo', 'paid', 'echo', 'echo', ?, 0)", [
    JSON.stringify({ type: "object", properties: { text: { type: "string" } }, required: ["text"] }),
  ]);
  raw.close();
  chmodSync(path, 0o600);

  // Another sealing key: the blob does not open, and the desk does not start.
  await expect(openDesk(path, new Uint8Array(32).fill(7))).rejects.toBeInstanceOf(SealedHeadersError);

  await using t = await makeDesk({ dir: dir.path, sealingKeyBytes: keyBytes });
  const record = (await t.ledger.catalog.upstream("paid"))!;
  expect(record).toMatchObject({ kind: "mcp", sealedHeaders: null, auth: { type: "header", header_names: ["x-api-key"] } });
  expect(Object.keys(await t.ledger.credentials.of("paid").load())).toEqual(["header:x-api-key"]);
  expect(t.logs).toContain("upstream paid: its sealed headers are now a header credential");
  const listed = (await (await t.admin("GET", "/admin/upstreams")).json()) as { header_names: string[]; auth: unknown }[];
  expect(listed[0]).toMatchObject({ header_names: ["x-api-key"], auth: { type: "header", header_names: ["x-api-key"], state: "ok" } });
  const k = await t.makeKey({ budget_mc: 10, reset: "none", allow: ["paid__echo"] });
  expect((await t.call(k.secret, "paid__echo", { text: "hi" })).status).toBe(200);
  expect(paid.seenCredentials.at(-1)).toBe(SECRET);
});

test("a credential field sealed under another key stops the desk at start-up, naming the upstream and the field", async () => {
  await using dir = tempDir("desk-wrong-key-");
  await using fixture = startRestFixture();
  const keyBytes = crypto.getRandomValues(new Uint8Array(32));
  {
    await using t = await makeDesk({ dir: dir.path, sealingKeyBytes: keyBytes });
    const r = await t.admin("POST", "/admin/upstreams", {
      name: "api",
      base_url: fixture.url,
      openapi: REST_DOCUMENT,
      auth: { type: "bearer", token: SECRET },
    });
    expect(r.status).toBe(201);
  }
  const path = join(dir.path, "desk.db");
  const err = await openDesk(path, new Uint8Array(32).fill(9)).then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(SealedFieldError);
  expect(err).toMatchObject({ upstream: "api", field: "token" });
  // A blob moved to another field of the same upstream does not open either.
  const db = new Database(path, { strict: true });
  db.run("INSERT INTO upstream_credentials (upstream, field, sealed) SELECT upstream, 'password', sealed FROM upstream_credentials WHERE field = 'token'");
  db.close();
  await expect(openDesk(path, keyBytes)).rejects.toMatchObject({ name: "SealedFieldError", field: "password" });
});
