// Node.js as the outside peer: the scripts in test/node/ run under the real `node` (a child
// process), so the TLS and X.509 checks are OpenSSL's, not Bun's. Node is a prerequisite of the
// project (npm comes with it); `npm test` puts it on the PATH.
import { resolve } from "node:path";
import { OutputWatch } from "./approver-process.ts";
import { testEnv } from "./binary.ts";

const SCRIPTS = resolve(import.meta.dir, "../node");

/** Runs test/node/SCRIPT under node and parses the one JSON line it prints. */
export async function runNode<T>(script: string, args: string[]): Promise<T> {
  const proc = Bun.spawn(["node", resolve(SCRIPTS, script), ...args], { env: testEnv(), stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  if (code !== 0 || stderr !== "") throw new Error(`node ${script} exited ${code}: ${stderr}${stdout}`);
  return JSON.parse(stdout) as T;
}

export type NodeServer = {
  port: number;
  /** Every JSON line it printed after the first, as it arrives. */
  lines: () => Record<string, unknown>[];
  out: OutputWatch;
} & AsyncDisposable;

/** Starts test/node/SCRIPT under node as a server; resolves once it prints {"port": N}. */
export async function startNodeServer(script: string, args: string[]): Promise<NodeServer> {
  const proc = Bun.spawn(["node", resolve(SCRIPTS, script), ...args], { env: testEnv(), stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  const out = new OutputWatch(proc.stdout);
  const err = new OutputWatch(proc.stderr);
  const stop = async () => {
    proc.kill("SIGTERM");
    await proc.exited;
  };
  let port: number;
  try {
    port = Number((await out.waitFor(/^\{"port":(\d+)\}\n/))[1]);
  } catch (e) {
    await stop();
    throw new Error(`node ${script} did not start: ${(e as Error).message}\n${err.text}`);
  }
  return {
    port,
    out,
    lines: () =>
      out.text
        .split("\n")
        .slice(1)
        .filter((l) => l !== "")
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    [Symbol.asyncDispose]: stop,
  };
}
