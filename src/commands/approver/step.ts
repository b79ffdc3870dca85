// The step behind an approval (`approver --on-approve CMD`): the operator's command, run once
// per approved pay or account ask with the stored ask as JSON on its standard input. It runs in
// a session of its own (so a Ctrl-C meant for the approver does not reach it), with a minimal
// environment, a deadline and bounded output; its first line of stdout is the approval's ref.
// The ledger records that it started before it runs (adapters/sqlite/asks.ts), so it never runs twice.
import type { AskKind, FailureRef } from "../../core/asks.ts";
import { formatDuration } from "../../core/duration.ts";
import { isSafeRef } from "../../core/ids.ts";
import type { StepFailure } from "../../core/recap/render.ts";

/** Bytes of stdout and of stderr a step may write; beyond, it is stopped and has failed. */
export const STEP_OUTPUT_MAX = 16 * 1024;
/** After the deadline's SIGTERM, how long the step's process group has before SIGKILL. */
const KILL_GRACE_MS = 2_000;

export type StepSettings = {
  /** Run as `/bin/sh -c COMMAND`. */
  command: string;
  timeoutMs: number;
  /** The approver's own PATH and HOME, passed on; nothing else of its environment is. */
  path: string | undefined;
  home: string | undefined;
  cwd: string;
};

export type StepOutcome = { ok: true; ref: string } | { ok: false; failure: StepFailure };

export type StepInput = { approvalId: string; verb: AskKind; stdin: string };

/** The variables the approver sets for its step (they are not settings of the approver). */
export const STEP_VARIABLES = ["ASK_ONLY_APPROVAL_ID", "ASK_ONLY_ASK_VERB"] as const;

/** The environment of a step: nothing of the approver's own settings, certificates or terminal. */
export function stepEnvironment(settings: StepSettings, input: StepInput): Record<string, string> {
  const [id, verb] = STEP_VARIABLES;
  return {
    PATH: settings.path || "/usr/bin:/bin",
    ...(settings.home ? { HOME: settings.home } : {}),
    TZ: "UTC",
    [id]: input.approvalId,
    [verb]: input.verb,
  };
}

type Capture = { bytes: Uint8Array[]; size: number; over: boolean };

/** Reads a stream up to STEP_OUTPUT_MAX bytes; past it, calls `over` once and drops the rest. */
async function capture(stream: ReadableStream<Uint8Array>, over: () => void): Promise<Capture> {
  const c: Capture = { bytes: [], size: 0, over: false };
  const reader = stream.getReader();
  for (;;) {
    const { done, value: chunk } = await reader.read();
    if (done) break;
    if (c.over) continue;
    if (c.size + chunk.byteLength > STEP_OUTPUT_MAX) {
      c.over = true;
      over();
      continue;
    }
    c.bytes.push(chunk);
    c.size += chunk.byteLength;
  }
  return c;
}

const text = (c: Capture): string => Buffer.concat(c.bytes).toString("utf8");

/** The step's ref: exit 0 and a first line of 1-64 [A-Za-z0-9_-], no card number, not `demo-` (the reference approver's). */
export function refOf(stdout: string): string | undefined {
  const newline = stdout.indexOf("\n");
  const first = newline === -1 ? stdout : stdout.slice(0, newline);
  return isSafeRef(first) && !first.startsWith("demo-") ? first : undefined;
}

/** Runs the step once and says how it ended; never throws for anything the step does. */
export async function runStep(settings: StepSettings, input: StepInput): Promise<StepOutcome> {
  let proc: ReturnType<typeof Bun.spawn<"pipe", "pipe", "pipe">>;
  try {
    proc = Bun.spawn(["/bin/sh", "-c", settings.command], {
      cwd: settings.cwd,
      env: stepEnvironment(settings, input),
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
      detached: true,
    });
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { ok: false, failure: { ref: "spawn_failed", code: typeof code === "string" && /^[A-Z0-9_]{1,32}$/.test(code) ? code : "unknown" } };
  }
  // The whole process group: a step that started children of its own is stopped with them.
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-proc.pid, signal);
    } catch {
      // Gone already.
    }
  };
  let why: FailureRef | undefined;
  let overStream: "stdout" | "stderr" = "stdout";
  const stop = (reason: FailureRef, signal: NodeJS.Signals) => {
    why ??= reason;
    killGroup(signal);
  };
  let grace: Timer | undefined;
  const deadline = setTimeout(() => {
    stop("timeout", "SIGTERM");
    grace = setTimeout(() => killGroup("SIGKILL"), KILL_GRACE_MS);
  }, settings.timeoutMs);

  try {
    proc.stdin.write(input.stdin);
    await proc.stdin.end();
  } catch {
    // A step that does not read its input may close stdin first; that is its business.
  }
  const [out, err] = await Promise.all([
    capture(proc.stdout, () => {
      if (why === undefined) overStream = "stdout";
      stop("output_too_large", "SIGKILL");
    }),
    capture(proc.stderr, () => {
      if (why === undefined) overStream = "stderr";
      stop("output_too_large", "SIGKILL");
    }),
    proc.exited,
  ]);
  clearTimeout(deadline);
  clearTimeout(grace);
  // What is left of the group once its leader is gone (a child it left behind) is stopped too.
  killGroup("SIGKILL");

  const stderr = text(err);
  if (why === "output_too_large") return { ok: false, failure: { ref: "output_too_large", stream: overStream, limitBytes: STEP_OUTPUT_MAX } };
  if (why === "timeout") return { ok: false, failure: { ref: "timeout", deadline: formatDuration(settings.timeoutMs), stderr } };
  if (proc.exitCode !== 0 || proc.signalCode !== null) {
    return { ok: false, failure: { ref: "exit_status", exitCode: proc.exitCode, signal: proc.signalCode === null ? null : String(proc.signalCode), stderr } };
  }
  const stdout = text(out);
  const ref = refOf(stdout);
  if (ref === undefined) {
    const newline = stdout.indexOf("\n");
    return { ok: false, failure: { ref: "bad_first_line", firstLine: newline === -1 ? stdout : stdout.slice(0, newline), stderr } };
  }
  return { ok: true, ref };
}
