// The terminal voice of every command: one place that decides how errors, hints and
// information reach a person. Errors go to stderr as `ask-only: error: ...`.

/** A failure the command reports to a person; exit 1 for a failure, 2 for bad usage. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: 1 | 2,
    readonly hint?: string,
  ) {
    super(message);
    this.name = "CliError";
  }
}

export const failure = (message: string, hint?: string) => new CliError(message, 1, hint);
export const usageError = (message: string, hint?: string) => new CliError(message, 2, hint);

export type Streams = {
  out: (text: string) => void;
  err: (text: string) => void;
};

export const processStreams: Streams = {
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
};

export function printError(streams: Streams, message: string, hint?: string): void {
  streams.err(`ask-only: error: ${message}\n`);
  if (hint) streams.err(`ask-only: hint: ${hint}\n`);
}

export function info(streams: Streams, line: string): void {
  streams.err(`ask-only: ${line}\n`);
}
