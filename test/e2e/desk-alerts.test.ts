// Budget alerts from the compiled desk to a real receiver, across a `kill -9`: an attempt cut by
// the kill is sent again by the restarted desk under the same webhook-id, and once delivered an
// alert is never sent again (SPEC 8.17).
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { newWebhookSecret } from "../../src/core/finance/standard-webhooks.ts";
import { startUpstreamFixture } from "../fixtures/upstream-server.ts";
import { adminJson, startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

describe("alert delivery across a kill -9 (binary)", () => {
  test("the cut attempt is sent again under its id after the restart; a delivered alert never again", async () => {
    await using tmp = tempDir();
    await using fx = startUpstreamFixture();
    const secretText = newWebhookSecret();
    const secretFile = join(tmp.path, "alerts.secret");
    writeFileSync(secretFile, `${secretText}\n`, { mode: 0o600 });

    // The first request is held unanswered (the desk is killed meanwhile); later ones are taken.
    const seen: { id: string; body: string; headers: Record<string, string> }[] = [];
    const { promise: firstArrived, resolve: first } = Promise.withResolvers<void>();
    const { promise: never } = Promise.withResolvers<Response>();
    const receiver = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      idleTimeout: 0,
      async fetch(req) {
        const body = await req.text();
        seen.push({ id: req.headers.get("webhook-id") ?? "", body, headers: Object.fromEntries(req.headers) });
        if (seen.length === 1) {
          first();
          return never;
        }
        return new Response(null, { status: 204 });
      },
    });
    const data = join(tmp.path, "data");
    const flags = ["--alert-webhook", `http://127.0.0.1:${receiver.port}/alerts`, "--alert-webhook-secret-file", secretFile];
    try {
      let desk = await startDeskProcess(data, flags);
      await adminJson(desk, "POST", "/admin/upstreams", { name: "fx", url: fx.url });
      await adminJson(desk, "PUT", "/admin/tools/fx__echo", { price_mc: 1000, upstream_cost_mc: 0 });
      const { org_id } = (await adminJson(desk, "POST", "/admin/orgs", { name: "alerted" })) as { org_id: string };
      const newKey = async () =>
        (await adminJson(desk, "POST", "/admin/keys", { org_id, budget_mc: 1000, reset: "none", allow: ["fx__echo"], alert_thresholds: [100] })) as {
          secret: string;
        };
      const call = async (secret: string) =>
        (
          await fetch(`${desk.url}/v1/tools/fx__echo`, {
            method: "POST",
            headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
            body: JSON.stringify({ text: "spend it all" }),
          })
        ).status;
      expect(await call((await newKey()).secret)).toBe(200);
      await firstArrived;
      expect(await desk.kill()).toBe(137);

      desk = await startDeskProcess(data, flags);
      await desk.untilLog(/alert alrt_\w+ delivered \(attempt 1\)/);
      expect(seen.map((s) => s.id)).toEqual([seen[0]!.id, seen[0]!.id]);
      expect(seen[1]!.body).toBe(seen[0]!.body);
      expect(desk.stderr()).toContain("alerts: 1 attempt(s) cut by the last stop will be sent again");
      expect(await desk.stop()).toBe(0);

      // A third start has nothing of the first alert left to send: the next request is a new alert's.
      desk = await startDeskProcess(data, flags);
      expect(await call((await newKey()).secret)).toBe(200);
      await desk.untilLog(/alert alrt_\w+ delivered/);
      expect(seen).toHaveLength(3);
      expect(seen[2]!.id).not.toBe(seen[0]!.id);
      const alerts = (await (await desk.admin("GET", `/admin/alerts?org_id=${org_id}`)).json()) as { alert_id: string; state: string }[];
      expect(alerts.map((a) => a.state)).toEqual(["delivered", "delivered"]);
      for (const s of seen) expect(() => new Webhook(secretText).verify(s.body, s.headers)).not.toThrow();
      expect(await desk.stop()).toBe(0);
    } finally {
      receiver.stop(true);
    }
  }, 60_000);
});
