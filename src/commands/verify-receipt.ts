// `ask-only verify-receipt`: checks a saved desk response (one of the shapes of
// core/receipt/shapes.ts), an approver's decision record, or a JSONL export of either against a
// JWKS, offline. Exit 0 only when every check the file calls for ran and passed. Every piece of
// file text it prints goes through printable (the recap's escaping).
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { failure, type Streams, usageError } from "../cli/voice.ts";
import { DecisionChain, type OpenedDecision, openDecision } from "../core/decision/verify.ts";
import {
  ChainVerifier,
  describeCheck,
  type OpenedEnvelope,
  openExportLine,
  printable,
  ReceiptKeyError,
  ReceiptKeys,
  SHAPES_READ,
  verifyResponse,
} from "../core/receipt/index.ts";
import { isDecisionEnvelope } from "../core/receipt/shapes.ts";
import { approvalChecks } from "../core/decision/verify.ts";
import { verifyStatement } from "../core/finance/statement-verify.ts";

export type VerifyReceiptOptions = {
  response?: string;
  keys?: string;
  args?: string;
  jsonl?: string;
  approverKeys?: string;
  /** With a statement: the receipts export its figures are recomputed from. */
  receipts?: string;
  /** With a statement: budget records the reader holds. */
  records?: string;
  streams: Streams;
};

/** A path from the command line, escaped like file text but never cut. */
const shownPath = (path: string) => printable(path, Number.POSITIVE_INFINITY);

const KEYS_HINT = "the desk publishes it at GET /.well-known/receipt-signing-key.json";
const APPROVER_KEYS_HINT = "ask-only approver --print-decision-keys prints it";

export async function runVerifyReceipt(options: VerifyReceiptOptions): Promise<void> {
  if (options.keys === undefined) throw usageError("--keys JWKS.json is required");
  if ((options.response === undefined) === (options.jsonl === undefined)) {
    throw usageError("give either RESPONSE.json or --jsonl FILE");
  }
  if (options.jsonl !== undefined && options.args !== undefined) {
    throw usageError("--args applies to RESPONSE.json, not to --jsonl");
  }
  if (options.receipts !== undefined || options.records !== undefined) return verifyStatementFile(options);
  const keys = loadKeys(options.keys, "--keys");
  const approverKeys = options.approverKeys === undefined ? undefined : loadKeys(options.approverKeys, "--approver-keys");
  if (options.jsonl !== undefined) return verifyJsonl(options.jsonl, keys, approverKeys, options.streams);

  const body = readJson(options.response!, SHAPES_READ);
  if (isStatementEnvelope(body)) {
    throw usageError(`${shownPath(options.response!)} is a statement`, "check it with --receipts EXPORT.jsonl (GET /admin/receipts?org_id=)");
  }
  if (isDecisionEnvelope(body)) {
    // A decision record is checked with the approver's key set, given as --keys.
    for (const [given, flag] of [
      [options.args, "--args"],
      [options.approverKeys, "--approver-keys"],
    ] as const) {
      if (given !== undefined)
        throw usageError(
          `${flag} goes with a desk receipt; ${shownPath(options.response!)} is a decision record`,
          "check a decision record with --keys and the approver's key set only",
        );
    }
    const checks = openDecision(body, keys).checks;
    options.streams.out(`${checks.map(describeCheck).join("\n")}\n`);
    const failed = checks.filter((c) => !c.ok).length;
    if (failed > 0) throw failure(`the decision record did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)`);
    return;
  }
  const args = options.args === undefined ? undefined : readJson(options.args, "the arguments object of the call");
  const checks = verifyResponse(body, keys, args, approverKeys);
  options.streams.out(`${checks.map(describeCheck).join("\n")}\n`);
  if (checks[0]?.name === "shape") throw failure(`${shownPath(options.response!)} is not a response verify-receipt reads`, `it should hold ${SHAPES_READ}`);
  const failed = checks.filter((c) => !c.ok).length;
  if (failed > 0) throw failure(`the receipt did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)`);
}

const isStatementEnvelope = (v: unknown) => typeof v === "object" && v !== null && Object.hasOwn(v, "statement") && Object.hasOwn(v, "payload");

/**
 * Statement mode: the signature, the embedded budget records, every receipt of the export, each
 * key's chain, and every figure recomputed from the export, each problem on its own line.
 */
