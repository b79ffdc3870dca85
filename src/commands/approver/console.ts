// The approval channel: the person types `approve ID` or `deny ID` on the approver's own
// terminal. Every line about an ask comes from core/recap, rendered from the stored ask; agent
// text never reaches the terminal any other way.
import type { StoredAsk } from "../../core/asks.ts";
import { normalizeApprovalIdInput } from "../../core/ids.ts";
import type { AskLedger } from "../../adapters/sqlite/asks.ts";
import {
  type ConsoleNote,
  RECAP_WIDTH,
  renderConsoleNote,
  renderDecision,
  renderListLine,
  renderNarrowNotice,
  renderRecap,
} from "../../core/recap/render.ts";

export type ConsoleOptions = {
  ledger: AskLedger;
  clock: () => Date;
  /** Writes console text (stdout). */
  out: (text: string) => void;
  /** stdout is a terminal: bell on a new ask, and the narrow-terminal rule applies. */
  isTTY: boolean;
  /** The terminal's width now (undefined when unknown). */
  columns: () => number | undefined;
  /** The reference approver's ref for an approval. */
  mintRef: () => string;
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

export class ApproverConsole {
  readonly #o: ConsoleOptions;
  /** Whether the last output was made for a narrow terminal (recaps were held back). */
  #heldBack = false;

  constructor(options: ConsoleOptions) {
    this.#o = options;
  }

  /** A terminal narrower than a recap line: a wrapped line could start with agent text. */
  get narrow(): boolean {
    if (!this.#o.isTTY) return false;
    const columns = this.#o.columns();
    return columns !== undefined && columns < RECAP_WIDTH;
  }

  #print(lines: readonly string[]): void {
    if (lines.length > 0) this.#o.out(`${lines.join("\n")}\n`);
  }

  #recapLines(stored: StoredAsk): string[] {
    return ["", ...renderRecap(stored, this.#o.clock(), RECAP_WIDTH)];
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
    this.#print(this.narrow ? this.#holdBack() : this.#recapLines(stored));
    if (this.#o.isTTY) this.#o.out(BELL);
  }

  /** Asks still pending at start-up (from before a restart): their recaps, or one notice of their ids. */
  announcePending(): void {
    const pending = this.#o.ledger.listPending();
    if (pending.length === 0) return;
    if (this.narrow) this.#print(this.#holdBack());
    else for (const stored of pending) this.#print(this.#recapLines(stored));
    if (this.#o.isTTY) this.#o.out(BELL);
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
    for (const stored of this.#o.ledger.listPending()) this.#print(this.#recapLines(stored));
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
    return this.#recapLines(stored);
  }

  #decide(id: string, decision: "approved" | "denied"): string[] {
    // The person decides on the recap: on a terminal too narrow to show it, nothing is decided,
    // and the answer says so before the notice that asks to widen it.
    if (this.narrow && this.#o.ledger.get(id)?.state === "pending") return [...note({ kind: "narrow-not-decided", id }), ...this.#holdBack()];
    const result = this.#o.ledger.decide(id, decision, decision === "approved" ? this.#o.mintRef() : undefined);
    if (result.ok) return renderDecision(result.stored);
    if (result.reason === "unknown") return note({ kind: "unknown-id", id });
    if (result.reason === "expired") return note({ kind: "expired", id });
    const state = this.#o.ledger.get(id)?.state;
    if (state === "approved" || state === "denied" || state === "expired") return note({ kind: "already-decided", id, state });
    return note({ kind: "unknown-id", id });
  }
}
