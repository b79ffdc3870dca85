// The approval channel: the person types `approve ID` or `deny ID` on the approver's own
// terminal. Every line about an ask comes from core/recap, rendered from the stored ask; agent
// text never reaches the terminal any other way.
//
// The console keeps, for each ask, the exact recap text it last wrote to the terminal: a
// decision is signed over the SHA-256 of those bytes (SPEC 7.1, "the shown recap"), so the
// record names what the person had in front of them, not a recap rendered again later.
import type { StoredAsk } from "../../core/asks.ts";
import { normalizeApprovalIdInput } from "../../core/ids.ts";
import type { AskLedger, DecideResult } from "../../adapters/sqlite/asks.ts";
import { sha256Hex } from "../../core/receipt/hash.ts";
import {
  type ConsoleNote,
  RECAP_WIDTH,
  renderConsoleNote,
  renderDecision,
  renderListLine,
  renderNarrowNotice,
  renderRecap,
  renderStepFailure,
  renderStepStarted,
  type StepFailure,
} from "../../core/recap/render.ts";
import type { StepOutcome } from "./step.ts";

/** The step behind an approval of a pay or account ask (`--on-approve`), when one is set. */
export type StepRunner = {
  /** The deadline as the person reads it (`60s`). */
  deadline: string;
  run: (stored: StoredAsk) => Promise<StepOutcome>;
};

export type ConsoleOptions = {
  ledger: AskLedger;
  clock: () => Date;
  /** Writes console text (stdout). One call per block: a recap is written by one call. */
  out: (text: string) => void;
  /** stdout is a terminal: bell on a new ask, and the narrow-terminal rule applies. */
  isTTY: boolean;
  /** The terminal's width now (undefined when unknown). */
  columns: () => number | undefined;
  /** The reference approver's ref for an approval without a step. */
  mintRef: () => string;
  step?: StepRunner;
  /** A fault while recording a step's end, by name only (stderr). */
  onFault?: (what: string) => void;
};

const BELL = "\x07";

const note = (n: ConsoleNote): string[] => [renderConsoleNote(n)];

/** The console's own words (no ask text in them). */
const CONSOLE_HELP = [
  "commands:",
  "  list          pending asks, one line each",
  "  show ID       the recap of one ask",
  "  approve ID    approve a pending ask",
  "  deny ID       deny a pending ask",
  "  help          this help",
  "ids are case-insensitive",
];

/** The recap text last written for an ask, kept until the ask is decided or expires. */
type Shown = { text: string; expiresAt: number };

export class ApproverConsole {
  readonly #o: ConsoleOptions;
  /** Whether the last output was made for a narrow terminal (recaps were held back). */
  #heldBack = false;
  readonly #shown = new Map<string, Shown>();
  readonly #running = new Set<Promise<void>>();

  constructor(options: ConsoleOptions) {
    this.#o = options;
  }

  /** A terminal narrower than a recap line: a wrapped line could start with agent text. */
  get narrow(): boolean {
    if (!this.#o.isTTY) return false;
    const columns = this.#o.columns();
    return columns !== undefined && columns < RECAP_WIDTH;
  }

  /** The exact recap text last written for an ask (see the top of this file), if any. */
  shownRecap(id: string): string | undefined {
    return this.#shown.get(id)?.text;
  }

  /** Resolves once every step running now has ended and its result is recorded. */
  async stepsDone(): Promise<void> {
    while (this.#running.size > 0) await Promise.all(this.#running);
  }

  get stepsRunning(): number {
    return this.#running.size;
  }

  #print(lines: readonly string[]): void {
    if (lines.length > 0) this.#o.out(`${lines.join("\n")}\n`);
  }

  /**
   * Writes the recap of an ask after a blank line, in one write, and keeps the recap's text: its
   * rows, each ended by LF, from `[ask ID]` to `approve ID   or   deny ID`.
   */
  #writeRecap(stored: StoredAsk): void {
    const text = `${renderRecap(stored, this.#o.clock(), RECAP_WIDTH).join("\n")}\n`;
    this.#o.out(`\n${text}`);
    this.#shown.set(stored.ask.approval_id, { text, expiresAt: stored.expires_at.getTime() });
  }

  #forget(id: string): void {
    this.#shown.delete(id);
    const now = this.#o.clock().getTime();
    for (const [other, shown] of this.#shown) if (shown.expiresAt <= now) this.#shown.delete(other);
  }