function verifyStatementFile(options: VerifyReceiptOptions): void {
  if (options.receipts === undefined) throw usageError("--records goes with a statement and --receipts EXPORT.jsonl");
  if (options.response === undefined) throw usageError("give the statement: STATEMENT.json --receipts EXPORT.jsonl");
  for (const [given, flag] of [
    [options.jsonl, "--jsonl"],
    [options.args, "--args"],
    [options.approverKeys, "--approver-keys"],
  ] as const) {
    if (given !== undefined) throw usageError(`${flag} does not go with a statement`);
  }
  const keys = loadKeys(options.keys!, "--keys");
  const statement = readJson(options.response, "a statement (GET /admin/statements)");
  const jsonLines = (path: string) =>
    [...linesOf(path)]
      .filter((l) => l.trim() !== "")
      .map((l) => {
        try {
          return JSON.parse(l) as unknown;
        } catch {
          // Kept as text: the receipts check names the line as unreadable.
          return l;
        }
      });
  const verdict = verifyStatement(statement, keys, jsonLines(options.receipts), options.records === undefined ? [] : jsonLines(options.records));
  for (const check of verdict.checks) {
    options.streams.out(check.ok ? `ok   ${check.name} (${printable(check.detail)})\n` : `FAILED ${check.name}: ${printable(check.detail)}\n`);
    for (const problem of check.problems) options.streams.out(`       ${printable(problem)}\n`);
  }
  if (!verdict.ok) {
    const failed = verdict.checks.filter((c) => !c.ok).length;
    throw failure(`the statement did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)`);
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw unreadable(path, err);
  }
}

function unreadable(path: string, err: unknown) {
  const code = (err as NodeJS.ErrnoException).code ?? "unknown error";
  return failure(`cannot read ${shownPath(path)}: ${code}`, code === "ENOENT" ? "check the path" : undefined);
}

function readJson(path: string, what: string): unknown {
  const text = readText(path);
  try {
    return JSON.parse(text);
  } catch {
    throw failure(`${shownPath(path)} is not JSON`, `it should hold ${what}`);
  }
}

function loadKeys(path: string, flag: string): ReceiptKeys {
  const jwks = readJson(
    path,
    flag === "--keys" ? "the desk's receipt-signing key set (JWKS), or the approver's for a decision record" : "the approver's decision key set (JWKS)",
  );
  try {
    return ReceiptKeys.fromJwks(jwks);
  } catch (err) {
    if (err instanceof ReceiptKeyError) {
      const what = flag === "--keys" ? "a receipt key set" : "a decision key set";
      throw failure(`${shownPath(path)} is not ${what}: ${printable(err.message)}`, flag === "--keys" ? KEYS_HINT : APPROVER_KEYS_HINT);
    }
    throw err;
  }
}

/** Lines of a file, read in chunks so an export of any size runs in bounded memory. */
function* linesOf(path: string): Generator<string> {
  let fd: number;
  try {
    fd = openSync(path, "r");
  } catch (err) {
    throw unreadable(path, err);
  }
  const decoder = new TextDecoder("utf-8");
  const chunk = Buffer.allocUnsafe(1 << 20);
  let rest = "";
  try {
    for (;;) {
      let n: number;
      try {
        n = readSync(fd, chunk, 0, chunk.length, null);
      } catch (err) {
        throw unreadable(path, err);
      }
      if (n === 0) break;
      const text = rest + decoder.decode(chunk.subarray(0, n), { stream: true });
      const parts = text.split("\n");
      rest = parts.pop()!;
      yield* parts;
    }
    rest += decoder.decode();
    if (rest !== "") yield rest;
  } finally {
    closeSync(fd);
  }
}

/** Envelopes in flight at once: enough to keep every core of the crypto thread pool busy. */
const WINDOW = 256;

type Line = { lineNo: number; value: unknown; parsed: boolean };

/** The non-blank lines of an export, each parsed as JSON (or marked as not JSON). */
function* exportLines(path: string): Generator<Line> {
  let lineNo = 0;
  for (const raw of linesOf(path)) {
    lineNo++;
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") continue;
    try {
      yield { lineNo, value: JSON.parse(line), parsed: true };
    } catch {
      yield { lineNo, value: undefined, parsed: false };
    }
  }
}

/** The first line again, then the rest, without reading the rest into memory. */
function* chained(first: Line, rest: Generator<Line>): Generator<Line> {
  yield first;
  yield* rest;
}

