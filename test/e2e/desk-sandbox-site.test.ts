// DNS rebinding against the sandbox, through the compiled desk: a page on another site whose
// name resolves to the desk sends its own Host and Origin. POST /v1/sandbox/keys answers such a
// request 403 HOST_REFUSED, like /mcp, before it counts anything: the network's five keys a day
// stay for the desk's own callers.
import { afterAll, beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { startUpstreamFixture, type UpstreamFixture } from "../fixtures/upstream-server.ts";
import { adminJson, type DeskProcess, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);

const tmp = tempDir("desk-sandbox-site-");
let fx: UpstreamFixture;
let desk: DeskProcess;

beforeAll(async () => {
  fx = startUpstreamFixture();
  desk = await startDeskProcess(join(tmp.path, "d"), ["--allowed-host", "desk.example.com"]);
  await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
  await adminJson(desk, "PUT", "/admin/sandbox", { tools: ["fx__echo"] });
}, 30_000);

afterAll(async () => {
  await desk.stop();
  await fx.stop();
  tmp[Symbol.dispose]();
});

const ask = (headers: Record<string, string>) => fetch(`${desk.url}/v1/sandbox/keys`, { method: "POST", headers });

test("a foreign Host or Origin is refused before the sandbox counts; the desk's own names still get their five keys", async () => {
  const foreign: Record<string, string>[] = [
    { host: `evil.example:${desk.port}` },
    { host: `evil.example:${desk.port}`, origin: `http://evil.example:${desk.port}` },
    { host: `127.0.0.1:${desk.port}`, origin: `http://evil.example:${desk.port}` },
    { host: `127.0.0.1:${desk.port}`, origin: "null" },
    { host: `localhost:${desk.port + 1}` },
  ];
  for (let round = 0; round < 3; round++) {
    for (const headers of foreign) {
      const r = await ask(headers);
      expect([headers, r.status, await r.json()]).toEqual([headers, 403, { error: "HOST_REFUSED" }]);
    }
  }
  // None of the 15 refusals took one of this network's keys.
  const statuses: number[] = [];
  const named: Record<string, string>[] = [
    {},
    { origin: `http://127.0.0.1:${desk.port}` },
    { host: `localhost:${desk.port}` },
    { host: "desk.example.com" },
    { host: `[::1]:${desk.port}` },
  ];
  for (const headers of named) statuses.push((await ask(headers)).status);
  expect(statuses).toEqual([201, 201, 201, 201, 201]);
  const sixth = await ask({});
  expect([sixth.status, await sixth.json()]).toEqual([429, { error: "SANDBOX_LIMIT" }]);
});
