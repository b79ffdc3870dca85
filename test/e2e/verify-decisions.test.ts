// `ask-only verify-receipt` on the approver's decision records, as a real process: the decision
// vectors (records, and desk receipts of version 2 that carry one), an export of records with
// its chain, and what the command refuses.
import { describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { runBinary } from "../helpers/binary.ts";
import { tempDir } from "../helpers/tmp.ts";
import { DECISION_VECTOR_DIR, DECISION_VECTOR_EXPORT, DECISION_VECTOR_JWKS, readVectors, VECTOR_JWKS } from "../vectors/receipts/vectors.ts";

function write(dir: string, name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const exportLines = readFileSync(DECISION_VECTOR_EXPORT, "utf8").trimEnd().split("\n");

describe("verify-receipt on the decision vectors", () => {
  for (const v of readVectors(DECISION_VECTOR_DIR)) {
    test(`${v.name}: ${v.description}`, async () => {
      await using dir = tempDir();
      const file = write(dir.path, "file.json", v.body);
      const argv = ["verify-receipt", file, "--keys", v.keys === "approver" ? DECISION_VECTOR_JWKS : VECTOR_JWKS];
      if (v.args !== undefined && v.keys === "desk") argv.push("--args", write(dir.path, "args.json", v.args));
      if (v.approverKeys) argv.push("--approver-keys", DECISION_VECTOR_JWKS);
      const failed = v.stdout.filter((line) => line.startsWith("FAILED")).length;
      const what = v.name.startsWith("decision-") ? "decision record" : "receipt";
      expect(await runBinary(argv)).toEqual({
        code: v.exit,
        stdout: `${v.stdout.join("\n")}\n`,
        stderr: v.exit === 0 ? "" : `ask-only: error: the ${what} did not verify (${failed} ${failed === 1 ? "check" : "checks"} failed)\n`,
      });
    });
  }
});

describe("verify-receipt --jsonl on an export of decision records", () => {
  const run = async (text: string, keys = DECISION_VECTOR_JWKS) => {
    await using dir = tempDir();
    return await runBinary(["verify-receipt", "--jsonl", write(dir.path, "decisions.jsonl", text), "--keys", keys]);
  };

  test("the intact export: one summary line, exit 0 (CRLF and blank lines tolerated)", async () => {
    expect(await run(`${exportLines.join("\n")}\n`)).toEqual({ code: 0, stdout: "6 decision records: 6 ok, 0 failed; chain intact\n", stderr: "" });
    expect((await run(`${exportLines.join("\r\n")}\r\n\r\n`)).stdout).toBe("6 decision records: 6 ok, 0 failed; chain intact\n");
  });

  test("a record left out, or two swapped, breaks the chain at the line where it shows", async () => {
    const dropped = await run(`${[exportLines[0], ...exportLines.slice(2)].join("\n")}\n`);
    expect(dropped).toEqual({
      code: 1,
      stdout:
        "line 2: FAILED chain: seq 3 after seq 1; expected seq 2 (a record is missing or out of order)\n5 decision records: 5 ok, 0 failed; 1 chain break\n",
      stderr: "ask-only: error: the export did not verify\n",
    });
    const swapped = await run(`${[exportLines[1], exportLines[0], ...exportLines.slice(2)].join("\n")}\n`);
    expect(swapped.code).toBe(1);
    expect(swapped.stdout).toStartWith("line 1: FAILED chain: seq 2 as the first record; expected seq 1");
  });

  test("one altered line fails its own checks and names the line", async () => {
    const altered = JSON.parse(exportLines[2]!);
    altered.decision.decision = "approved";
    const r = await run(`${[...exportLines.slice(0, 2), JSON.stringify(altered), ...exportLines.slice(3)].join("\n")}\n`);
    expect(r).toEqual({
      code: 1,
      stdout: "line 3: FAILED readable copy: differs from signed payload at decision\n6 decision records: 5 ok, 1 failed; chain intact\n",
      stderr: "ask-only: error: the export did not verify\n",
    });
  });

  test("a desk receipt among decision records is refused as a line of its own", async () => {
    const receiptLine = JSON.stringify(JSON.parse(readVectors(DECISION_VECTOR_DIR).find((v) => v.name === "receipt-denied.vector")!.body).receipt);
    const r = await run(`${[...exportLines, receiptLine].join("\n")}\n`);
    expect(r.code).toBe(1);
    expect(r.stdout).toContain("line 7: FAILED shape: an export of decision records holds decision envelopes {payload, signature, kid, decision} only\n");
  });

  test("checked with the desk's keys, every record fails: unknown kid", async () => {
    const r = await run(`${exportLines.join("\n")}\n`, VECTOR_JWKS);
    expect(r.code).toBe(1);
    expect(r.stdout).toEndWith("6 decision records: 0 ok, 6 failed; chain intact\n");
  });
});

describe("what verify-receipt refuses around decisions", () => {
  test("--args or --approver-keys with a decision record is a usage error", async () => {
    await using dir = tempDir();
    const file = write(dir.path, "d.json", readVectors(DECISION_VECTOR_DIR).find((v) => v.name === "decision-denied.vector")!.body);
    const args = write(dir.path, "a.json", "{}");
    expect(await runBinary(["verify-receipt", file, "--keys", DECISION_VECTOR_JWKS, "--args", args])).toEqual({
      code: 2,
      stdout: "",
      stderr: `ask-only: error: --args goes with a desk receipt; ${file} is a decision record\nask-only: hint: check a decision record with --keys and the approver's key set only; run 'ask-only verify-receipt --help' for usage\n`,
    });
    expect((await runBinary(["verify-receipt", file, "--keys", DECISION_VECTOR_JWKS, "--approver-keys", DECISION_VECTOR_JWKS])).code).toBe(2);
    const exported = write(dir.path, "e.jsonl", `${exportLines.join("\n")}\n`);
    expect((await runBinary(["verify-receipt", "--jsonl", exported, "--keys", DECISION_VECTOR_JWKS, "--approver-keys", DECISION_VECTOR_JWKS])).code).toBe(2);
  });

  test("an approver key set with a private member is refused, naming --approver-keys' file", async () => {
    await using dir = tempDir();
    const jwks = JSON.parse(readFileSync(DECISION_VECTOR_JWKS, "utf8"));
    jwks.keys[0].d = "AAAA";
    const bad = write(dir.path, "approver.json", JSON.stringify(jwks));
    const receipt = write(dir.path, "r.json", readVectors(DECISION_VECTOR_DIR).find((v) => v.name === "receipt-denied.vector")!.body);
    expect(await runBinary(["verify-receipt", receipt, "--keys", VECTOR_JWKS, "--approver-keys", bad])).toEqual({
      code: 1,
      stdout: "",
      stderr: `ask-only: error: ${bad} is not a decision key set: keys[0] holds private key material ("d")\nask-only: hint: ask-only approver --print-decision-keys prints it\n`,
    });
  });
});
