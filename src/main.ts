// The ask-only program: one binary, five subcommands. This is the only top-level catch and the
// only place that picks exit codes: 0 ok, 1 failure, 2 usage.
import { Command, CommanderError, Option } from "commander";
import { APPROVER_FLAGS, CERTS_FLAGS, DESK_FLAGS, type Flag, VERIFY_RECEIPT_FLAGS } from "./cli/flags.ts";
import * as usage from "./cli/usage.ts";
import { CliError, printError, processStreams, usageError } from "./cli/voice.ts";
import type { ApproverFlags } from "./commands/approver/config.ts";
import type { DeskFlags } from "./commands/desk/index.ts";

declare const ASK_ONLY_VERSION: string | undefined;
const VERSION = typeof ASK_ONLY_VERSION === "string" ? ASK_ONLY_VERSION : "0.0.0-dev";

function withUsage(command: Command, text: string): Command {
  return command.configureHelp({ formatHelp: () => text }).helpOption("-h, --help");
}

const collect = (value: string, previous: string[]) => [...previous, value];

/** The command's options, from its table in cli/flags.ts (help is printed from the same table). */
function withFlags(command: Command, flags: readonly Flag[]): Command {
  for (const f of flags) {
    const option = new Option(f.value === undefined ? f.name : `${f.name} <${f.value.toLowerCase()}>`);
    if (f.repeatable) option.default([]).argParser(collect);
    command.addOption(option);
  }
  return command;
}

/** The subcommand being run, for the hint of a usage error (`ask-only approver --help`). */
let commandName: string | undefined;

function buildProgram(): Command {
  const program = new Command("ask-only")
    .version(VERSION, "-V, --version")
    .exitOverride()
    .showSuggestionAfterError(false)
    .configureOutput({
      writeOut: (s) => processStreams.out(s),
      writeErr: (s) => processStreams.err(s),
      outputError: () => {}, // reported by main() in the house format
    });
  withUsage(program, usage.PROGRAM_USAGE);
  program.hook("preSubcommand", (_program, sub) => {
    commandName ??= sub.name();
  });

  withUsage(withFlags(program.command("certs").argument("<dir>"), CERTS_FLAGS), usage.CERTS_USAGE).action(
    async (dir: string, opts: { host: string[]; desk?: boolean }) => {
      const { runCerts } = await import("./commands/certs.ts");
      await runCerts({ dir, hosts: opts.host, desk: opts.desk === true, streams: processStreams, now: new Date() });
    },
  );

  withUsage(program.command("serve-mcp"), usage.SERVE_MCP_USAGE).action(async () => {
    const { runServeMcp } = await import("./commands/serve-mcp/index.ts");
    await runServeMcp({ version: VERSION, streams: processStreams });
  });
  withUsage(withFlags(program.command("approver"), APPROVER_FLAGS), usage.APPROVER_USAGE).action(async (opts: ApproverFlags) => {
    const { runApprover } = await import("./commands/approver/index.ts");
    await runApprover(opts, processStreams);
  });
  const desk = withUsage(withFlags(program.command("desk"), DESK_FLAGS), usage.DESK_USAGE).action(async (flags: DeskFlags) => {
    const { runDesk } = await import("./commands/desk/index.ts");
    await runDesk({ flags, env: process.env, streams: processStreams });
  });
  // `desk check --data DIR`: commander hands --data to the parent desk command, so read it there.
  withUsage(desk.command("check"), usage.DESK_USAGE).action(async () => {
    const { data, database } = desk.opts<{ data?: string; database?: string }>();
    const { runDeskCheck } = await import("./commands/desk/index.ts");
    const { databaseTarget } = await import("./commands/desk/settings.ts");
    const target = databaseTarget({ database }, process.env);
    if (data === undefined && target === null) {
      throw usageError("desk check needs --data DIR or --database URL", "e.g. ask-only desk check --data ./desk-data");
    }
    await runDeskCheck({ data, database: target, streams: processStreams, env: process.env });
  });
  withUsage(withFlags(program.command("verify-receipt").argument("[response]"), VERIFY_RECEIPT_FLAGS), usage.VERIFY_RECEIPT_USAGE).action(
    async (
      response: string | undefined,
      opts: { keys?: string; args?: string; jsonl?: string; approverKeys?: string; receipts?: string; records?: string },
    ) => {
      const { runVerifyReceipt } = await import("./commands/verify-receipt.ts");
      await runVerifyReceipt({ response, ...opts, streams: processStreams });
    },
  );
  return program;
}

function commanderMessage(err: CommanderError): string {
  return err.message.replace(/^error: /, "");
}

/** Every usage error ends with the same pointer to the help of the command at hand. */
function usageHint(advice?: string): string {
  const help = `run 'ask-only ${commandName === undefined ? "" : `${commandName} `}--help' for usage`;
  return advice ? `${advice}; ${help}` : help;
}

export async function main(argv: string[]): Promise<number> {
  const program = buildProgram();
  if (argv.length === 0) {
    processStreams.err(usage.PROGRAM_USAGE);
    return 2;
  }
  try {
    await program.parseAsync(argv, { from: "user" });
    return 0;
  } catch (err) {
    if (err instanceof CliError) {
      printError(processStreams, err.message, err.exitCode === 2 ? usageHint(err.hint) : err.hint);
      return err.exitCode;
    }
    if (err instanceof CommanderError) {
      if (err.code === "commander.helpDisplayed" || err.code === "commander.version") return 0;
      printError(processStreams, commanderMessage(err), usageHint());
      return 2;
    }
    printError(processStreams, `unexpected failure: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
}

process.exitCode = await main(process.argv.slice(2));
