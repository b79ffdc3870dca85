// The console keeps the exact recap text it wrote for each ask and signs decisions over it: the
// last one written (a `show` replaces it), never a recap it did not write (it writes one first
// and decides nothing), and the step of an approval runs once, while the console takes other
// commands. A real ask ledger in memory, the console's output captured call by call.
import { describe, expect, test } from "bun:test";
import { ApproverConsole, type StepRunner } from "../../src/commands/approver/console.ts";
import type { PayAsk, StoredAsk } from "../../src/core/asks.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { renderRecap } from "../../src/core/recap/render.ts";
import type { StepOutcome } from "../../src/commands/approver/step.ts";
import { TEST_SIGNER } from "../helpers/decision-signer.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

const T0 = Date.UTC(2026, 10, 30, 9, 0, 0);
const pay = (approval_id: string): PayAsk => ({ kind: "pay", approval_id, ...PAY_FIELDS });

function setup(o: { columns?: number; step?: StepRunner } = {}) {
  const clock = { ms: T0 };
  const ledger = AskLedger.open(":memory:", () => new Date(clock.ms), TEST_SIGNER);
  const writes: string[] = [];
  const faults: string[] = [];
  const ui = new ApproverConsole({
    ledger,
    clock: () => new Date(clock.ms),
    out: (text) => writes.push(text),
    isTTY: o.columns !== undefined,
    columns: () => o.columns,
    mintRef: () => "demo-3e40a688",
    ...(o.step ? { step: o.step } : {}),
    onFault: (what) => faults.push(what),
  });
  const create = (id: string, ttlMs = 600_000): StoredAsk => {
    const r = ledger.create(pay(id), { ttlMs, maxPending: 50 });
    if (!r.ok) throw new Error(r.code);
    return r.stored;
  };
  const recordOf = (id: string) => ledger.decisionRecord(id)?.decision;
  return { clock, ledger, writes, faults, ui, create, recordOf };
}

describe("the shown recap", () => {
  test("announce writes the recap in one write, after a blank line; the text kept is that recap's, rows ended by LF", () => {
    const { ui, create, writes, recordOf } = setup();
    const stored = create("K7Q2M4XZ3A");
    ui.announce(stored);
    const recap = `${renderRecap(stored, new Date(T0)).join("\n")}\n`;
    expect(writes).toEqual([`\n${recap}`]);
    expect(ui.shownRecap("K7Q2M4XZ3A")).toBe(recap);
    ui.command("approve k7q2m4xz3a");
    expect(recordOf("K7Q2M4XZ3A")).toMatchObject({ decision: "approved", recap_sha256: sha256Hex(recap) });
    // Decided: it is no longer kept.
    expect(ui.shownRecap("K7Q2M4XZ3A")).toBeUndefined();
  });

  test("a later show replaces what is kept: the record names the last recap written", () => {
    const { ui, create, clock, writes, recordOf } = setup();
    ui.announce(create("K7Q2M4XZ3A", 61_000));
    const first = ui.shownRecap("K7Q2M4XZ3A")!;
    clock.ms += 2000;
    ui.command("show K7Q2M4XZ3A");
    const last = ui.shownRecap("K7Q2M4XZ3A")!;
    expect(last).not.toBe(first);
    expect(writes.at(-1)).toBe(`\n${last}`);
    ui.command("deny K7Q2M4XZ3A");
    expect(recordOf("K7Q2M4XZ3A")).toMatchObject({ decision: "denied", recap_sha256: sha256Hex(last) });
  });

  test("a decision on an ask whose recap this console never wrote: it writes the recap and decides nothing", () => {
    const { ui, create, writes, recordOf, ledger } = setup();
    create("K7Q2M4XZ3A");
    ui.command("approve K7Q2M4XZ3A");
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    expect(recordOf("K7Q2M4XZ3A")).toBeUndefined();
    expect(writes.at(-1)).toBe("K7Q2M4XZ3A: not decided: read its recap above, then type the decision again\n");
    const written = ui.shownRecap("K7Q2M4XZ3A")!;
    expect(writes.at(-2)).toBe(`\n${written}`);
    ui.command("approve K7Q2M4XZ3A");
    expect(recordOf("K7Q2M4XZ3A")).toMatchObject({ decision: "approved", recap_sha256: sha256Hex(written) });
  });

  test("on a terminal narrower than 76 columns nothing is written as a recap, kept or decided", () => {
    const { ui, create, recordOf, ledger } = setup({ columns: 60 });
    ui.announce(create("K7Q2M4XZ3A"));
    expect(ui.shownRecap("K7Q2M4XZ3A")).toBeUndefined();
    ui.command("approve K7Q2M4XZ3A");
    expect(ledger.get("K7Q2M4XZ3A")?.state).toBe("pending");
    expect(recordOf("K7Q2M4XZ3A")).toBeUndefined();
  });
});

