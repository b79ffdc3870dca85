// An approver for the desk's tests, in process, behind the desk's Approver port: it checks each
// spend ask with the approver's own rules, keeps it, and signs the decisions a test makes with a
// decision key of its own, as the real approver signs them (chain, ask_sha256, the spend
// binding). It can be taken down, and made to answer wrongly, to test what the desk does then.
import { askObject } from "../../src/core/asks.ts";
import { decisionSigner } from "../../src/core/decision/sign.ts";
import type { DecisionEnvelope, DecisionFields } from "../../src/core/decision/record.ts";
import type { AskAnswer, ApproverConnection, DecisionAnswer, SpendAskBody } from "../../src/core/desk/ports.ts";
import { hashJson, type Jwks, jwksOf, ReceiptKeys, sha256Hex } from "../../src/core/receipt/index.ts";
import { validateSpendAsk } from "../../src/core/schema/spend-ask.ts";
import { testSigningKey } from "./decision-signer.ts";

export type Decision = "approved" | "denied" | "expired";

export class FakeApprover {
  readonly asks = new Map<string, { ask: SpendAskBody; expiresAt: number; envelope?: DecisionEnvelope }>();
  /** Unreachable: every exchange fails as a refused connection would. */
  down = false;
  /** Decision fetches answered so far. */
  decisionReads = 0;
  readonly key = testSigningKey();
  readonly jwks: Jwks;
  #signer = decisionSigner(this.key);
  #seq = 0;
  #prev: string | null = null;

  constructor(
    private readonly now: () => number,
    private readonly ttlMs = 10 * 60_000,
  ) {
    this.jwks = jwksOf(this.key.publicJwk());
  }

  /** The port as the desk takes it; `keys` are the ones given, or this approver's own. */
  connection(keys: ReceiptKeys = ReceiptKeys.fromJwks(this.jwks)): ApproverConnection {
    return {
      approver: {
        ask: async (ask: SpendAskBody): Promise<AskAnswer> => {
          if (this.down) return { kind: "unavailable", why: "the connection failed (ECONNREFUSED)" };
          const checked = validateSpendAsk(ask);
          if (!checked.ok) return { kind: "refused", code: checked.code };
          const expiresAt = this.now() + this.ttlMs;
          this.asks.set(ask.approval_id, { ask, expiresAt });
          return { kind: "pending", expiresAt };
        },
        decision: async (approvalId: string): Promise<DecisionAnswer> => {
          if (this.down) return { kind: "unavailable", why: "the connection failed (ECONNREFUSED)" };
          this.decisionReads++;
          const held = this.asks.get(approvalId);
          if (held === undefined) return { kind: "bad_answer", why: "it answered ASK_NOT_FOUND" };
          return held.envelope === undefined ? { kind: "pending" } : { kind: "decided", envelope: held.envelope };
        },
      },
      keys: { current: () => keys, reload: () => null },
    };
  }

  /** The one ask the desk sent last. */
  last(): SpendAskBody {
    return [...this.asks.values()].at(-1)!.ask;
  }

  /** Decides `approvalId` at the approver's `now`, signed and chained; `change` alters the signed fields (a lying approver). */
  decide(approvalId: string, decision: Decision, change: (f: DecisionFields) => void = () => {}): DecisionEnvelope {
    const held = this.asks.get(approvalId)!;
    const { ask } = held;
    const at = new Date(decision === "expired" ? held.expiresAt : this.now()).toISOString();
    const fields: DecisionFields = {
      seq: this.#seq + 1,
      prev_sha256: this.#prev,
      approval_id: approvalId,
      verb: "spend",
      ask_sha256: hashJson(askObject({ kind: "spend", ...ask })),
      recap_sha256: decision === "expired" ? null : sha256Hex(`[ask ${approvalId}] SPEND\n`),
      decision,
      ref: null,
      decided_at: at,
      recorded_at: at,
      spend: {
        reservation_id: ask.reservation_id,
        tool: ask.tool,
        price_mc: ask.price_mc,
        key_id: ask.key_id,
        org_id: ask.org_id,
        params_sha256: ask.params_sha256,
      },
    };
    change(fields);
    const signed = this.#signer.sign(fields);
    this.#seq++;
    this.#prev = signed.sha256;
    held.envelope = signed.envelope;
    return signed.envelope;
  }
}
