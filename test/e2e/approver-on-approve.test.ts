// The step behind `approve` (`approver --on-approve CMD`), through the compiled binary on Bun's
// pseudo-terminal: a person types the decision, the step runs once with the stored ask on its
// stdin and a minimal environment, and its outcome is the ask's state, shown (escaped) and
// signed. A step that fails, prints no ref, floods its output or passes its deadline fails the
// ask; an approver killed mid-step never runs it again. Every run of the step appends to a file,
// so the test counts them.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { askObject, type PayAsk } from "../../src/core/asks.ts";
import { openDecision } from "../../src/core/decision/verify.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { canonicalJson } from "../../src/core/receipt/canonical.ts";
import { sha256Hex } from "../../src/core/receipt/hash.ts";
import { ReceiptKeys } from "../../src/core/receipt/verify.ts";
import { startTtyApprover, type TtyApprover } from "../helpers/approver-tty.ts";
import { runBinary } from "../helpers/binary.ts";
import { makeDeskPems, makeLinkPems, writeDeskPems, writeLinkPems } from "../helpers/certs.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";
import { tempDir } from "../helpers/tmp.ts";

const dir = tempDir("ask-only-on-approve-");
let ap: TtyApprover;
let baseArgs: string[];
let agentTls: { cert: string; key: string; ca: string };
let deskTls: { cert: string; key: string; ca: string };
const db = join(dir.path, "state", "asks.db");

/** One step for every test: what it does is chosen by the ask's merchant. */
const STEP = `#!/bin/sh
d='${dir.path}'
input=$(cat)
printf '%s\\n' "$input" > "$d/stdin-$ASK_ONLY_APPROVAL_ID.json"
env > "$d/env-$ASK_ONLY_APPROVAL_ID.txt"
echo "$ASK_ONLY_APPROVAL_ID" >> "$d/runs.txt"
case "$input" in
  *'"merchant":"Step ok"'*) echo "PAY_OK_1"; echo "a second line is not read" ;;
  *'"merchant":"Step fails"'*) printf 'card declined\\033[2J\\n' >&2; exit 3 ;;
  *'"merchant":"Step bad line"'*) echo "not a ref!" ;;
  *'"merchant":"Step demo"'*) echo "demo-12345678" ;;
  *'"merchant":"Step loud"'*) head -c 100000 /dev/zero | tr '\\000' x ;;
  *'"merchant":"Step slow"'*) cut -d' ' -f5 /proc/$$/stat > "$d/slow.pgid"; sleep 30 ;;
esac
`;

beforeAll(async () => {
  const link = writeLinkPems(dir.path, await makeLinkPems());
  const desk = writeDeskPems(dir.path, await makeDeskPems());
  const read = (p: string) => Bun.file(p).text();
  agentTls = { cert: await read(link.clientCert), key: await read(link.clientKey), ca: await read(link.approverCa) };
  deskTls = { cert: await read(desk.deskCert), key: await read(desk.deskKey), ca: await read(link.approverCa) };
  writeFileSync(join(dir.path, "step.sh"), STEP);
  baseArgs = ["approver", "--cert", link.approverCert, "--key", link.approverKey, "--ca", link.clientCa, "--listen", "127.0.0.1:0"];
  ap = await startTtyApprover({
    args: [
      ...baseArgs,
      "--desk-listen",
      "127.0.0.1:0",
      "--desk-ca",
      desk.deskCa,
      "--db",
      db,
      "--on-approve",
      `sh '${join(dir.path, "step.sh")}'`,
      "--on-approve-timeout",
      "2s",
    ],
    env: { ASK_ONLY_PAY_APPROVER_MAX_AMOUNT: "5000" },
  });
}, 30_000);
afterAll(async () => {
  await ap?.stop();
  dir[Symbol.dispose]();
});

/** Processes of a process group that still run (zombies left to an init that does not reap them do not count). */
function liveInGroup(pgid: number): number[] {
  const live: number[] = [];
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, "utf8");
    } catch {
      continue;
    }
    const [state, , group] = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (Number(group) === pgid && state !== "Z" && state !== "X") live.push(Number(entry));
  }
  return live;
}

const runsOf = (id: string, file = "runs.txt") => {
  const path = join(dir.path, file);
  return existsSync(path)
    ? readFileSync(path, "utf8")
        .split("\n")
        .filter((l) => l === id).length
    : 0;
};

