// The compiled binary's help, version and usage errors: exit code, stdout and stderr together.
import { describe, expect, test } from "bun:test";
import pkg from "../../package.json" with { type: "json" };
import { runBinary } from "../helpers/binary.ts";

const SUBCOMMANDS = ["serve-mcp", "approver", "desk", "certs", "verify-receipt"];

describe("ask-only CLI", () => {
  test("--version prints the version baked in at build time", async () => {
    expect(await runBinary(["--version"])).toEqual({ code: 0, stdout: `${pkg.version}\n`, stderr: "" });
  });

  test("--help lists the five subcommands and examples", async () => {
    const r = await runBinary(["--help"]);
    expect(r.code).toBe(0);
    expect(r.stderr).toBe("");
    for (const name of SUBCOMMANDS) expect(r.stdout).toMatch(new RegExp(`^  ${name}\\b`, "m"));
    expect(r.stdout).toContain("Examples:");
  });

  for (const name of SUBCOMMANDS) {
    test(`${name} --help shows its usage with an Examples block`, async () => {
      const r = await runBinary([name, "--help"]);
      expect(r.code).toBe(0);
      expect(r.stderr).toBe("");
      expect(r.stdout).toStartWith(`Usage: ask-only ${name}`);
      expect(r.stdout).toContain("Examples:");
    });
  }

  test("no arguments prints usage on stderr and exits 2", async () => {
    const r = await runBinary([]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toContain("Usage: ask-only <command>");
  });

  test("an unknown command is a usage error", async () => {
    expect(await runBinary(["pay-now"])).toEqual({
      code: 2,
      stdout: "",
      stderr: "ask-only: error: unknown command 'pay-now'\nask-only: hint: run 'ask-only --help' for usage\n",
    });
  });

  test("an unknown option is a usage error", async () => {
    const r = await runBinary(["certs", "/tmp/x", "--approve-all"]);
    expect(r.code).toBe(2);
    expect(r.stdout).toBe("");
    expect(r.stderr).toStartWith("ask-only: error: unknown option '--approve-all'\n");
  });

  test("a missing argument is a usage error", async () => {
    const r = await runBinary(["certs"]);
    expect(r.code).toBe(2);
    expect(r.stderr).toStartWith("ask-only: error: missing required argument 'dir'\n");
  });
});
