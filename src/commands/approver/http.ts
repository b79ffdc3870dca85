// The approver's HTTP API, behind mutual TLS, on two listeners: the agents' (client CA) creates
// pay and account asks, the desk's (desk CA) creates spend asks; on each, an ask of that side's
// can be read, with its signed decision record once it has one. There is no route that
// approves, denies, cancels or executes anything: a decision is typed on the console, never
// sent over the wire.
import { type AskKind, type AskSide, type StoredAsk, sideOf } from "../../core/asks.ts";
import { readAtMost } from "../../core/body.ts";
import { type ErrorCode, errorResponse } from "../../core/errors.ts";
import { isApprovalId } from "../../core/ids.ts";
import type { AskLedger } from "../../core/ledger/asks.ts";
import { validateAccountAsk, validatePayAsk } from "../../core/schema/ask.ts";
import { validateSpendAsk } from "../../core/schema/spend-ask.ts";

/** Request bodies above this are refused, whatever Content-Length says. */
export const MAX_BODY_BYTES = 16 * 1024;

export type ApiOptions = {
  /** Which listener this is: it decides which asks can be made and read here. */
  side: AskSide;
  /** Create and read only: the API is given no way to decide an ask (the console decides). */
  ledger: Pick<AskLedger, "create" | "get" | "decisionRecord">;
  /** Brings the expiry records up to date before a decision record is read. */
  sealExpired: () => void;
  ttlMs: number;
  maxPending: number;
  /** The largest amount of one pay ask (major units); checked here whatever the client did. */
  maxAmount: string;
  /** Called once per stored ask, after it is stored (the console prints its recap). */
  onCreated: (stored: StoredAsk) => void;
  /** A server fault, by name only: messages may quote stored text, which never reaches a log. */
  onFault: (what: string) => void;
};

const NO_STORE = { "Cache-Control": "no-store" };
const fail = (code: ErrorCode) => errorResponse(code, NO_STORE);

class BodyRefused extends Error {
  constructor(readonly code: ErrorCode) {
    super(code);
  }
}

/** `application/json`, optionally with `charset=utf-8`; anything else is refused. */
function isJsonContentType(value: string | null): boolean {
  if (value === null) return false;
  const [media, ...params] = value.split(";").map((p) => p.trim().toLowerCase());
  if (media !== "application/json") return false;
  return params.every((p) => p === "" || p === "charset=utf-8" || p === 'charset="utf-8"');
}

/**
 * Reads at most MAX_BODY_BYTES and stops there: a client that lies about Content-Length, or
 * sends none (chunked), cannot make the approver buffer more.
 */
async function readCappedBody(req: Request): Promise<Uint8Array> {
  const declared = req.headers.get("content-length");
  if (declared !== null && !(/^\d+$/.test(declared) && Number(declared) <= MAX_BODY_BYTES)) {
    throw new BodyRefused(/^\d+$/.test(declared) ? "BODY_TOO_LARGE" : "BODY_INVALID");
  }
  let bytes: Uint8Array | undefined;
  try {
    bytes = await readAtMost(req.body, MAX_BODY_BYTES);
  } catch {
    // The client went away mid-body (or sent broken chunking): its fault, not a server fault.
    throw new BodyRefused("BODY_INVALID");
  }
  if (bytes === undefined) throw new BodyRefused("BODY_TOO_LARGE");
  return bytes;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });

async function readJsonObject(req: Request): Promise<Record<string, unknown>> {
  if (!isJsonContentType(req.headers.get("content-type"))) throw new BodyRefused("CONTENT_TYPE_INVALID");
  const bytes = await readCappedBody(req);
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    throw new BodyRefused("BODY_INVALID");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new BodyRefused("BODY_INVALID");
  return value as Record<string, unknown>;
}

/**
 * The server's TLS settings. Mutual TLS, with no switch to turn it off: a client without a
 * certificate from the client CA is refused in the handshake and never reaches a handler.
 */
