// `ask-only verify-receipt`: checks a saved desk response (one of the shapes of
// core/receipt/shapes.ts) or a JSONL export of envelopes against a JWKS, offline. Exit 0 only
// when every check the file calls for ran and passed. Every piece of file text it prints goes
// through printable (the recap's escaping).
import { closeSync, openSync, readFileSync, readSync } from "node:fs";
import { failure, type Streams, usageError } from "../cli/voice.ts";
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

export type VerifyReceiptOptions = {
  response?: string;
  keys?: string;
  args?: string;
  jsonl?: string;
  streams: Streams;
};

/** A path from the command line, escaped like file text but never cut. */
const shownPath = (path: string) => printable(path, Number.POSITIVE_INFINITY);

const KEYS_HINT = "the desk publishes it at GET /.well-known/receipt-signing-key.json";

export async function runVerifyReceipt(options: VerifyReceiptOptions): Promise<void> {
  if (options.keys === undefined) throw usageError("--keys JWKS.json is required");
  if ((options.response === undefined) === (options.jsonl === undefined)) {
    throw usageError("give either RESPONSE.json or --jsonl FILE");
  }
  if (options.jsonl !== undefined && options.args !== undefined) {
    throw usageError("--args applies to RESPONSE.json, not to --jsonl");
  }
  const keys = loadKeys(options.keys);
  if (options.jsonl !== undefined) return verifyJsonl(options.jsonl, keys, options.streams);

  const body = readJson(options.response!, SHAPES_READ);
  const args = options.args === undefined ? undefined : readJson(options.args, "the arguments object of the call");
  const checks = verifyResponse(body, keys, args);
  options.streams.out(`${checks.map(describeCheck).join("\n")}\n`);
  if (checks[0]?.name === "shape") throw failure(`${shownPath(options.response!)} is not a response verify-receipt reads`, `it should hold ${SHAPES_READ}`);
  const failed = checks.filter((c) => !c.ok).length;
  if (failed > 0) throw failure(`the receipt did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)`);
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

function loadKeys(path: string): ReceiptKeys {
  const jwks = readJson(path, "the desk's receipt-signing key set (JWKS)");
  try {
    return ReceiptKeys.fromJwks(jwks);
  } catch (err) {
    if (err instanceof ReceiptKeyError) throw failure(`${shownPath(path)} is not a receipt key set: ${printable(err.message)}`, KEYS_HINT);
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

async function verifyJsonl(path: string, keys: ReceiptKeys, streams: Streams): Promise<void> {
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
    const bad = opened.checks.filter((c) => !c.ok);
    if (bad.length > 0) {
      failed++;
      for (const check of bad) out.push(`line ${next.lineNo}: ${describeCheck(check)}`);
    }
    chain.add(next.lineNo, opened.signed, opened.payloadSha256);
    if (out.length >= 1000) streams.out(`${out.splice(0).join("\n")}\n`);
  };

  let lineNo = 0;
  for (const raw of linesOf(path)) {
    lineNo++;
    const line = raw.endsWith("\r") ? raw.slice(0, -1) : raw;
    if (line.trim() === "") continue;
    count++;
    let envelope: unknown;
    let parsed = true;
    try {
      envelope = JSON.parse(line);
    } catch {
      parsed = false;
    }
    inFlight.push({ lineNo, opened: parsed ? openExportLine(envelope, keys) : Promise.resolve(null) });
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
  if (count === 0) throw failure(`${shownPath(path)} holds no receipts`);
  if (failed > 0 || breaks > 0) throw failure("the export did not verify");
}
