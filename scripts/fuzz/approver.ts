// `npm run fuzz:approver`: random and malformed requests against a real `dist/ask-only approver`
// over real mutual TLS, each written byte by byte on its own TLS connection (so framing, lying
// Content-Length and dribbled bodies are under our control, not fetch's).
// Usage: bun scripts/fuzz/approver.ts [--runs N] [--seed S] [--concurrency C]
//
// Checked on every answer: never a 5xx; a failure is exactly {"error":CODE} with CODE in
// core/errors.ts and its own status; a success is exactly the 201 or 200 shape; the answer is the
// one the shared field rules give for that body. Checked at the end: the process never died,
// logged no internal fault, and its ledger holds exactly the asks that got 201 (read through the
// approver's own GET API during the run and through AskLedger once it has stopped).
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect } from "node:tls";
import fc from "fast-check";
import { ERRORS, type ErrorCode, isErrorCode } from "../../src/core/errors.ts";
import { isApprovalId } from "../../src/core/ids.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { approverAnswers } from "../../src/core/schema/approver-answer.ts";
import { isArkErrors } from "../../src/core/schema/ark.ts";
import { holdsCardNumber, validateAccountAsk, validatePayAsk } from "../../src/core/schema/ask.ts";
import { approverFiles, writeLink } from "../../test/helpers/approver-link.ts";
import { startApprover } from "../../test/helpers/approver-process.ts";
import { tempDir } from "../../test/helpers/tmp.ts";
import { APPROVER_LOG, bump, cliOptions, digitsOf, formatSummary, untilEnded } from "./common.ts";
import { anyJsonValue, approvalIdArb, disguisedCard, FIELD_VALUES, hostileText } from "./inputs.ts";

export type ApproverFuzzOptions = { runs: number; seed: number; concurrency?: number };

export type ApproverFuzzSummary = {
  runs: number;
  seed: number;
  byKind: Record<string, number>;
  byAnswer: Record<string, number>;
  accepted: number;
  elapsedMs: number;
  /** Broken promises, one line each; empty when every check held. */
  failures: string[];
};

/** The body limit of SPEC 7.1. */
const MAX_BODY = 16 * 1024;

// --- the cases -------------------------------------------------------------------------------

type Framing =
  | { how: "length" }
  | { how: "chunked"; chunk: number }
  | { how: "lie-small"; declared: number }
  | { how: "lie-big"; declared: number }
  | { how: "stall"; declared: number; abortMs: number };

type HttpCase = {
  kind: string;
  method: string;
  path: string;
  host: string;
  version: "1.1" | "1.0";
  contentType: string | undefined;
  body: Uint8Array | undefined;
  framing: Framing;
  /** Split the bytes into this many writes with `gapMs` between them (a dribble). */
  pieces: number;
  gapMs: number;
  /** Replay the id of an earlier 201 (index into the accepted ids), or read one back. */
  useAccepted?: number;
  /** Read back an id that was refused (index into the refused ids). */
  useRefused?: number;
  /** The card numbers (ASCII digits) hidden in this request. */
  cards?: string[];
};

type RawCase = { kind: string; raw: Uint8Array };
type Case = HttpCase | RawCase;

const enc = new TextEncoder();
/** Percent-encodes any text, lone surrogates included (as the bytes of U+FFFD). */
const pathSegment = (t: string) => encodeURIComponent(t.toWellFormed());
const jsonBytes = (v: unknown) => enc.encode(JSON.stringify(v));

const payBody = fc.record({
  approval_id: approvalIdArb,
  merchant: FIELD_VALUES.merchant,
  amount: FIELD_VALUES.amount,
  currency: FIELD_VALUES.currency,
  card_handle: FIELD_VALUES.card_handle,
  checkout_url: FIELD_VALUES.checkout_url,
  reason: fc.option(FIELD_VALUES.reason, { nil: undefined }),
});
const accountBody = fc.record({
  approval_id: approvalIdArb,
  provider_url: FIELD_VALUES.provider_url,
  identity_handle: fc.option(FIELD_VALUES.identity_handle, { nil: undefined }),
  reason: fc.option(FIELD_VALUES.reason, { nil: undefined }),
});
const anyAsk = fc.oneof(
  payBody.map((b) => ({ path: "/v1/asks/pay", body: b as Record<string, unknown> })),
  accountBody.map((b) => ({ path: "/v1/asks/account", body: b as Record<string, unknown> })),
);
const PAY_KEYS = ["approval_id", "merchant", "amount", "currency", "card_handle", "checkout_url", "reason", "provider_url", "identity_handle"];

