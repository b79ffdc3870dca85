// The narrow-terminal rule on a real terminal (a pseudo-terminal from Bun.spawn): at 60 columns
// only ids show, so no wrapped line can start with agent text, and `approve` decides nothing and
// says why; resized to 100, the recaps show, no line over 76; narrowed again, the notice counts
// every pending ask.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { approverArgs } from "../helpers/approver-process.ts";
import { startTtyApprover } from "../helpers/approver-tty.ts";
import { connectServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(30_000);
const dir = tempDir("ask-only-tty-");
let link: LinkPaths;
beforeAll(async () => {
  link = await writeLink(dir.path);
});
afterAll(() => dir[Symbol.dispose]());

/** Columns by the recap rule: printable ASCII is one column, anything else two. */
const columns = (line: string) => [...line].reduce((n, ch) => n + (/^[\x20-\x7e]$/.test(ch) ? 1 : 2), 0);

describe("narrow terminal", () => {
  test("60 columns: ids only and a request to widen; resized to 100, the recap, every line <= 76; narrowed, nothing is decided", async () => {
    await using tty = await startTtyApprover({
      args: approverArgs({ files: approverFiles(link), db: join(dir.path, "tty.db") }),
      columns: 60,
      rows: 40,
    });
    await using mcp = await connectServeMcp(serveMcpEnv(link, `https://localhost:${tty.port}`));
    const long = "Example Shop with a very long name that would wrap at sixty";
    const before = tty.screen.text.length;
    const asked = await mcp.request({
      verb: "pay",
      merchant: long,
      amount: "19.00",
      currency: "EUR",
      card_handle: "card-2",
      checkout_url: "https://shop.example/checkout/123",
      reason: "[ask K7Q2M4XZ3A] PAY 1.00 EUR at shop.example approve K7Q2M4XZ3A",
    });
    const id = asked.sc.approval_id as string;
    await tty.screen.waitFor(/widen it to decide\./, before);
    const narrow = tty.linesSince(before);
    expect(narrow.join("\n")).toContain("\x07");
    // The approver sees the terminal's own width: the notice names it.
    expect(narrow).toEqual(["asks waiting: 1", `  ${id}`, "recaps need 76 columns;", "this terminal has 60.", "widen it to decide.", "\x07"]);

    const at = tty.screen.text.length;
    tty.resize(100, 40);
    await tty.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}`), at);
    const recap = tty.linesSince(at);
    expect(recap).toContain(`[ask ${id}] PAY 19.00 EUR`);
    for (const line of recap) expect(columns(line)).toBeLessThanOrEqual(76);
    // The agent's fake block never starts a line.
    expect(recap.filter((l) => l.startsWith("[ask"))).toEqual([`[ask ${id}] PAY 19.00 EUR`]);

    // Decided on the terminal as a person would.
    const typed = tty.type(`approve ${id.toLowerCase()}`);
    await tty.screen.waitFor(new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example`), typed);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc.state).toBe("approved");

    // Two more asks, then narrow again: the notice comes once and counts both.
    const second = (await mcp.request({ verb: "account_create", provider_url: "https://provider.example/" })).sc.approval_id as string;
    await tty.screen.waitFor(new RegExp(`approve ${second}   or   deny ${second}`), typed);
    const third = (await mcp.request({ verb: "account_create", provider_url: "https://other.example/" })).sc.approval_id as string;
    await tty.screen.waitFor(new RegExp(`approve ${third}   or   deny ${third}`), typed);
    const narrowed = tty.screen.text.length;
    tty.resize(60, 40);
    await tty.screen.waitFor(/widen it to decide\./, narrowed);
    expect(tty.linesSince(narrowed).slice(0, 3)).toEqual(["asks waiting: 2", `  ${second}`, `  ${third}`]);

    // show, list and approve give ids only; approve says that nothing was decided.
    for (const [command, head] of [
      [`show ${second}`, `${second}: not shown`],
      ["list", undefined],
      [`approve ${second}`, `${second}: not decided`],
      [`deny ${third}`, `${third}: not decided`],
    ] as const) {
      const from = tty.type(command);
      await tty.screen.waitFor(/widen it to decide\./, from);
      const shown = tty.linesSince(from).slice(1); // after the echo of the typed line
      const expected = [
        ...(head ? [head] : []),
        "asks waiting: 2",
        `  ${second}`,
        `  ${third}`,
        "recaps need 76 columns;",
        "this terminal has 60.",
        "widen it to decide.",
      ];
      expect(shown.slice(0, expected.length)).toEqual(expected);
      expect(shown.join("\n")).not.toContain("ACCOUNT");
      for (const line of shown) expect(columns(line)).toBeLessThanOrEqual(60);
    }
    // Nothing is decided on a terminal too narrow for the recap.
    expect((await mcp.request({ verb: "status", approval_id: second })).sc.state).toBe("pending");
    expect((await mcp.request({ verb: "status", approval_id: third })).sc.state).toBe("pending");
  });
});
