// Reader of the receipt vector files (and of the decision vectors in ../decisions/, which use the
// same grammar): header lines, one blank line, then the exact bytes of the saved file. An unknown
// or malformed header is an error, so a typo cannot silently drop an expectation.
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export const VECTOR_DIR = import.meta.dir;
export const VECTOR_JWKS = join(VECTOR_DIR, "jwks.json");
/** The decision vectors: the approver's records, their export, and receipts of version 2 (scripts/vectors/decisions.ts). */
export const DECISION_VECTOR_DIR = join(VECTOR_DIR, "../decisions");
export const DECISION_VECTOR_JWKS = join(DECISION_VECTOR_DIR, "approver-jwks.json");
export const DECISION_VECTOR_EXPORT = join(DECISION_VECTOR_DIR, "export.jsonl");

export type ReceiptVector = {
  name: string;
  description: string;
  /** The arguments as JSON text (for --args), when the vector gives them. */
  args?: string;
  /** Which key set is --keys: the desk's (the default) or the approver's (decision vectors). */
  keys: "desk" | "approver";
  /** Whether --approver-keys is given too. */
  approverKeys: boolean;
  exit: 0 | 1;
  /** Expected stdout, one entry per line. */
  stdout: string[];
  /** The RESPONSE.json file, byte for byte. */
  body: string;
};

const SINGLE = new Set(["description", "args", "exit", "keys", "approverkeys"]);

export function parseVector(name: string, text: string): ReceiptVector {
  const split = text.indexOf("\n\n");
  if (split < 0) throw new Error(`${name}: no blank line between headers and body`);
  const headers = new Map<string, string>();
  const stdout: string[] = [];
  for (const line of text.slice(0, split).split("\n")) {
    const m = /^([a-z]+): (.*)$/.exec(line);
    if (!m) throw new Error(`${name}: malformed header line ${JSON.stringify(line)}`);
    const [, key, value] = m as unknown as [string, string, string];
    if (key === "stdout") stdout.push(value);
    else if (!SINGLE.has(key)) throw new Error(`${name}: unknown header ${key}`);
    else if (headers.has(key)) throw new Error(`${name}: header ${key} given twice`);
    else headers.set(key, value);
  }
  const exit = headers.get("exit");
  if (exit !== "0" && exit !== "1") throw new Error(`${name}: exit must be 0 or 1`);
  const description = headers.get("description");
  if (!description) throw new Error(`${name}: description missing`);
  if (stdout.length === 0) throw new Error(`${name}: no stdout lines`);
  const args = headers.get("args");
  if (args !== undefined) JSON.parse(args);
  const keys = headers.get("keys") ?? "desk";
  if (keys !== "desk" && keys !== "approver") throw new Error(`${name}: keys must be desk or approver`);
  const approverKeys = headers.get("approverkeys") ?? "no";
  if (approverKeys !== "yes" && approverKeys !== "no") throw new Error(`${name}: approverkeys must be yes or no`);
  return {
    name,
    description,
    ...(args === undefined ? {} : { args }),
    keys,
    approverKeys: approverKeys === "yes",
    exit: Number(exit) as 0 | 1,
    stdout,
    body: text.slice(split + 2),
  };
}

export function formatVector(v: Omit<ReceiptVector, "name" | "keys" | "approverKeys"> & Partial<Pick<ReceiptVector, "keys" | "approverKeys">>): string {
  const head = [`description: ${v.description}`];
  if (v.args !== undefined) head.push(`args: ${v.args}`);
  if (v.keys !== undefined && v.keys !== "desk") head.push(`keys: ${v.keys}`);
  if (v.approverKeys) head.push("approverkeys: yes");
  head.push(`exit: ${v.exit}`, ...v.stdout.map((line) => `stdout: ${line}`));
  return `${head.join("\n")}\n\n${v.body}`;
}

export function readVectors(dir = VECTOR_DIR): ReceiptVector[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".vector"))
    .sort()
    .map((f) => parseVector(f, readFileSync(join(dir, f), "utf8")));
}
