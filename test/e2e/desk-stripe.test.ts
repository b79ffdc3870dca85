// Paid top-ups through the compiled desk as an operator sets them up: the Stripe secret is a
// private file, rates come with it, and a Checkout Session signed by Stripe's own library tops
// the org up once; a start-up with half the settings, or a secret file others can read, stops.
import { describe, expect, test } from "bun:test";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import Stripe from "stripe";
import { runBinary } from "../helpers/binary.ts";
import { startDeskProcess } from "../helpers/desk-process.ts";
import { tempDir } from "../helpers/tmp.ts";

const SECRET = "whsec_test_0123456789abcdefghijklmnopqrstuv";
const stripe = new Stripe("sk_test_not_used_for_any_request");

describe("desk --stripe-webhook-secret-file (binary)", () => {
  test("a paid session signed by Stripe's library tops the org up at the rate, once", async () => {
    await using tmp = tempDir();
    const secretFile = join(tmp.path, "stripe.secret");
    writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
    const desk = await startDeskProcess(join(tmp.path, "data"), ["--stripe-webhook-secret-file", secretFile, "--topup-rate", "EUR=1000"]);
    try {
      const { org_id } = (await (await desk.admin("POST", "/admin/orgs", { name: "paying" })).json()) as { org_id: string };
      expect((await desk.admin("PATCH", `/admin/orgs/${org_id}`, { budget_mc: 0, reset: "none" })).status).toBe(200);
      const payload = JSON.stringify({
        id: "evt_e2e_1",
        object: "event",
        type: "checkout.session.completed",
        data: {
          object: {
            id: "cs_test_e2e",
            object: "checkout.session",
            amount_total: 1250,
            currency: "eur",
            livemode: false,
            metadata: { org_id },
            payment_status: "paid",
          },
        },
      });
      const post = async () =>
        fetch(`${desk.url}/v1/topups/stripe`, {
          method: "POST",
          headers: { "stripe-signature": await stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: SECRET }), "content-type": "application/json" },
          body: payload,
        });
      expect((await post()).status).toBe(200);
      expect(((await (await post()).json()) as { added: boolean }).added).toBe(false);
      const org = (await (await desk.admin("GET", `/admin/orgs/${org_id}`)).json()) as { budget: { budget_mc: number } };
      expect(org.budget.budget_mc).toBe(1_250_000);
      const forged = await fetch(`${desk.url}/v1/topups/stripe`, {
        method: "POST",
        headers: { "stripe-signature": `t=1,v1=${"0".repeat(64)}` },
        body: payload,
      });
      expect(forged.status).toBe(400);
    } finally {
      expect(await desk.stop()).toBe(0);
    }
    expect(desk.stderr()).toContain("stripe webhook refused: SIGNATURE_MISMATCH");
  }, 30_000);

  test("half the settings, or a secret file others can read, stop the desk before it starts", async () => {
    await using tmp = tempDir();
    const secretFile = join(tmp.path, "stripe.secret");
    writeFileSync(secretFile, SECRET, { mode: 0o600 });
    const data = join(tmp.path, "data");
    const noRate = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data, "--stripe-webhook-secret-file", secretFile]);
    expect(noRate.code).toBe(2);
    expect(noRate.stderr).toContain("--stripe-webhook-secret-file needs at least one --topup-rate");
    const noSecret = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data, "--topup-rate", "EUR=1000"]);
    expect(noSecret.code).toBe(2);
    const badRate = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data, "--stripe-webhook-secret-file", secretFile, "--topup-rate", "XXX=1"]);
    expect(badRate.code).toBe(2);
    const shared = join(tmp.path, "shared.secret");
    writeFileSync(shared, SECRET, { mode: 0o644 });
    const readable = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data, "--stripe-webhook-secret-file", shared, "--topup-rate", "EUR=1000"]);
    expect(readable.code).toBe(1);
    const wrong = join(tmp.path, "wrong.secret");
    writeFileSync(wrong, "sk_test_not_a_webhook_secret", { mode: 0o600 });
    const notWhsec = await runBinary(["desk", "--listen", "127.0.0.1:0", "--data", data, "--stripe-webhook-secret-file", wrong, "--topup-rate", "EUR=1000"]);
    expect(notWhsec.code).toBe(1);
    expect(notWhsec.stderr).toContain("whsec_");
  }, 30_000);
});