  /** The narrow notice: every pending ask's id, counted, and the request to widen. */
  #holdBack(): string[] {
    this.#heldBack = true;
    return renderNarrowNotice(
      this.#o.ledger.listPending().map((s) => s.ask.approval_id),
      this.#o.columns() ?? 0,
    );
  }

  /** A new ask was stored: show it at once. */
  announce(stored: StoredAsk): void {
    if (this.narrow) this.#print(this.#holdBack());
    else this.#writeRecap(stored);
    if (this.#o.isTTY) this.#o.out(BELL);
  }

  /** Asks still pending at start-up (from before a restart): their recaps, or one notice of their ids. */
  announcePending(): void {
    const pending = this.#o.ledger.listPending();
    if (pending.length === 0) return;
    if (this.narrow) this.#print(this.#holdBack());
    else for (const stored of pending) this.#writeRecap(stored);
    if (this.#o.isTTY) this.#o.out(BELL);
  }

  /** Steps the approver was stopped in the middle of (found at start-up): each failed, and the person checks by hand. */
  announceInterrupted(failed: readonly StoredAsk[]): void {
    for (const stored of failed) this.#print(["", ...renderStepFailure(stored, { ref: "interrupted" })]);
    if (failed.length > 0 && this.#o.isTTY) this.#o.out(BELL);
  }

  /** The terminal changed size: narrowed, the ids; wide enough again, what was held back. */
  resized(): void {
    if (this.narrow) {
      // Narrowed: recaps already on screen are now re-wrapped by the terminal; say so once.
      if (this.#heldBack) return;
      if (this.#o.ledger.listPending().length > 0) this.#print(this.#holdBack());
      return;
    }
    if (!this.#heldBack) return;
    this.#heldBack = false;
    for (const stored of this.#o.ledger.listPending()) this.#writeRecap(stored);
  }

  /** One line typed by the person: the answer goes to the console. */
  command(line: string): void {
    this.#print(this.#answer(line));
  }

  #answer(line: string): string[] {
    const [word = "", arg, ...rest] = line.trim().split(/\s+/);
    const verb = word.toLowerCase();
    if (verb === "") return [];
    if (verb === "list" && arg === undefined) return this.#list();
    if ((verb === "show" || verb === "approve" || verb === "deny") && arg !== undefined && rest.length === 0) {
      const id = normalizeApprovalIdInput(arg);
      if (id === undefined) return note({ kind: "not-an-id" });
      if (verb === "show") return this.#show(id);
      return this.#decide(id, verb === "approve" ? "approved" : "denied");
    }
    return CONSOLE_HELP;
  }

  #list(): string[] {
    const pending = this.#o.ledger.listPending();
    if (pending.length === 0) return note({ kind: "none-pending" });
    if (this.narrow) return this.#holdBack();
    const now = this.#o.clock();
    return pending.map((s) => renderListLine(s, now));
  }

  #show(id: string): string[] {
    const stored = this.#o.ledger.get(id);
    if (!stored) return note({ kind: "unknown-id", id });
    if (this.narrow) return [...note({ kind: "narrow-not-shown", id }), ...this.#holdBack()];
    this.#writeRecap(stored);
    return [];
  }

  #decide(id: string, decision: "approved" | "denied"): string[] {
    const stored = this.#o.ledger.get(id);
    if (!stored) return note({ kind: "unknown-id", id });
    if (stored.step_started_at !== undefined && stored.state === "pending") return note({ kind: "step-running", id });
    if (stored.state !== "pending") {
      if (stored.state === "expired" && stored.decided_at === undefined) return note({ kind: "expired", id });
      return note({ kind: "already-decided", id, state: stored.state });
    }
    // The person decides on the recap: on a terminal too narrow to show it, nothing is decided,
    // and the answer says so before the notice that asks to widen it.
    if (this.narrow) return [...note({ kind: "narrow-not-decided", id }), ...this.#holdBack()];
    const shown = this.#shown.get(id)?.text;
    if (shown === undefined) {
      // Nothing was decided on a recap this console never wrote: it writes it now, and waits.
      this.#writeRecap(stored);
      return note({ kind: "decide-on-recap", id });
    }
    const recapSha256 = sha256Hex(shown);
    if (decision === "approved" && stored.ask.kind !== "spend" && this.#o.step) return this.#startStep(id, recapSha256, this.#o.step);
    const ref = decision === "approved" && stored.ask.kind !== "spend" ? this.#o.mintRef() : undefined;
    return this.#answerDecided(id, this.#o.ledger.decide(id, decision, { ...(ref === undefined ? {} : { ref }), recapSha256 }));
  }

  #answerDecided(id: string, result: DecideResult): string[] {
    if (result.ok) {
      this.#forget(id);
      return renderDecision(result.stored);
    }
    if (result.reason === "unknown") return note({ kind: "unknown-id", id });
    if (result.reason === "expired") return note({ kind: "expired", id });
    if (result.reason === "running") return note({ kind: "step-running", id });
    const state = this.#o.ledger.get(id)?.state;
    if (state === "approved" || state === "denied" || state === "expired" || state === "failed") return note({ kind: "already-decided", id, state });
    return note({ kind: "unknown-id", id });
  }

  /**
   * The step runs once: its start is on disk before it runs, and its end (approved with its ref,
   * or failed and why) is recorded and shown when it comes. The console takes other commands
   * meanwhile.
   */
  #startStep(id: string, recapSha256: string, step: StepRunner): string[] {
    const started = this.#o.ledger.startStep(id, recapSha256);
    if (!started.ok) {
      if (started.reason === "no-step") throw new TypeError("a spend ask has no step");
      return this.#answerDecided(id, { ok: false, reason: started.reason });
    }
    this.#forget(id);
    const running = this.#runStep(started.stored, step).finally(() => this.#running.delete(running));
    this.#running.add(running);
    return renderStepStarted(started.stored, step.deadline);
  }

  async #runStep(stored: StoredAsk, step: StepRunner): Promise<void> {
    const id = stored.ask.approval_id;
    let outcome: StepOutcome;
    try {
      outcome = await step.run(stored);
    } catch (err) {
      this.#o.onFault?.(err instanceof Error ? err.name : "non-error thrown");
      outcome = { ok: false, failure: { ref: "spawn_failed", code: "FAULT" } };
    }
    const failure: StepFailure | undefined = outcome.ok ? undefined : outcome.failure;
    const result = this.#o.ledger.finishStep(
      id,
      failure === undefined ? { decision: "approved", ref: (outcome as { ref: string }).ref } : { decision: "failed", ref: failure.ref },
    );
    if (!result.ok) {
      this.#o.onFault?.(`the end of the step of ${id} was not recorded (${result.reason})`);
      return;
    }
    this.#print(["", ...(failure === undefined ? renderDecision(result.stored) : renderStepFailure(result.stored, failure))]);
    if (this.#o.isTTY) this.#o.out(BELL);
  }
}
