// The approver's HTTP API (one route table), behind mutual TLS, on two listeners: the agents' (client CA) creates
// pay and account asks, the desk's (desk CA) creates spend asks; on each, an ask of that side's
// can be read, with its signed decision record once it has one. There is no route that
// approves, denies, cancels or executes anything: a decision is typed on the console, never
// sent over the wire.
import { type AskKind, type AskSide, type StoredAsk, sideOf } from "../../core/asks.ts";
import { type ErrorCode, errorResponse, WireError } from "../../core/errors.ts";
import { readJsonObject } from "../../core/http/body.ts";
import { pathOf, routeTable } from "../../core/http/routes.ts";
import { isApprovalId } from "../../core/ids.ts";
import type { AskLedger } from "../../adapters/sqlite/asks.ts";
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

/**
 * The server's TLS settings. Mutual TLS, with no switch to turn it off: a client without a
 * certificate from the client CA is refused in the handshake and never reaches a handler.
 */
export function approverTls(files: { cert: string; key: string; ca: string }) {
  return { cert: files.cert, key: files.key, ca: files.ca, requestCert: true, rejectUnauthorized: true } as const;
}

/** The asks each listener creates: an agent's certificate never reaches the spend route, nor the desk's the others. */
const CREATES: Record<AskSide, readonly AskKind[]> = { agent: ["pay", "account"], desk: ["spend"] };
const ASK_KINDS: readonly AskKind[] = ["pay", "account", "spend"];

export function makeApproverApi(options: ApiOptions): (req: Request) => Promise<Response> {
  const create = async (req: Request, kind: AskKind): Promise<Response> => {
    const body = await readJsonObject(req, MAX_BODY_BYTES);
    // Any holder of a client certificate can call this: every field is checked here again,
    // card-number net included, whatever serve-mcp (or the desk) already checked.
    const checked =
      kind === "pay" ? validatePayAsk(body, { maxAmount: options.maxAmount }) : kind === "account" ? validateAccountAsk(body) : validateSpendAsk(body);
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

  const notFound = () => fail("NOT_FOUND");
  const dispatch = routeTable<undefined>([
    ...CREATES[options.side].map((kind) => ({ method: "POST", path: `/v1/asks/${kind}`, handle: (req: Request) => create(req, kind) })),
    // The create paths are never read as an approval id.
    ...ASK_KINDS.map((kind) => ({ method: "GET", path: `/v1/asks/${kind}`, handle: notFound })),
    // Exactly as sent: a percent-escape is no part of an approval id.
    { method: "GET", path: "/v1/asks/:id/decision", raw: true, handle: (_req, params) => decision(params.id!) },
    { method: "GET", path: "/v1/asks/:id", raw: true, handle: (_req, params) => status(params.id!) },
  ]);

  return async (req) => {
    try {
      return (await dispatch(req, pathOf(req.url), undefined)) ?? notFound();
    } catch (err) {
      if (err instanceof WireError) return fail(err.code);
      options.onFault(err instanceof Error ? err.name : "non-error thrown");
      return fail("INTERNAL");
    }
  };
}
