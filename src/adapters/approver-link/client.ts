// The desk's side of its link to the approver (core/desk/ports.ts, Approver): spend asks and
// their decisions over HTTPS with the desk's own client certificate, nothing else. Every
// answer is read strictly: whatever the approver (or something posing as it) sends, the desk
// gets one of the port's few answers, and a decision only as the envelope the desk will verify
// before acting on it. The desk imports nothing of the approver: this speaks its wire format.
import type { AskAnswer, Approver, DecisionAnswer, SpendAskBody } from "../../core/desk/ports.ts";
import { ERRORS, type ErrorCode } from "../../core/errors.ts";
import { readAtMost } from "../../core/http/body.ts";
import { RFC3339_UTC } from "../../core/schema/approver-answer.ts";
import { isArkErrors, schemas } from "../../core/schema/ark.ts";

export type ApproverLinkOptions = {
  /** The approver's desk listener, `https:` only, ending in `/`. */
  baseUrl: URL;
  tls: { cert: string; key: string; ca: string };
  /** One deadline for connecting, sending and reading one answer. */
  timeoutMs: number;
};

/** A decision record is well under 4 KiB; anything longer is not an answer of the approver's. */
const MAX_ANSWER_BYTES = 16 * 1024;

const answers = schemas(({ type }) => ({
  Created: type({ "+": "reject", approval_id: "string", state: "'pending'", expires_at: "string" }),
  ErrorAnswer: type({ "+": "reject", error: "string" }),
}));

/**
 * The approver's refusals of a spend ask's fields: the desk checks the same rules before it
 * sends, so one of these means a stricter approver. Anything else the approver refuses with is
 * its own trouble (full, failing), and the call is answered as if it were unreachable.
 */
const FIELD_CODES: ReadonlySet<string> = new Set<ErrorCode>([
  "BODY_INVALID",
  "FIELD_UNKNOWN",
  "FIELD_MISSING",
  "APPROVAL_ID_INVALID",
  "RESERVATION_ID_INVALID",
  "TOOL_INVALID",
  "PRICE_INVALID",
  "KEY_ID_INVALID",
  "KEY_NAME_INVALID",
  "ORG_ID_INVALID",
  "ORG_NAME_INVALID",
  "PARAMS_SHA256_INVALID",
  "PREVIEW_INVALID",
  "CARD_NUMBER_REFUSED",
]);

const utf8 = new TextDecoder("utf-8", { fatal: true });

type Read = { status: number; body: unknown } | { failed: string };

export class ApproverLink implements Approver {
  readonly #o: ApproverLinkOptions;

  constructor(options: ApproverLinkOptions) {
    this.#o = options;
  }

  async ask(ask: SpendAskBody): Promise<AskAnswer> {
    const read = await this.#exchange("POST", "v1/asks/spend", ask);
    if ("failed" in read) return { kind: "unavailable", why: read.failed };
    if (read.status === 201) {
      const created = answers().Created(read.body);
      if (isArkErrors(created) || created.approval_id !== ask.approval_id || !RFC3339_UTC.test(created.expires_at)) {
        return { kind: "unavailable", why: "its answer to the ask is not one of its answers" };
      }
      return { kind: "pending", expiresAt: Date.parse(created.expires_at) };
    }
    const code = errorCode(read);
    if (code !== null && FIELD_CODES.has(code)) return { kind: "refused", code: code as ErrorCode };
    return { kind: "unavailable", why: code === null ? `it answered HTTP ${read.status}` : `it answered ${code}` };
  }

  async decision(approvalId: string): Promise<DecisionAnswer> {
    const read = await this.#exchange("GET", `v1/asks/${approvalId}/decision`, undefined);
    if ("failed" in read) return { kind: "unavailable", why: read.failed };
    if (read.status === 200) return { kind: "decided", envelope: read.body };
    const code = errorCode(read);
    if (code === "DECISION_PENDING") return { kind: "pending" };
    return { kind: "bad_answer", why: code === null ? `it answered HTTP ${read.status}` : `it answered ${code}` };
  }

  async #exchange(method: "GET" | "POST", path: string, body: object | undefined): Promise<Read> {
    const signal = AbortSignal.timeout(this.#o.timeoutMs);
    try {
      const res = await fetch(new URL(path, this.#o.baseUrl), {
        method,
        headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        tls: this.#o.tls,
        signal,
        // A redirect could carry the ask somewhere else.
        redirect: "manual",
        keepalive: true,
      });
      if (!/^application\/json\s*(;|$)/i.test(res.headers.get("content-type") ?? "")) {
        await res.body?.cancel().catch(() => {});
        return { failed: `its answer (HTTP ${res.status}) is not JSON` };
      }
      const bytes = await readAtMost(res.body, MAX_ANSWER_BYTES);
      if (bytes === undefined) return { failed: "its answer is too long" };
      try {
        return { status: res.status, body: JSON.parse(utf8.decode(bytes)) };
      } catch {
        return { failed: "its answer is not UTF-8 JSON" };
      }
    } catch (err) {
      if (signal.aborted) return { failed: `no answer within ${this.#o.timeoutMs} ms` };
      // The error's name and code only: its text may quote whatever the peer sent.
      const e = err as { name?: string; code?: string };
      return { failed: `the connection failed (${typeof e?.code === "string" ? e.code : (e?.name ?? "error")})` };
    }
  }
}

/** The code of an error answer `{"error": CODE}` sent with the code's own status, else null. */
function errorCode(read: { status: number; body: unknown }): string | null {
  const parsed = answers().ErrorAnswer(read.body);
  if (isArkErrors(parsed) || !Object.hasOwn(ERRORS, parsed.error)) return null;
  return ERRORS[parsed.error as ErrorCode].http === read.status ? parsed.error : null;
}