export function approverTls(files: { cert: string; key: string; ca: string }) {
  return { cert: files.cert, key: files.key, ca: files.ca, requestCert: true, rejectUnauthorized: true } as const;
}

const ASK_PATH = /^\/v1\/asks\/([^/]+)$/;
const DECISION_PATH = /^\/v1\/asks\/([^/]+)\/decision$/;
/** The asks each listener creates: an agent's certificate never reaches the spend route, nor the desk's the others. */
const CREATES: Record<AskSide, readonly AskKind[]> = { agent: ["pay", "account"], desk: ["spend"] };

/**
 * The request's path, query and fragment dropped. Read without the Host header, which any client
 * may fill with something that is no host (`a b`, `[::1`, `x:99999`): parsing the whole URL
 * would throw, and a client's bad header would become a server fault.
 */
export function pathOf(url: string): string {
  const rest = url.replace(/^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#]*/, "");
  try {
    return new URL(`https://approver.invalid${rest.startsWith("/") ? rest : `/${rest}`}`).pathname;
  } catch {
    return "";
  }
}

export function makeApproverApi(options: ApiOptions): (req: Request) => Promise<Response> {
  const create = async (req: Request, kind: AskKind): Promise<Response> => {
    const body = await readJsonObject(req);
    // Any holder of a client certificate can call this: every field is checked here again,
    // card-number net included, whatever serve-mcp (or the desk) already checked.
    const checked = kind === "pay" ? validatePayAsk(body, { maxAmount: options.maxAmount }) : kind === "account" ? validateAccountAsk(body) : validateSpendAsk(body);
    if (!checked.ok) return fail(checked.code);
    const made = options.ledger.create(checked.ask, { ttlMs: options.ttlMs, maxPending: options.maxPending });
    if (!made.ok) return fail(made.code);
    options.onCreated(made.stored);
    return Response.json(
      { approval_id: made.stored.ask.approval_id, state: "pending", expires_at: made.stored.expires_at.toISOString() },
      { status: 201, headers: NO_STORE },
    );
  };

  /** An ask of this listener's side, or the failure that answers for it (the other side's asks are not found here). */
  const ownAsk = (id: string): StoredAsk | Response => {
    if (!isApprovalId(id)) return fail("APPROVAL_ID_INVALID");
    const stored = options.ledger.get(id);
    if (!stored || sideOf(stored.ask.kind) !== options.side) return fail("ASK_NOT_FOUND");
    return stored;
  };

  const status = (id: string): Response => {
    const stored = ownAsk(id);
    if (stored instanceof Response) return stored;
    const answer: { approval_id: string; state: string; ref?: string } = { approval_id: id, state: stored.state };
    if ((stored.state === "approved" || stored.state === "failed") && stored.ref !== undefined) answer.ref = stored.ref;
    return Response.json(answer, { status: 200, headers: NO_STORE });
  };

  const decision = (id: string): Response => {
    const stored = ownAsk(id);
    if (stored instanceof Response) return stored;
    options.sealExpired();
    const record = options.ledger.decisionRecord(id);
    return record ? Response.json(record, { status: 200, headers: NO_STORE }) : fail("DECISION_PENDING");
  };

  const creates = CREATES[options.side];
  return async (req) => {
    try {
      const path = pathOf(req.url);
      if (req.method === "POST") {
        const kind = creates.find((k) => path === `/v1/asks/${k}`);
        return kind ? await create(req, kind) : fail("NOT_FOUND");
      }
      if (req.method !== "GET") return fail("NOT_FOUND");
      const d = DECISION_PATH.exec(path);
      if (d) return decision(d[1]!);
      const m = ASK_PATH.exec(path);
      if (m && !["pay", "account", "spend"].includes(m[1]!)) return status(m[1]!);
      return fail("NOT_FOUND");
    } catch (err) {
      if (err instanceof BodyRefused) return fail(err.code);
      options.onFault(err instanceof Error ? err.name : "non-error thrown");
      return fail("INTERNAL");
    }
  };
}
