// The approver console on a terminal of a given width, with a real (in-memory) ask ledger: what
// a person sees and what is decided when the terminal is too narrow for a recap.
import { describe, expect, test } from "bun:test";
import { ApproverConsole } from "../../src/commands/approver/console.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { TEST_SIGNER } from "../helpers/decision-signer.ts";
import { SAMPLE_ACCOUNT, SAMPLE_PAY } from "../helpers/sample-asks.ts";

const NOW = new Date(Date.UTC(2026, 0, 15, 12, 0, 0));
const OTHER_PAY = { ...SAMPLE_PAY, approval_id: "M4XZ3AK7Q2" };

function consoleOn(columns: number) {
  const ledger = AskLedger.open(":memory:", () => NOW, TEST_SIGNER);
  let out = "";
  let width = columns;
  const ui = new ApproverConsole({
    ledger,
    clock: () => NOW,
    out: (text) => {
      out += text;
    },
    isTTY: true,
    columns: () => width,
    mintRef: () => "demo-3e40a688",
  });
  const store = (ask: typeof SAMPLE_PAY | typeof SAMPLE_ACCOUNT) => {
    const r = ledger.create(ask, { ttlMs: 600_000, maxPending: 50 });
    if (!r.ok) throw new Error(r.code);
    ui.announce(r.stored);
  };
  /** What one typed line prints (without the bell). */
  const type = (line: string) => {
    out = "";
    ui.command(line);
    return out;
  };
  return { ledger, ui, store, type, output: () => out, resize: (w: number) => (width = w) };
}

const NOTICE_TAIL = ["recaps need 76 columns;", "this terminal has 60.", "widen it to decide."];

describe("the approver console on a narrow terminal", () => {
  test("approve and deny decide nothing and say so, then list every pending ask", () => {
    const c = consoleOn(60);
    c.store(SAMPLE_PAY);
    c.store(OTHER_PAY);
    c.store(SAMPLE_ACCOUNT);
    for (const command of [`approve ${SAMPLE_PAY.approval_id.toLowerCase()}`, `deny ${OTHER_PAY.approval_id}`]) {
      const id = command.split(" ")[1]!.toUpperCase();
      expect(c.type(command).split("\n")).toEqual([
        `${id}: not decided`,
        "asks waiting: 3",
        `  ${SAMPLE_PAY.approval_id}`,
        `  ${OTHER_PAY.approval_id}`,
        `  ${SAMPLE_ACCOUNT.approval_id}`,
        ...NOTICE_TAIL,
        "",
      ]);
      expect(c.ledger.get(id)?.state).toBe("pending");
    }
  });

  test("a new ask, show and list count every pending ask, not only the one at hand", () => {
    const c = consoleOn(60);
    c.store(SAMPLE_PAY);
    c.store(OTHER_PAY);
    // The second ask's announcement already counts both.
    expect(c.output()).toContain(`asks waiting: 2\n  ${SAMPLE_PAY.approval_id}\n  ${OTHER_PAY.approval_id}\n`);
    expect(c.type(`show ${OTHER_PAY.approval_id}`)).toStartWith(`${OTHER_PAY.approval_id}: not shown\nasks waiting: 2\n`);
    expect(c.type("list")).toStartWith("asks waiting: 2\n");
    for (const text of [c.output(), c.type(`show ${SAMPLE_PAY.approval_id}`)]) {
      expect(text).not.toContain("Example Shop");
      for (const row of text.split("\n")) expect(row.length).toBeLessThanOrEqual(24);
    }
  });

  test("widened, the same command decides; an already decided ask answers as on a wide terminal", () => {
    const c = consoleOn(60);
    c.store(SAMPLE_PAY);
    c.resize(80);
    c.ui.resized();
    expect(c.type(`approve ${SAMPLE_PAY.approval_id}`)).toStartWith(`${SAMPLE_PAY.approval_id}: approved: PAY 19.00 EUR at shop.example\n`);
    c.resize(60);
    expect(c.type(`approve ${SAMPLE_PAY.approval_id}`)).toBe(`${SAMPLE_PAY.approval_id}: already decided (approved)\n`);
    expect(c.ledger.get(SAMPLE_PAY.approval_id)?.state).toBe("approved");
  });
});