async function ask(a: TtyApprover, merchant: string): Promise<PayAsk> {
  const fields = { approval_id: mintApprovalId(), ...PAY_FIELDS, merchant };
  const at = a.screen.text.length;
  const res = await fetch(`https://localhost:${a.port}/v1/asks/pay`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(fields),
    tls: agentTls,
  } as RequestInit);
  expect(res.status).toBe(201);
  await a.screen.waitFor(new RegExp(`approve ${fields.approval_id}   or   deny ${fields.approval_id}\\r\\n`), at);
  return { kind: "pay", ...fields };
}

async function statusOf(a: TtyApprover, id: string) {
  return (await fetch(`https://localhost:${a.port}/v1/asks/${id}`, { tls: agentTls } as RequestInit)).json();
}

async function recordOf(a: TtyApprover, id: string) {
  const keys = ReceiptKeys.fromJwks(JSON.parse((await runBinary(["approver", "--print-decision-keys", "--db", db])).stdout));
  const envelope = await (await fetch(`https://localhost:${a.port}/v1/asks/${id}/decision`, { tls: agentTls } as RequestInit)).json();
  const opened = openDecision(envelope, keys);
  expect(opened.checks.every((c) => c.ok)).toBe(true);
  return opened.signed!;
}

/** Types approve, waits for the step's start and then for `end` (its result), returns the lines from the start. */
async function approve(a: TtyApprover, id: string, end: RegExp): Promise<string[]> {
  const at = a.type(`approve ${id}`);
  await a.screen.waitFor(
    new RegExp(`${id}: approving: PAY 19\\.00 EUR at shop\\.example\\r\\n  running the step \\(deadline 2s\\); it runs once, whatever happens`),
    at,
  );
  await a.screen.waitFor(end, at);
  return a.screen.linesSince(at);
}

