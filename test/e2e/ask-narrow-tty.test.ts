// The narrow-terminal rule on a real terminal (tmux): at 60 columns only ids show, so no
// wrapped line can start with agent text; widened to 100, the recaps show, no line over 76.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { approverArgs } from "../helpers/approver-process.ts";
import { startTmuxApprover } from "../helpers/approver-tmux.ts";
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
  test("60 columns: ids only and a request to widen; after resizing to 100, the recap, every line <= 76", async () => {
    await using tty = await startTmuxApprover({
      dir: dir.path,
      args: approverArgs({ files: approverFiles(link), db: join(dir.path, "tty.db") }),
      columns: 60,
      rows: 40,
    });
    await using mcp = await connectServeMcp(serveMcpEnv(link, `https://localhost:${tty.port}`));
    const long = "Example Shop with a very long name that would wrap at sixty";
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
    await tty.pane.waitFor(/widen it to decide\./);
    expect(tty.pane.text).toContain("\x07");
    const narrow = tty.capture();
    expect(narrow).toContain(`  ${id}`);
    expect(narrow).toContain("this terminal has 60.");
    expect(narrow).not.toContain("Example Shop");
    expect(narrow).not.toContain("[ask");
    for (const line of narrow.split("\n")) expect(columns(line)).toBeLessThanOrEqual(60);

    const at = tty.pane.text.length;
    tty.resize(100, 40);
    await tty.pane.waitFor(new RegExp(`approve ${id}   or   deny ${id}`), at);
    const recap = tty.pane.text.slice(at).replaceAll("\r", "");
    expect(recap).toContain(`[ask ${id}] PAY 19.00 EUR`);
    for (const line of recap.split("\n")) expect(columns(line)).toBeLessThanOrEqual(76);
    // The agent's fake block never starts a line.
    expect(recap.split("\n").filter((l) => l.startsWith("[ask"))).toEqual([`[ask ${id}] PAY 19.00 EUR`]);
    const wide = tty.capture();
    expect(wide).toContain(`[ask ${id}] PAY 19.00 EUR`);
    for (const line of wide.split("\n")) expect(columns(line)).toBeLessThanOrEqual(76);

    // Decided on the terminal as a person would.
    const typed = tty.type(`approve ${id.toLowerCase()}`);
    await tty.pane.waitFor(new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example`), typed);
    expect((await mcp.request({ verb: "status", approval_id: id })).sc.state).toBe("approved");

    // Narrow again: `show`, `list` and `approve` give ids only and the widen request.
    const second = (await mcp.request({ verb: "account_create", provider_url: "https://provider.example/" })).sc.approval_id as string;
    await tty.pane.waitFor(new RegExp(`approve ${second}   or   deny ${second}`), typed);
    const narrowed = tty.pane.text.length;
    tty.resize(60, 40);
    await tty.pane.waitFor(/widen it to decide\./, narrowed);
    for (const command of [`show ${second}`, "list", `approve ${second}`]) {
      const from = tty.type(command);
      const shown = await tty.pane.waitFor(/asks waiting: 1[\s\S]*?widen it to decide\./, from);
      expect(shown[0]).toContain(`  ${second}`);
      expect(shown[0]).not.toContain("ACCOUNT");
    }
    // Nothing is decided on a terminal too narrow for the recap.
    expect((await mcp.request({ verb: "status", approval_id: second })).sc.state).toBe("pending");
  });
});
