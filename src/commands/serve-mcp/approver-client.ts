// serve-mcp's side of the mTLS link: sends validated asks to the approver and reads its answers
// strictly. Whatever the approver (or anything posing as it) sends, the agent gets either the
// fields the answer schemas allow, each checked, or one error code: never a message, a URL or a
// body.
import type { Ask } from "../../core/asks.ts";
import { readAtMost } from "../../core/http/body.ts";
import type { ErrorCode } from "../../core/errors.ts";
import { approverAnswers, type CreatedAnswer, PASSED_ON_CODES, parseErrorAnswer, type StatusAnswer } from "../../core/schema/approver-answer.ts";
import { isArkErrors } from "../../core/schema/ark.ts";

export type ApproverLink = {
  /** The approver's base URL, `https:` only. */
  baseUrl: URL;
  tls: { cert: string; key: string; ca: string };
  timeoutMs: number;
};

export type Outcome<T> = { ok: true; value: T } | { ok: false; code: ErrorCode };

/** Answers are a few hundred bytes; anything longer is not an answer of ours. */
const MAX_ANSWER_BYTES = 8 * 1024;

class Refused extends Error {
  constructor(readonly code: ErrorCode) {
    super(code);
  }
}

const TLS_CODE = /^(EPROTO|ECONNRESET)$|CERT|SSL|TLS|UNABLE_TO|SELF_SIGNED|HOSTNAME|ALTNAME/;

/** Transport failures, each to its own code; the error's own text is never passed on. */
function transportCode(err: unknown): ErrorCode {
  if (err instanceof Refused) return err.code;
  const e = err as { name?: string; code?: string };
  if (e?.name === "TimeoutError" || e?.name === "AbortError") return "APPROVER_TIMEOUT";
  // Bun reports a refused client certificate as EPROTO or a reset during the handshake, and
  // an untrusted server certificate by its OpenSSL reason.
  if (typeof e?.code === "string" && TLS_CODE.test(e.code)) return "APPROVER_TLS_REFUSED";
  return "APPROVER_UNREACHABLE";
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

async function readCapped(res: Response): Promise<unknown> {
  const bytes = await readAtMost(res.body, MAX_ANSWER_BYTES);
  if (bytes === undefined) throw new Refused("APPROVER_BAD_ANSWER");
  try {
    return JSON.parse(utf8.decode(bytes));
  } catch {
    throw new Refused("APPROVER_BAD_ANSWER");
  }
}

const isJson = (res: Response) => /^application\/json\s*(;|$)/i.test(res.headers.get("content-type") ?? "");

/** Which of the approver's codes each exchange may pass on; any other is a bad answer. */
const CREATE_CODES: ReadonlySet<ErrorCode> = new Set(PASSED_ON_CODES.filter((c) => c !== "ASK_NOT_FOUND"));
const STATUS_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>(["ASK_NOT_FOUND", "APPROVAL_ID_INVALID"]);

export class ApproverClient {
  readonly #link: ApproverLink;

  constructor(link: ApproverLink) {
    this.#link = link;
  }

  /** `POST /v1/asks/pay` or `/v1/asks/account` with the validated ask. */
  create(ask: Ask): Promise<Outcome<CreatedAnswer>> {
    const { kind, ...body } = ask;
    return this.#exchange("POST", `v1/asks/${kind}`, body, 201, CREATE_CODES, (value) => {
      const parsed = approverAnswers().CreatedAnswer(value);
      // The answer must be about the ask we sent, not another one.
      return isArkErrors(parsed) || parsed.approval_id !== ask.approval_id ? undefined : parsed;
    });
  }

  /** `GET /v1/asks/{id}`. */
  status(id: string): Promise<Outcome<StatusAnswer>> {
    return this.#exchange("GET", `v1/asks/${id}`, undefined, 200, STATUS_CODES, (value) => {
      const parsed = approverAnswers().StatusAnswer(value);
      return isArkErrors(parsed) || parsed.approval_id !== id ? undefined : parsed;
    });
  }

  async #exchange<T>(
    method: "GET" | "POST",
    path: string,
    body: object | undefined,
    okStatus: number,
    passedOn: ReadonlySet<ErrorCode>,
    parse: (value: unknown) => T | undefined,
  ): Promise<Outcome<T>> {
    // One deadline for connecting, sending and reading the whole answer.
    const signal = AbortSignal.timeout(this.#link.timeoutMs);
    try {
      const res = await fetch(new URL(path, this.#link.baseUrl), {
        method,
        headers: body === undefined ? { accept: "application/json" } : { accept: "application/json", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
        tls: this.#link.tls,
        signal,
        // A redirect could carry the ask somewhere else: any 3xx is a bad answer.
        redirect: "manual",
        keepalive: true,
      });
      if (!isJson(res)) {
        await res.body?.cancel().catch(() => {});
        return { ok: false, code: "APPROVER_BAD_ANSWER" };
      }
      const value = await readCapped(res);
      if (res.status === okStatus) {
        const parsed = parse(value);
        return parsed === undefined ? { ok: false, code: "APPROVER_BAD_ANSWER" } : { ok: true, value: parsed };
      }
      const code = parseErrorAnswer(res.status, value);
      return { ok: false, code: code !== undefined && passedOn.has(code) ? code : "APPROVER_BAD_ANSWER" };
    } catch (err) {
      if (signal.aborted) return { ok: false, code: "APPROVER_TIMEOUT" };
      return { ok: false, code: transportCode(err) };
    }
  }
}