describe("the step behind an approval", () => {
  function deferredStep() {
    const runs: StoredAsk[] = [];
    let finish!: (o: StepOutcome) => void;
    const step: StepRunner = {
      deadline: "60s",
      run: (stored) => {
        runs.push(stored);
        return new Promise((resolve) => {
          finish = resolve;
        });
      },
    };
    return { step, runs, finish: (o: StepOutcome) => finish(o) };
  }

  test("it starts once; meanwhile the console answers, and a second approve says it runs; its ref ends it", async () => {
    const s = deferredStep();
    const { ui, create, writes, recordOf, ledger } = setup({ step: s.step });
    const stored = create("K7Q2M4XZ3A");
    ui.announce(stored);
    const recap = ui.shownRecap("K7Q2M4XZ3A")!;
    ui.command("approve K7Q2M4XZ3A");
    expect(writes.at(-1)).toBe("K7Q2M4XZ3A: approving: PAY 19.00 EUR at shop.example\n  running the step (deadline 60s); it runs once, whatever happens\n");
    expect(ui.stepsRunning).toBe(1);
    ui.command("approve K7Q2M4XZ3A");
    expect(writes.at(-1)).toBe("K7Q2M4XZ3A: its step is running; its result comes here\n");
    ui.command("deny K7Q2M4XZ3A");
    expect(writes.at(-1)).toBe("K7Q2M4XZ3A: its step is running; its result comes here\n");
    ui.command("list");
    expect(writes.at(-1)).toBe("no pending asks\n");
    expect(s.runs.map((r) => r.ask.approval_id)).toEqual(["K7Q2M4XZ3A"]);
    expect(recordOf("K7Q2M4XZ3A")).toBeUndefined();
    s.finish({ ok: true, ref: "PAY_7" });
    await ui.stepsDone();
    expect(writes.at(-1)).toBe("\nK7Q2M4XZ3A: approved: PAY 19.00 EUR at shop.example\n  ref: PAY_7\n");
    expect(ledger.get("K7Q2M4XZ3A")).toMatchObject({ state: "approved", ref: "PAY_7" });
    expect(recordOf("K7Q2M4XZ3A")).toMatchObject({ decision: "approved", ref: "PAY_7", recap_sha256: sha256Hex(recap) });
    expect(s.runs.length).toBe(1);
  });

  test("a step that throws is a failed ask, named as a fault, never run again", async () => {
    const { ui, create, writes, faults, ledger } = setup({ step: { deadline: "60s", run: async () => Promise.reject(new TypeError("boom")) } });
    ui.announce(create("K7Q2M4XZ3A"));
    ui.command("approve K7Q2M4XZ3A");
    await ui.stepsDone();
    expect(faults).toEqual(["TypeError"]);
    expect(ledger.get("K7Q2M4XZ3A")).toMatchObject({ state: "failed", ref: "spawn_failed" });
    expect(writes.at(-1)).toContain("  the step could not start (FAULT)\n");
  });

  test("the desk's ask runs no step: approving it is the decision", () => {
    const s = deferredStep();
    const { ui, ledger, writes } = setup({ step: s.step });
    const r = ledger.create(
      {
        kind: "spend",
        approval_id: "SPEND00000",
        reservation_id: "r",
        tool: "a__b",
        price_mc: 1,
        key_id: "k",
        key_name: "",
        org_id: "o",
        org_name: "acme",
        params_sha256: "a".repeat(64),
        preview: "{}",
        preview_cut: true,
      },
      { ttlMs: 600_000, maxPending: 5 },
    );
    if (!r.ok) throw new Error(r.code);
    ui.announce(r.stored);
    ui.command("approve SPEND00000");
    expect(s.runs).toEqual([]);
    expect(writes.at(-1)).toBe("SPEND00000: approved: SPEND 1 mc on a__b\n  the desk makes the call now; no step runs here\n");
  });
});
