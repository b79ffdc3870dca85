// What the REST upstream client adds to one call, one run on this machine: the same REST
// fixture (test/fixtures/rest-server.ts) called directly with fetch and through
// RestUpstreamClient (request built from the stored operation, slot, credential, answer capped
// and shaped as a tool result), with and without an OAuth access token from the cache.
//   sequential calls: p50 / p99 of each, and the client/direct ratio
// Usage: bun scripts/bench/rest-upstream.ts [--calls N]   (default 3000 per measure)
import { cpus, loadavg } from "node:os";
import { RestUpstreamClient } from "../../src/adapters/rest-upstream/client.ts";
import { toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";
import { REST_DOCUMENT, startRestFixture } from "../../test/fixtures/rest-server.ts";

const CALLS = Number(process.argv[process.argv.indexOf("--calls") + 1]) || 3000;
const fx = startRestFixture();
try {
  const { tools } = await toolsFromOpenApi("fixture", REST_DOCUMENT);
  const bearer = {
    apply: async (_u: URL, h: Headers) => {
      h.set("authorization", "Bearer cached-token");
      return { generation: 1 };
    },
    rejected: () => false,
    state: () => ({ state: "ok" as const }),
  };
  const plain = new RestUpstreamClient({ name: "fx", baseUrl: new URL(fx.url), tools, credential: NO_CREDENTIAL, timeoutMs: 10_000 });
  const withToken = new RestUpstreamClient({ name: "fx", baseUrl: new URL(fx.url), tools, credential: bearer, timeoutMs: 10_000 });

  const direct = async () => {
    const r = await fetch(`${fx.url}/items/42`, { headers: { accept: "application/json" } });
    if (r.status !== 200) throw new Error(`direct ${r.status}`);
    await r.json();
  };
  const via = (c: RestUpstreamClient) => async () => {
    const o = await c.call("getItem", { id: "42" });
    if (o.kind !== "ok") throw new Error(`client ${o.kind}`);
  };

  const sequential = async (call: () => Promise<void>) => {
    for (let i = 0; i < 200; i++) await call();
    const times: number[] = [];
    for (let i = 0; i < CALLS; i++) {
      const t = performance.now();
      await call();
      times.push(performance.now() - t);
    }
    times.sort((a, b) => a - b);
    return { p50: times[Math.floor(CALLS / 2)]!, p99: times[Math.floor(CALLS * 0.99)]! };
  };

  console.log(`rest upstream client, ${CALLS} sequential calls each, ${cpus().length} cores, load ${loadavg()[0]!.toFixed(2)}`);
  const d = await sequential(direct);
  const p = await sequential(via(plain));
  const b = await sequential(via(withToken));
  fx.seen.length = 0;
  const row = (name: string, r: { p50: number; p99: number }) =>
    console.log(`  ${name.padEnd(28)} p50 ${r.p50.toFixed(3)} ms  p99 ${r.p99.toFixed(3)} ms  (p50 ${(r.p50 / d.p50).toFixed(2)}x direct)`);
  row("direct fetch (baseline)", d);
  row("RestUpstreamClient", p);
  row("RestUpstreamClient + bearer", b);
} finally {
  await fx.stop();
}