describe("a step that succeeds", () => {
  test("its first line is the ref; it got the stored ask on stdin and a minimal environment; it ran once", async () => {
    const stored = await ask(ap, "Step ok");
    const id = stored.approval_id;
    const shown = ap.screen.lastRecapBytes(id);
    const lines = await approve(ap, id, new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example\\r\\n  ref: PAY_OK_1\\r\\n`));
    expect(lines).toContain("  ref: PAY_OK_1");
    expect(await statusOf(ap, id)).toEqual({ approval_id: id, state: "approved", ref: "PAY_OK_1" });
    expect(await recordOf(ap, id)).toMatchObject({ decision: "approved", ref: "PAY_OK_1", recap_sha256: sha256Hex(shown) });
    expect(readFileSync(join(dir.path, `stdin-${id}.json`), "utf8")).toBe(`${canonicalJson(askObject(stored))}\n`);
    const env = Object.fromEntries(
      readFileSync(join(dir.path, `env-${id}.txt`), "utf8")
        .trimEnd()
        .split("\n")
        .map((l) => [l.slice(0, l.indexOf("=")), l.slice(l.indexOf("=") + 1)]),
    );
    expect(env).toMatchObject({ TZ: "UTC", ASK_ONLY_APPROVAL_ID: id, ASK_ONLY_ASK_VERB: "pay", PATH: process.env.PATH ?? "/usr/bin:/bin" });
    // Nothing else of the approver's environment: not its settings, not its terminal; what is
    // left is the shell's own (PWD and the like).
    expect(
      Object.keys(env).filter((k) => !["PATH", "HOME", "TZ", "ASK_ONLY_APPROVAL_ID", "ASK_ONLY_ASK_VERB", "PWD", "OLDPWD", "SHLVL", "_"].includes(k)),
    ).toEqual([]);
    expect(runsOf(id)).toBe(1);
    const again = ap.type(`approve ${id}`);
    await ap.screen.waitFor(new RegExp(`${id}: already decided \\(approved\\)`), again);
    expect(runsOf(id)).toBe(1);
  });
});

describe("a step that fails: the ask is failed, the person reads why (escaped), nothing is retried", () => {
  test("a non-zero exit: its status and its stderr, escaped", async () => {
    const { approval_id: id } = await ask(ap, "Step fails");
    const lines = await approve(ap, id, /it is not run again: check by hand what it did\r\n/);
    expect(lines).toContain(`${id}: failed: PAY 19.00 EUR at shop.example`);
    expect(lines).toContain("  the step exited with status 3");
    expect(lines).toContain("  stderr:    (from the step) card declined\\u{1b}[2J\\u{a}");
    expect(ap.screen.text).not.toContain("\u001b[2J");
    expect(await statusOf(ap, id)).toEqual({ approval_id: id, state: "failed", ref: "exit_status" });
    expect(await recordOf(ap, id)).toMatchObject({ decision: "failed", ref: "exit_status" });
    const again = ap.type(`approve ${id}`);
    await ap.screen.waitFor(new RegExp(`${id}: already decided \\(failed\\)`), again);
    expect(runsOf(id)).toBe(1);
  });

  test("exit 0 without a ref on its first line, or with the reference approver's demo- form", async () => {
    for (const [merchant, line] of [
      ["Step bad line", "  line 1:    (from the step) not a ref!"],
      ["Step demo", "  line 1:    (from the step) demo-12345678"],
    ] as const) {
      const { approval_id: id } = await ask(ap, merchant);
      const lines = await approve(ap, id, /it is not run again: check by hand what it did\r\n/);
      expect(lines).toContain("  the step exited 0, but its first line is not a ref of 1-64 [A-Za-z0-9_-]");
      expect(lines).toContain(line);
      expect(await statusOf(ap, id)).toEqual({ approval_id: id, state: "failed", ref: "bad_first_line" });
      expect(runsOf(id)).toBe(1);
    }
  });

  test("too much output: stopped at 16 KiB", async () => {
    const { approval_id: id } = await ask(ap, "Step loud");
    const lines = await approve(ap, id, /it is not run again: check by hand what it did\r\n/);
    expect(lines).toContain("  the step wrote over 16384 bytes to stdout; it was stopped");
    expect(await statusOf(ap, id)).toEqual({ approval_id: id, state: "failed", ref: "output_too_large" });
  });

  test("past its deadline: stopped with its process group, failed as timeout", async () => {
    const { approval_id: id } = await ask(ap, "Step slow");
    const started = Date.now();
    const lines = await approve(ap, id, /it is not run again: check by hand what it did\r\n/);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(lines).toContain("  the step ran past its deadline (2s); it was stopped");
    expect(await statusOf(ap, id)).toEqual({ approval_id: id, state: "failed", ref: "timeout" });
    // The step's process group (the approver's /bin/sh -c, this script and its sleep) is gone.
    const pgid = Number(readFileSync(join(dir.path, "slow.pgid"), "utf8"));
    expect(pgid).toBeGreaterThan(1);
    expect(liveInGroup(pgid)).toEqual([]);
  });
});

describe("what does not run a step", () => {
  test("a denial, and the desk's spend ask (the desk makes that call)", async () => {
    const { approval_id: denied } = await ask(ap, "Step ok");
    const at = ap.type(`deny ${denied}`);
    await ap.screen.waitFor(new RegExp(`${denied}: denied:`), at);
    expect(runsOf(denied)).toBe(0);

    const preview = canonicalJson({ q: 1 });
    const id = mintApprovalId();
    const body = {
      approval_id: id,
      reservation_id: "r1",
      tool: "wx__forecast",
      price_mc: 100,
      key_id: "k1",
      key_name: "",
      org_id: "o1",
      org_name: "acme",
      params_sha256: sha256Hex(preview),
      preview,
      preview_cut: false,
    };
    let from = ap.screen.text.length;
    const res = await fetch(`https://localhost:${ap.deskPort}/v1/asks/spend`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(body),
      tls: deskTls,
    } as RequestInit);
    expect(res.status).toBe(201);
    await ap.screen.waitFor(new RegExp(`approve ${id}   or   deny ${id}\\r\\n`), from);
    from = ap.type(`approve ${id}`);
    await ap.screen.waitFor(/the desk makes the call now; no step runs here/, from);
    expect(runsOf(id)).toBe(0);
  });
});