/** An export of receipts or of decision records: its first line decides which, and every line must be the same. */
async function verifyJsonl(path: string, keys: ReceiptKeys, approverKeys: ReceiptKeys | undefined, streams: Streams): Promise<void> {
  const lines = exportLines(path);
  const first = lines.next();
  if (first.done) {
    streams.out("0 receipts of 0 keys: 0 ok, 0 failed; chains intact\n");
    throw failure(`${shownPath(path)} holds no receipts`);
  }
  if (first.value.parsed && isDecisionEnvelope(first.value.value)) {
    if (approverKeys !== undefined) {
      throw usageError(
        `--approver-keys goes with receipts; ${shownPath(path)} is an export of decision records`,
        "check an export of decisions with --keys and the approver's key set only",
      );
    }
    return verifyDecisionLines(first.value, lines, keys, streams);
  }
  return verifyReceiptLines(first.value, lines, keys, approverKeys, streams);
}

function verifyDecisionLines(first: Line, rest: Generator<Line>, keys: ReceiptKeys, streams: Streams): void {
  const chain = new DecisionChain();
  const out: string[] = [];
  let count = 0;
  let failed = 0;
  for (const line of chained(first, rest)) {
    count++;
    let opened: OpenedDecision;
    if (!line.parsed) opened = { checks: [{ name: "envelope", ok: false, detail: "not JSON" }], signed: null, payloadSha256: null };
    else if (!isDecisionEnvelope(line.value))
      opened = {
        checks: [{ name: "shape", ok: false, detail: "an export of decision records holds decision envelopes {payload, signature, kid, decision} only" }],
        signed: null,
        payloadSha256: null,
      };
    else opened = openDecision(line.value, keys);
    const bad = opened.checks.filter((c) => !c.ok);
    if (bad.length > 0) {
      failed++;
      for (const check of bad) out.push(`line ${line.lineNo}: ${describeCheck(check)}`);
    }
    chain.add(line.lineNo, opened.signed, opened.payloadSha256);
    if (out.length >= 1000) streams.out(`${out.splice(0).join("\n")}\n`);
  }
  for (const f of chain.failures) out.push(`line ${f.index}: FAILED chain: ${f.detail}`);
  const breaks = chain.failures.length;
  out.push(
    `${count} decision ${count === 1 ? "record" : "records"}: ${count - failed} ok, ${failed} failed; ` +
      `${breaks === 0 ? "chain intact" : `${breaks} chain ${breaks === 1 ? "break" : "breaks"}`}`,
  );
  streams.out(`${out.join("\n")}\n`);
  if (failed > 0 || breaks > 0) throw failure("the export did not verify");
}

async function verifyReceiptLines(
  first: Line,
  rest: Generator<Line>,
  keys: ReceiptKeys,
  approverKeys: ReceiptKeys | undefined,
  streams: Streams,
): Promise<void> {
  const chain = new ChainVerifier();
  const out: string[] = [];
  const inFlight: { lineNo: number; opened: Promise<OpenedEnvelope | null> }[] = [];
  let count = 0;
  let failed = 0;

  // Results are taken in file order, so the chain and the report follow the lines.
  const settle = async (next: { lineNo: number; opened: Promise<OpenedEnvelope | null> }) => {
    const opened = await next.opened;
    if (opened === null) {
      failed++;
      out.push(`line ${next.lineNo}: FAILED envelope: not JSON`);
      return;
    }
    // A receipt that carries the approver's decision (version 2) gets its approval checked too.
    const checks = opened.signed === null ? opened.checks : [...opened.checks, ...approvalChecks(opened.signed, approverKeys)];
    const bad = checks.filter((c) => !c.ok);
    if (bad.length > 0) {
      failed++;
      for (const check of bad) out.push(`line ${next.lineNo}: ${describeCheck(check)}`);
    }
    chain.add(next.lineNo, opened.signed, opened.payloadSha256);
    if (out.length >= 1000) streams.out(`${out.splice(0).join("\n")}\n`);
  };

  for (const line of chained(first, rest)) {
    count++;
    inFlight.push({ lineNo: line.lineNo, opened: line.parsed ? openExportLine(line.value, keys) : Promise.resolve(null) });
    if (inFlight.length >= WINDOW) await settle(inFlight.shift()!);
  }
  while (inFlight.length > 0) await settle(inFlight.shift()!);

  for (const f of chain.failures) out.push(`line ${f.index}: FAILED chain: key ${f.key_id}: ${f.detail}`);
  const breaks = chain.failures.length;
  out.push(
    `${count} ${count === 1 ? "receipt" : "receipts"} of ${chain.keyCount} ${chain.keyCount === 1 ? "key" : "keys"}: ` +
      `${count - failed} ok, ${failed} failed; ${breaks === 0 ? "chains intact" : `${breaks} chain ${breaks === 1 ? "break" : "breaks"}`}`,
  );
  streams.out(`${out.join("\n")}\n`);
  if (failed > 0 || breaks > 0) throw failure("the export did not verify");
}