const base = (kind: string, over: Partial<HttpCase>): HttpCase => ({
  kind,
  method: "POST",
  path: "/v1/asks/pay",
  host: "localhost",
  version: "1.1",
  contentType: "application/json",
  body: undefined,
  framing: { how: "length" },
  pieces: 1,
  gapMs: 0,
  ...over,
});

const askCase = (kind: string, body: fc.Arbitrary<{ path: string; bytes: Uint8Array }>) => body.map(({ path, bytes }) => base(kind, { path, body: bytes }));

const validAsk = askCase(
  "valid-ask",
  anyAsk.map(({ path, body }) => ({ path, bytes: jsonBytes(body) })),
);

const wrongType = askCase(
  "wrong-type",
  fc.tuple(anyAsk, fc.constantFrom(...PAY_KEYS), anyJsonValue).map(([{ path, body }, key, value]) => ({ path, bytes: jsonBytes({ ...body, [key]: value }) })),
);

const unicodeField = askCase(
  "unicode-field",
  fc
    .tuple(anyAsk, fc.constantFrom(...PAY_KEYS), hostileText(60))
    .map(([{ path, body }, key, value]) => ({ path, bytes: jsonBytes({ ...body, [key]: value }) })),
);

const extraField = askCase(
  "extra-field",
  fc
    .tuple(
      anyAsk,
      fc.oneof(fc.constantFrom("recap", "state", "ref", "decision", "approved", "__proto__", "constructor", "card_number"), hostileText(12)),
      anyJsonValue,
    )
    .map(([{ path, body }, key, value]) => {
      // JSON text, so a "__proto__" key really is on the wire.
      const text = JSON.stringify(body).replace(/^\{/, `{${JSON.stringify(key)}:${JSON.stringify(value) ?? "null"},`);
      return { path, bytes: enc.encode(text) };
    }),
);

const missingField = askCase(
  "missing-field",
  fc.tuple(anyAsk, fc.constantFrom(...PAY_KEYS)).map(([{ path, body }, key]) => {
    const { [key]: _, ...rest } = body;
    return { path, bytes: jsonBytes(rest) };
  }),
);

const cardInField = fc
  .tuple(anyAsk, fc.constantFrom(...PAY_KEYS, "extra"), disguisedCard, fc.constantFrom("alone", "in-text", "as-key"))
  .map(([{ path, body }, key, card, where]) => {
    const value = where === "in-text" ? `ref ${card.shown} ok` : card.shown;
    const bytes = jsonBytes(where === "as-key" ? { ...body, [card.shown]: "x" } : { ...body, [key]: value });
    return base("card-number", { path, body: bytes, cards: [card.digits] });
  });

const badJson = askCase(
  "bad-json",
  fc
    .tuple(
      anyAsk,
      fc.oneof(fc.constant("truncate"), fc.constant("garble"), fc.constant("bytes"), fc.constant("top-level"), fc.constant("bom")),
      fc.nat(),
      fc.uint8Array({ maxLength: 64 }),
      anyJsonValue,
    )
    .map(([{ path, body }, how, n, bytes, value]) => {
      const text = JSON.stringify(body);
      if (how === "truncate") return { path, bytes: enc.encode(text.slice(0, n % Math.max(1, text.length))) };
      if (how === "garble") {
        const i = n % text.length;
        return { path, bytes: enc.encode(`${text.slice(0, i)}${"}{,:\"\\'[".charAt(n % 9)}${text.slice(i + 1)}`) };
      }
      if (how === "bytes") return { path, bytes: Uint8Array.of(...bytes, 0xc0, 0x80, 0xff) };
      if (how === "bom") return { path, bytes: Uint8Array.of(0xef, 0xbb, 0xbf, ...enc.encode(text)) };
      return { path, bytes: jsonBytes(Array.isArray(value) || value === null || typeof value !== "object" ? value : [value]) };
    }),
);

const deepNesting = askCase(
  "deep-nesting",
  fc.tuple(anyAsk, fc.integer({ min: 10, max: 8000 }), fc.constantFrom("[", '{"a":'), fc.boolean()).map(([{ path, body }, depth, open, inField]) => {
    const close = open === "[" ? "]" : "}";
    const nest = `${open.repeat(depth)}1${close.repeat(depth)}`;
    const text = inField ? JSON.stringify(body).replace(/^\{/, `{"reason":${nest},`) : nest;
    return { path, bytes: enc.encode(text) };
  }),
);

const hugeString = askCase(
  "huge-string",
  fc
    .tuple(anyAsk, fc.constantFrom(...PAY_KEYS), fc.integer({ min: 500, max: 5400 }), fc.constantFrom("a", "é", "界", "😀", "\u202e", "\u0301", "9"))
    .map(([{ path, body }, key, n, ch]) => ({
      path,
      bytes: jsonBytes({ ...body, [key]: ch.repeat(n) }),
    })),
);

const oversize = fc
  .tuple(
    anyAsk,
    fc.integer({ min: MAX_BODY + 1, max: 200_000 }),
    fc.constantFrom("length", "chunked", "lie-small", "lie-big"),
    fc.integer({ min: 1, max: MAX_BODY }),
  )
  .map(([{ path, body }, size, how, declared]) => {
    const padded = enc.encode(JSON.stringify({ ...body, reason: "x".repeat(size) }));
    const framing: Framing =
      how === "chunked"
        ? { how, chunk: 4096 }
        : how === "lie-small"
          ? { how, declared }
          : how === "lie-big"
            ? { how, declared: MAX_BODY + 1 + (declared % 1_000_000) }
            : { how: "length" };
    return base(`oversize-${how}`, { path, body: how === "lie-big" ? jsonBytes(body) : padded, framing });
  });

const dribble = fc
  .tuple(fc.oneof(validAsk, badJson, unicodeField), fc.integer({ min: 2, max: 24 }), fc.integer({ min: 1, max: 12 }), fc.boolean())
  .map(([c, pieces, gapMs, chunked]) => ({ ...c, kind: "dribble", pieces, gapMs, framing: chunked ? ({ how: "chunked", chunk: 7 } as const) : c.framing }));

const stall = fc.tuple(anyAsk, fc.integer({ min: 1, max: 50 }), fc.integer({ min: 1, max: 40 })).map(([{ path, body }, missing, abortMs]) => {
  const bytes = jsonBytes(body);
  return base("stalled-body", { path, body: bytes, framing: { how: "stall", declared: bytes.length + missing, abortMs } });
});

const METHODS = ["GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "PROPFIND", "APPROVE", "POST"];
const PATHS = [
  "/",
  "/v1",
  "/v1/asks",
  "/v1/asks/",
  "/v1/asks/pay/",
  "/v1/asks/pay/approve",
  "/v1/asks/K7Q2M4XZ3A/approve",
  "/v1/asks/K7Q2M4XZ3A/deny",
  "/v1/approve",
  "/v1/decide",
  "/v2/asks/pay",
  "/V1/ASKS/PAY",
  "/v1/asks/pay%2F",
  "/v1//asks/pay",
  "/v1/asks/..%2Fpay",
  "/v1/asks/pay?x=1",
  "/v1/asks/%00",
  "/v1/asks/K7Q2M4XZ3A?approve=1",
  "/v1/asks/k7q2m4xz3a",
  "/v1/asks/K7Q2M4XZ3A#x",
  "/console",
  "/admin",
  "/.env",
  "/v1/asks/account/x",
  // The desk's route is not on the agents' listener; a decision record is read, never written.
  "/v1/asks/spend",
  "/v1/asks/K7Q2M4XZ3A/decision",
  "/v1/asks/k7q2m4xz3a/decision",
  "/v1/asks/K7Q2M4XZ3A/decision/x",
];
const wrongRoute = fc
  .tuple(
    fc.constantFrom(...METHODS),
    fc.oneof(
      fc.constantFrom(...PATHS),
      hostileText(20).map((t) => `/v1/asks/${pathSegment(t)}`),
      hostileText(12).map((t) => `/${t.replace(/[\s?#]/g, "")}`),
    ),
    fc.option(anyAsk),
  )
  .map(([method, path, ask]) =>
    base("wrong-route", {
      method,
      path,
      body: ask && method !== "GET" && method !== "HEAD" ? jsonBytes(ask.body) : undefined,
      contentType: ask ? "application/json" : undefined,
    }),
  );

const CONTENT_TYPES = [
  undefined,
  "",
  "text/plain",
  "application/x-www-form-urlencoded",
  "multipart/form-data; boundary=x",
  "application/jsonx",
  "application/json; charset=latin1",
  "application/json; charset=utf-16",
  "text/json",
  "application/ld+json",
  "application/json;charset=utf-8",
  "APPLICATION/JSON",
  'application/json; charset="utf-8"',
  "application/json, text/plain",
  "application/json; x=y",
  "*/*",
];
const wrongContentType = fc
  .tuple(anyAsk, fc.constantFrom(...CONTENT_TYPES))
  .map(([{ path, body }, contentType]) => base("content-type", { path, body: jsonBytes(body), contentType }));

const statusRead = fc
  .tuple(fc.constantFrom("accepted", "refused", "minted", "junk"), fc.nat(), approvalIdArb, hostileText(14), fc.constantFrom("", "/decision"))
  .map(([which, n, id, junk, what]) =>
    base("status", {
      method: "GET",
      contentType: undefined,
      path: `/v1/asks/${which === "junk" ? pathSegment(junk) : id}${what}`,
      ...(which === "accepted" ? { useAccepted: n } : which === "refused" ? { useRefused: n } : {}),
    }),
  );

const replay = fc.tuple(anyAsk, fc.nat()).map(([{ path, body }, n]) => base("replay", { path, body: jsonBytes(body), useAccepted: n }));

const oddHost = fc
  .tuple(
    validAsk,
    fc.constantFrom("", "a b", "[::1", "%zz", "é", "a/b?c", "x:99999", "localhost:0", "evil.example"),
    fc.constantFrom("1.1", "1.0") as fc.Arbitrary<"1.1" | "1.0">,
  )
  .map(([c, host, version]) => ({ ...c, kind: "odd-host", host, version }));

const rawGarbage = fc
  .oneof(
    fc.uint8Array({ minLength: 1, maxLength: 300 }),
    fc
      .constantFrom(
        "hello\r\n\r\n",
        "GET /v1/asks/K7Q2M4XZ3A HTTP/9.9\r\nHost: x\r\n\r\n",
        "GET /v1/asks/K7Q2M4XZ3A\r\n\r\n",
        "POST /v1/asks/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /v1/asks/pay HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
        "POST /v1/asks/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n{}",
        "POST /v1/asks/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: x\r\nX: a\x00b\r\n\r\n",
        "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: x\r\n X: folded\r\n\r\n",
        "OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
        "CONNECT localhost:443 HTTP/1.1\r\nHost: x\r\n\r\n",
        `GET /${"a".repeat(70_000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
        `GET / HTTP/1.1\r\nHost: x\r\nX-Long: ${"b".repeat(70_000)}\r\n\r\n`,
        "POST /v1/asks/pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
      )
      .map((s) => enc.encode(s)),
  )
  .map((raw) => ({ kind: "raw-garbage", raw }) as RawCase);

export const caseArb: fc.Arbitrary<Case> = fc.oneof(
  { arbitrary: validAsk, weight: 6 },
  { arbitrary: wrongType, weight: 3 },
  { arbitrary: unicodeField, weight: 4 },
  { arbitrary: extraField, weight: 2 },
  { arbitrary: missingField, weight: 2 },
  { arbitrary: cardInField, weight: 3 },
  { arbitrary: badJson, weight: 3 },
  { arbitrary: deepNesting, weight: 1 },
  { arbitrary: hugeString, weight: 1 },
  { arbitrary: oversize, weight: 2 },
  { arbitrary: dribble, weight: 2 },
  { arbitrary: stall, weight: 1 },
  { arbitrary: wrongRoute, weight: 3 },
  { arbitrary: wrongContentType, weight: 2 },
  { arbitrary: statusRead, weight: 3 },
  { arbitrary: replay, weight: 2 },
  { arbitrary: oddHost, weight: 1 },
  { arbitrary: rawGarbage, weight: 1 },
);

// --- what the approver must answer -----------------------------------------------------------

type Expected =
  | { answer: "created"; id: string }
  | { answer: "status"; id: string }
  | { answer: "code"; code: ErrorCode }
  /** Any code of the table (the path or the framing decides which; the answer is still a code). */
  | { answer: "any-code" }
  /** No answer is owed: the client gave up, or the HTTP parser refused the framing. */
  | { answer: "none-or-parser" };

const utf8 = new TextDecoder("utf-8", { fatal: true });

function isJsonType(value: string | undefined): boolean {
  if (value === undefined) return false;
  const [media, ...params] = value.split(";").map((p) => p.trim().toLowerCase());
  return media === "application/json" && params.every((p) => p === "" || p === "charset=utf-8" || p === 'charset="utf-8"');
}

/** The answer SPEC 7.1 gives for a create with this body (the approver's id state aside). */
function createOutcome(kind: "pay" | "account", bytes: Uint8Array): { ok: true; id: string } | { ok: false; code: ErrorCode } {
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    return { ok: false, code: "BODY_INVALID" };
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { ok: false, code: "BODY_INVALID" };
  const checked = kind === "pay" ? validatePayAsk(value) : validateAccountAsk(value);
  return checked.ok ? { ok: true, id: checked.ask.approval_id } : { ok: false, code: checked.code };
}

/** The route, read as the approver reads it: the path only, query ignored, no host needed. */
function routeOf(method: string, path: string): "pay" | "account" | { status: string } | { decision: string } | "none" {
  let p: string;
  try {
    p = new URL(`https://approver.invalid${path}`).pathname;
  } catch {
    return "none";
  }
  if (method === "POST" && p === "/v1/asks/pay") return "pay";
  if (method === "POST" && p === "/v1/asks/account") return "account";
  const d = method === "GET" ? /^\/v1\/asks\/([^/]+)\/decision$/.exec(p) : null;
  if (d) return { decision: d[1]! };
  const m = method === "GET" ? /^\/v1\/asks\/([^/]+)$/.exec(p) : null;
  if (m && !["pay", "account", "spend"].includes(m[1]!)) return { status: m[1]! };
  return "none";
}

type State = { accepted: string[]; acceptedSet: Set<string>; refused: string[]; refusedSet: Set<string>; inFlight: Set<string> };

function owedAnswer(c: HttpCase, state: State): Expected {
  if (c.framing.how === "stall") return { answer: "none-or-parser" };
  const route = routeOf(c.method, c.path);
  if (route === "none") return { answer: "code", code: "NOT_FOUND" };
  if (typeof route === "object") {
    const id = "status" in route ? route.status : route.decision;
    if (!isApprovalId(id)) return { answer: "code", code: "APPROVAL_ID_INVALID" };
    // Nobody decides during this run and asks wait a week: every stored ask's record is pending.
    if (state.acceptedSet.has(id)) return "status" in route ? { answer: "status", id } : { answer: "code", code: "DECISION_PENDING" };
    return state.inFlight.has(id) ? { answer: "any-code" } : { answer: "code", code: "ASK_NOT_FOUND" };
  }
  if (!isJsonType(c.contentType)) return { answer: "code", code: "CONTENT_TYPE_INVALID" };
  const body = c.body ?? new Uint8Array(0);
  if (c.framing.how === "lie-big") return { answer: "code", code: "BODY_TOO_LARGE" };
  if (c.framing.how === "lie-small") {
    // The approver reads the declared bytes; the rest is not a body of this request.
    const outcome = createOutcome(route, body.subarray(0, c.framing.declared));
    return outcome.ok ? { answer: "any-code" } : { answer: "code", code: outcome.code };
  }
  if (body.length > MAX_BODY) return { answer: "code", code: "BODY_TOO_LARGE" };
  const outcome = createOutcome(route, body);
  if (!outcome.ok) return { answer: "code", code: outcome.code };
  // Refused ids are never stored, so only an accepted one is a replay.
  return state.acceptedSet.has(outcome.id) ? { answer: "code", code: "ID_ALREADY_USED" } : { answer: "created", id: outcome.id };
}

// --- the wire ---------------------------------------------------------------------------------

export type Answer = { status: number; headers: Map<string, string>; body: string; raw: string } | { none: string };

export type Tls = { cert: Buffer; key: Buffer; ca: Buffer };

function requestBytes(c: HttpCase): Uint8Array[] {
  const body = c.body;
  const head: string[] = [`${c.method} ${c.path} HTTP/${c.version}`];
  if (c.host !== "" || c.version === "1.1") head.push(`Host: ${c.host}`);
  if (c.contentType !== undefined) head.push(`Content-Type: ${c.contentType}`);
  head.push("Connection: close");
  let payload: Uint8Array = new Uint8Array(0);
  if (body !== undefined) {
    const f = c.framing;
    if (f.how === "chunked") {
      head.push("Transfer-Encoding: chunked");
      const parts: Uint8Array[] = [];
      for (let i = 0; i < body.length; i += f.chunk) {
        const piece = body.subarray(i, i + f.chunk);
        parts.push(enc.encode(`${piece.length.toString(16)}\r\n`), piece, enc.encode("\r\n"));
      }
      parts.push(enc.encode("0\r\n\r\n"));
      payload = Buffer.concat(parts);
    } else {
      head.push(`Content-Length: ${f.how === "length" ? body.length : f.declared}`);
      payload = body;
    }
  }
  const all = Buffer.concat([Buffer.from(`${head.join("\r\n")}\r\n\r\n`, "utf8"), payload]);
  if (c.pieces <= 1) return [all];
  const size = Math.ceil(all.length / c.pieces);
  const out: Uint8Array[] = [];
  for (let i = 0; i < all.length; i += size) out.push(all.subarray(i, i + size));
  return out;
}

function parseAnswer(buf: Buffer, bodyless = false): Answer | undefined {
  const end = buf.indexOf("\r\n\r\n");
  if (end === -1) return undefined;
  const head = buf.subarray(0, end).toString("latin1").split("\r\n");
  const m = /^HTTP\/1\.1 (\d{3}) /.exec(head[0] ?? "");
  if (!m) return { none: `not HTTP: ${JSON.stringify(head[0]?.slice(0, 40))}` };
  const headers = new Map<string, string>();
  for (const line of head.slice(1)) {
    const i = line.indexOf(":");
    headers.set(line.slice(0, i).trim().toLowerCase(), line.slice(i + 1).trim());
  }
  // HEAD answers carry a Content-Length but no body.
  const length = bodyless ? 0 : Number(headers.get("content-length") ?? 0);
  const rest = buf.subarray(end + 4);
  if (rest.length < length) return undefined;
  return { status: Number(m[1]), headers, body: rest.subarray(0, length).toString("utf8"), raw: head[0]! };
}

/** One request on its own TLS connection; resolves with the parsed answer or why there is none. */
export function send(port: number, tls: Tls, pieces: Uint8Array[], gapMs: number, abortMs: number | undefined, head: boolean): Promise<Answer> {
  return new Promise((resolve) => {
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = (a: Answer) => {
      if (settled) return;
      settled = true;
      clearTimeout(deadline);
      socket.destroy();
      resolve(a);
    };
    const socket = connect({ host: "127.0.0.1", port, servername: "localhost", ...tls }, async () => {
      for (const [i, piece] of pieces.entries()) {
        if (settled || socket.destroyed) return;
        socket.write(piece);
        if (gapMs > 0 && i < pieces.length - 1) await Bun.sleep(gapMs);
      }
      if (abortMs !== undefined) setTimeout(() => finish({ none: "client gave up" }), abortMs);
    });
    socket.on("data", (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      const a = parseAnswer(buf, head);
      if (a) finish(a);
    });
    socket.on("error", (e: NodeJS.ErrnoException) => {
      const a = parseAnswer(buf);
      finish(a ?? { none: `error ${e.code ?? e.name}` });
    });
    socket.on("close", () => finish(parseAnswer(buf, head) ?? { none: buf.length ? `closed mid-answer (${buf.length} bytes)` : "closed without an answer" }));
    const deadline = setTimeout(() => finish({ none: "no answer within 10 s" }), 10_000);
  });
}

// --- judging ------------------------------------------------------------------------------------

const PARSER_REFUSALS = new Set([400, 413, 414, 431, 505]);
const STANDARD_METHODS = new Set(["GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH"]);

function judge(c: Case, expected: Expected, a: Answer, sentId: string | undefined): { label: string; problem?: string } {
  if ("none" in a) {
    // The HTTP parser drops a connection whose request names a method it does not know.
    const unknownMethod = "method" in c && !STANDARD_METHODS.has(c.method);
    const allowed = expected.answer === "none-or-parser" || c.kind === "raw-garbage" || unknownMethod;
    return { label: "no answer", problem: allowed ? undefined : `no answer (${a.none})` };
  }
  // The HTTP parser's own refusals, before any handler: bodyless and closing, for a request
  // that is not well-formed HTTP. Among them the one 5xx of the runtime: 505 for a request line
  // that does not end in HTTP/1.0 or HTTP/1.1 (a NUL or space inside the target, HTTP/9.9).
  if (a.body === "" && PARSER_REFUSALS.has(a.status) && a.headers.get("connection") === "close" && !a.headers.has("content-type")) {
    const allowed =
      c.kind === "raw-garbage" || ("method" in c && (c.version === "1.0" || c.host === "" || /[^\x21-\x7e]/.test(c.host) || /[^\x21-\x7e]/.test(c.path)));
    return { label: `parser ${a.status}`, problem: allowed ? undefined : `the HTTP parser refused a well-formed request with ${a.status}` };
  }
  if (a.status >= 500) return { label: `${a.status}`, problem: `a ${a.status} answer: ${a.body.slice(0, 80)}` };
  if ("method" in c && c.method === "HEAD") {
    return { label: `HEAD ${a.status}`, problem: a.status === 404 ? undefined : `HEAD answered ${a.status}` };
  }
  const contentType = a.headers.get("content-type") ?? "";
  if (!/^application\/json/.test(contentType)) return { label: `${a.status} ${contentType}`, problem: `answer is not JSON: ${a.status} ${contentType}` };
  if (a.headers.get("cache-control") !== "no-store") return { label: `${a.status}`, problem: "answer without Cache-Control: no-store" };
  let value: unknown;
  try {
    value = JSON.parse(a.body);
  } catch {
    return { label: `${a.status} unparsable`, problem: `unparsable body ${JSON.stringify(a.body.slice(0, 80))}` };
  }
  let label: string;
  if (a.status === 201) {
    const parsed = approverAnswers().CreatedAnswer(value);
    if (isArkErrors(parsed) || parsed.approval_id !== sentId) return { label: "201 bad", problem: `bad 201 body ${a.body.slice(0, 120)}` };
    label = "201 created";
    if (expected.answer !== "created") return { label, problem: `201 where ${JSON.stringify(expected)} was owed` };
    return { label };
  }
  if (a.status === 200) {
    const parsed = approverAnswers().StatusAnswer(value);
    if (isArkErrors(parsed)) return { label: "200 bad", problem: `bad 200 body ${a.body.slice(0, 120)}` };
    label = `200 ${parsed.state}`;
    if (expected.answer !== "status" || parsed.approval_id !== expected.id || parsed.state !== "pending") {
      return { label, problem: `200 ${a.body} where ${JSON.stringify(expected)} was owed` };
    }
    return { label };
  }
  const code = (value as { error?: unknown }).error;
  if (!isErrorCode(code) || a.body !== JSON.stringify({ error: code }))
    return { label: `${a.status} not a code`, problem: `not exactly {"error":CODE}: ${a.body.slice(0, 120)}` };
  label = `${a.status} ${code}`;
  if (ERRORS[code].http !== a.status) return { label, problem: `${code} with status ${a.status}` };
  if (expected.answer === "code" && expected.code !== code) return { label, problem: `${code} where ${expected.code} was owed` };
  if (expected.answer === "created" || expected.answer === "status") return { label, problem: `${code} where ${expected.answer} was owed` };
  return { label };
}

// --- the run ------------------------------------------------------------------------------------

export async function run(options: ApproverFuzzOptions): Promise<ApproverFuzzSummary> {
  const { runs, seed, concurrency = 16 } = options;
  const cases = fc.sample(caseArb, { seed, numRuns: runs });
  const failures: string[] = [];
  const byKind: Record<string, number> = {};
  const byAnswer: Record<string, number> = {};
  const state: State = { accepted: [], acceptedSet: new Set(), refused: [], refusedSet: new Set(), inFlight: new Set() };
  /** Refused asks with a well-formed id: none of them may ever be stored. */
  const refusedWellFormed = new Set<string>();
  const cards = new Set<string>();

  await using dir = tempDir("ask-only-fuzz-approver-");
  const link = await writeLink(dir.path);
  const tls: Tls = { cert: readFileSync(link.clientCert), key: readFileSync(link.clientKey), ca: readFileSync(link.approverCa) };
  const db = join(dir.path, "asks.db");
  const ap = await startApprover({ files: approverFiles(link), db, ttl: "168h", maxPending: 100_000 });
  const started = performance.now();

  const one = async (c: Case, index: number) => {
    bump(byKind, c.kind);
    if (!("method" in c)) {
      const a = await send(ap.port, tls, [c.raw], 0, 200, false);
      const { label, problem } = judge(c, { answer: "none-or-parser" }, a, undefined);
      bump(byAnswer, label);
      if (problem) failures.push(`case ${index} (${c.kind}): ${problem}`);
      return;
    }
    for (const d of c.cards ?? []) cards.add(d);
    let sent = c;
    // Bind replays and read-backs to ids from earlier answers.
    if (c.useAccepted !== undefined && state.accepted.length > 0) {
      const id = state.accepted[c.useAccepted % state.accepted.length]!;
      if (c.method === "GET") sent = { ...c, path: `/v1/asks/${id}${c.path.endsWith("/decision") ? "/decision" : ""}` };
      else {
        const body = JSON.parse(new TextDecoder().decode(c.body));
        sent = { ...c, body: jsonBytes({ ...body, approval_id: id }) };
      }
    } else if (c.useRefused !== undefined && state.refused.length > 0) {
      sent = { ...c, path: `/v1/asks/${state.refused[c.useRefused % state.refused.length]}${c.path.endsWith("/decision") ? "/decision" : ""}` };
    }
    const expected = owedAnswer(sent, state);
    const sentId = (() => {
      try {
        const id = (JSON.parse(new TextDecoder().decode(sent.body)) as { approval_id?: unknown }).approval_id;
        return isApprovalId(id) ? id : undefined;
      } catch {
        return undefined;
      }
    })();
    if (sentId) state.inFlight.add(sentId);
    const abortMs = sent.framing.how === "stall" ? sent.framing.abortMs : undefined;
    const a = await send(ap.port, tls, requestBytes(sent), sent.gapMs, abortMs, sent.method === "HEAD");
    const { label, problem } = judge(sent, expected, a, sentId);
    bump(byAnswer, label);
    if (problem) failures.push(`case ${index} (${sent.kind} ${sent.method} ${sent.path.slice(0, 40)}): ${problem}`);
    if (sentId) {
      state.inFlight.delete(sentId);
      if (label === "201 created") {
        state.accepted.push(sentId);
        state.acceptedSet.add(sentId);
      } else if (!state.acceptedSet.has(sentId) && !state.refusedSet.has(sentId)) {
        state.refused.push(sentId);
        state.refusedSet.add(sentId);
        refusedWellFormed.add(sentId);
      }
    }
  };

  let next = 0;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= cases.length) return;
      await one(cases[i]!, i);
      if (ap.proc.exitCode !== null || ap.proc.signalCode !== null) {
        failures.push(`the approver died during case ${i} (exit ${ap.proc.exitCode}, signal ${ap.proc.signalCode})`);
        next = cases.length;
      }
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const elapsedMs = performance.now() - started;

  // The approver's own API: every accepted ask reads back pending, every refused id is unknown.
  const readBack = async (id: string) => {
    const a = await send(ap.port, tls, [enc.encode(`GET /v1/asks/${id} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`)], 0, undefined, false);
    return "status" in a ? a.body : `no answer (${a.none})`;
  };
  for (const id of state.accepted) {
    const body = await readBack(id);
    if (body !== JSON.stringify({ approval_id: id, state: "pending" })) failures.push(`accepted ${id} reads back as ${body}`);
  }
  for (const id of refusedWellFormed) {
    if (state.acceptedSet.has(id)) continue;
    const body = await readBack(id);
    if (body !== '{"error":"ASK_NOT_FOUND"}') failures.push(`refused ${id} reads back as ${body} (a refused request changed state)`);
  }

  const alive = ap.proc.exitCode === null && ap.proc.signalCode === null;
  if (!alive) failures.push("the approver is not running at the end");
  const code = await ap.stop();
  if (alive && code !== 0) failures.push(`the approver stopped with exit ${code}`);
  await untilEnded(ap.out);
  for (const line of ap.err.text.split("\n"))
    if (line !== "" && !APPROVER_LOG.some((g) => g.test(line))) failures.push(`approver log line of its own: ${JSON.stringify(line.slice(0, 160))}`);

  // The ledger itself, opened once the approver has stopped: exactly the accepted asks.
  {
    using ledger = AskLedger.open(db, () => new Date());
    const stored = ledger.listPending();
    const storedIds = new Set(stored.map((s) => s.ask.approval_id));
    if (stored.length !== state.acceptedSet.size) failures.push(`the ledger holds ${stored.length} pending asks; ${state.acceptedSet.size} got 201`);
    for (const id of state.acceptedSet) if (!storedIds.has(id)) failures.push(`accepted ${id} is not in the ledger`);
    for (const id of storedIds) if (!state.acceptedSet.has(id)) failures.push(`${id} is in the ledger but never got 201`);
    for (const id of refusedWellFormed) if (!state.acceptedSet.has(id) && ledger.get(id)) failures.push(`refused ${id} is in the ledger`);
    for (const s of stored) if (holdsCardNumber(s.ask)) failures.push(`stored ask ${s.ask.approval_id} holds a card number`);
  }
  // A refused card number is never shown or logged (SPEC 4): not on the console, not in the log.
  const shown = digitsOf(ap.out.text + ap.err.text);
  for (const card of cards) if (shown.includes(card)) failures.push(`card number ${card.slice(0, 4)}... reached the approver's console or log`);
  // Each accepted ask's recap reached the console; no refused one did.
  for (const id of state.acceptedSet) if (!ap.out.text.includes(`[ask ${id}]`)) failures.push(`no recap of ${id} on the console`);
  for (const id of refusedWellFormed)
    if (!state.acceptedSet.has(id) && ap.out.text.includes(`[ask ${id}]`)) failures.push(`a recap of refused ${id} on the console`);

  return { runs, seed, byKind, byAnswer, accepted: state.acceptedSet.size, elapsedMs, failures };
}

if (import.meta.main) {
  const options = cliOptions("scripts/fuzz/approver.ts", 10_000);
  const s = await run(options);
  console.log(
    formatSummary(
      "fuzz:approver",
      s,
      { "requests by kind": s.byKind, "answers by status and code": s.byAnswer },
      `asks accepted (201) and found in the ledger: ${s.accepted}`,
    ),
  );
  process.exit(s.failures.length === 0 ? 0 : 1);
}