describe("the approver stopped while a step runs", () => {
  const KILL_STEP = (d: string) => `#!/bin/sh
echo "$ASK_ONLY_APPROVAL_ID" >> '${d}/kill-runs.txt'
cut -d' ' -f5 /proc/$$/stat > '${d}/kill.pgid'
echo started > '${d}/started.fifo'
sleep 30
`;

  test("kill -9 mid-step: on restart the ask is failed/interrupted, the person is told to check by hand, and the step never runs again", async () => {
    await using own = tempDir("ask-only-kill-step-");
    const killDb = join(own.path, "asks.db");
    writeFileSync(join(own.path, "step.sh"), KILL_STEP(own.path));
    expect(spawnSync("mkfifo", [join(own.path, "started.fifo")]).status).toBe(0);
    const args = [...baseArgs, "--db", killDb, "--on-approve", `sh '${join(own.path, "step.sh")}'`, "--on-approve-timeout", "1m"];
    const first = await startTtyApprover({ args });
    let id = "";
    let shown: Buffer;
    try {
      ({ approval_id: id } = await ask(first, "Example Shop"));
      shown = first.screen.lastRecapBytes(id);
      const at = first.type(`approve ${id}`);
      await first.screen.waitFor(/running the step/, at);
      // The step says it started (a FIFO: read as it is written), then the approver dies hard.
      expect(await Bun.file(join(own.path, "started.fifo")).text()).toBe("started\n");
      first.proc.kill("SIGKILL");
      expect(await first.proc.exited).not.toBe(0);
    } finally {
      await first.stop();
      // The step may outlive the approver (it runs in a session of its own): what it did is the
      // person's to check; the test ends it.
      const pgid = Number(readFileSync(join(own.path, "kill.pgid"), "utf8"));
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {
        // Already gone.
      }
    }
    expect(readFileSync(join(own.path, "kill-runs.txt"), "utf8")).toBe(`${id}\n`);

    await using second = await startTtyApprover({ args });
    await second.screen.waitFor(
      new RegExp(
        `${id}: failed: PAY 19\\.00 EUR at shop\\.example\\r\\n  the step was interrupted: the approver stopped while it ran\\r\\n  it is not run again: check by hand what it did\\r\\n`,
      ),
    );
    const at = second.type(`approve ${id}`);
    await second.screen.waitFor(new RegExp(`${id}: already decided \\(failed\\)`), at);
    expect(readFileSync(join(own.path, "kill-runs.txt"), "utf8")).toBe(`${id}\n`);
    expect(await statusOf(second, id)).toEqual({ approval_id: id, state: "failed", ref: "interrupted" });
    const keys = ReceiptKeys.fromJwks(JSON.parse((await runBinary(["approver", "--print-decision-keys", "--db", killDb])).stdout));
    const envelope = await (await fetch(`https://localhost:${second.port}/v1/asks/${id}/decision`, { tls: agentTls } as RequestInit)).json();
    const opened = openDecision(envelope, keys);
    expect(opened.checks.every((c) => c.ok)).toBe(true);
    // The person's approval was on the recap of the first run's terminal.
    expect(opened.signed).toMatchObject({ decision: "failed", ref: "interrupted", recap_sha256: sha256Hex(shown!) });
  }, 60_000);

  test("SIGTERM mid-step: the approver lets the step end, records it, then stops", async () => {
    await using own = tempDir("ask-only-term-step-");
    writeFileSync(join(own.path, "step.sh"), `#!/bin/sh\necho started > '${own.path}/started.fifo'\necho TERM_OK\n`);
    expect(spawnSync("mkfifo", [join(own.path, "started.fifo")]).status).toBe(0);
    const termDb = join(own.path, "asks.db");
    const a = await startTtyApprover({ args: [...baseArgs, "--db", termDb, "--on-approve", `sh '${join(own.path, "step.sh")}'`] });
    const { approval_id: id } = await ask(a, "Example Shop");
    const at = a.type(`approve ${id}`);
    await a.screen.waitFor(/running the step/, at);
    // The step is blocked on its FIFO until read: stop the approver while it runs, then let it go on.
    a.proc.kill("SIGTERM");
    await a.screen.waitFor(/waiting for 1 running step to end/, at);
    expect(await Bun.file(join(own.path, "started.fifo")).text()).toBe("started\n");
    await a.screen.waitFor(new RegExp(`${id}: approved: PAY 19\\.00 EUR at shop\\.example\\r\\n  ref: TERM_OK`), at);
    expect(await a.proc.exited).toBe(0);
    const exported = await runBinary(["approver", "--export-decisions", "--db", termDb]);
    expect(JSON.parse(exported.stdout).decision).toMatchObject({ approval_id: id, decision: "approved", ref: "TERM_OK" });
    await a.stop();
  }, 60_000);
});
