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

  test("every usage error ends with the same hint, naming the help of the command at hand", async () => {
    const cases: [string[], string, string][] = [
      [["certs", "/tmp/x", "--approve-all"], "unknown option '--approve-all'", "run 'ask-only certs --help' for usage"],
      [["certs"], "missing required argument 'dir'", "run 'ask-only certs --help' for usage"],
      [["certs", "/tmp/x", "--host", "not a host"], '--host "not a host" is not a DNS name or an IP address', "run 'ask-only certs --help' for usage"],
      [["approver", "--max-pnding", "5"], "unknown option '--max-pnding'", "run 'ask-only approver --help' for usage"],
      [
        ["approver", "--cert", "c", "--key", "k", "--ca", "a", "--listen", "nowhere"],
        '--listen "nowhere" is not HOST:PORT',
        "e.g. --listen 127.0.0.1:8443; run 'ask-only approver --help' for usage",
      ],
      [["desk", "--upstream-timeout", "0"], "--upstream-timeout 0 is not a number of seconds between 0 and 600", "run 'ask-only desk --help' for usage"],
      [["desk", "check"], "desk check needs --data DIR or --database URL", "e.g. ask-only desk check --data ./desk-data; run 'ask-only desk --help' for usage"],
      [["serve-mcp", "extra"], "too many arguments for 'serve-mcp'. Expected 0 arguments but got 1.", "run 'ask-only serve-mcp --help' for usage"],
      [["verify-receipt", "r.json"], "--keys JWKS.json is required", "run 'ask-only verify-receipt --help' for usage"],
      [["verify-receipt", "r.json", "--keys", "k.json", "--trust-me"], "unknown option '--trust-me'", "run 'ask-only verify-receipt --help' for usage"],
    ];
    for (const [argv, error, hint] of cases) {
      expect({ argv, ...(await runBinary(argv)) }).toEqual({ argv, code: 2, stdout: "", stderr: `ask-only: error: ${error}\nask-only: hint: ${hint}\n` });
    }
  });
});
