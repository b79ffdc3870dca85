// The compiled desk (`dist/ask-only desk`) as a real process, for the reliability tests and the
// desk soak: started on a data directory, its URL read from its log line, stopped by signal.
import { BINARY, testEnv } from "./binary.ts";

export const DESK_TOKEN = "reliability-admin-token-0123456789abcdefghijklmnop";

/** Collects a stream's text as it arrives; `until` resolves when the text matches. */
export function collectText(stream: ReadableStream<Uint8Array>) {
  let text = "";
  const watchers: { re: RegExp; resolve: (m: RegExpExecArray) => void; reject: (e: Error) => void }[] = [];
  const done = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of stream as unknown as AsyncIterable<Uint8Array>) {
      text += decoder.decode(chunk, { stream: true });
      for (const w of [...watchers]) {
        const m = w.re.exec(text);
        if (m) {
          watchers.splice(watchers.indexOf(w), 1);
          w.resolve(m);
        }
      }
    }
    for (const w of watchers.splice(0)) w.reject(new Error(`stream ended without ${w.re}: ${text}`));
  })();
  return {
    text: () => text,
    done,
    until: (re: RegExp) =>
      new Promise<RegExpExecArray>((resolve, reject) => {
        const m = re.exec(text);
        if (m) return resolve(m);
        watchers.push({ re, resolve, reject });
      }),
  };
}

export type DeskProcess = {
  url: string;
  port: number;
  proc: ReturnType<typeof Bun.spawn>;
  stdout: () => string;
  stderr: () => string;
  /** Resolves when the desk's log (stderr) matches `re`. */
  untilLog(re: RegExp): Promise<RegExpExecArray>;
  admin(method: string, path: string, body?: unknown): Promise<Response>;
  /** SIGTERM and the exit code. */
  stop(): Promise<number>;
  /** SIGKILL and the exit code. */
  kill(): Promise<number>;
};

export type DeskProcessOptions = {
  /** The desk's environment (default: DESK_TOKEN as ASK_ONLY_DESK_ADMIN_TOKEN). */
  env?: Record<string, string>;
  /** The token `admin()` sends (default DESK_TOKEN). */
  token?: string;
};

/** Starts the binary on `data` and resolves once it listens (rejects if it exits first). */
export async function startDeskProcess(data: string, extraArgs: string[] = [], options: DeskProcessOptions = {}): Promise<DeskProcess> {
  const token = options.token ?? DESK_TOKEN;
  const proc = Bun.spawn([BINARY, "desk", "--listen", "127.0.0.1:0", "--data", data, ...extraArgs], {
    env: testEnv(options.env ?? { ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = collectText(proc.stdout as ReadableStream<Uint8Array>);
  const err = collectText(proc.stderr as ReadableStream<Uint8Array>);
  const m = await err.until(/desk listening on (https?:\/\/127\.0\.0\.1:(\d+))/);
  const url = m[1]!;
  const end = async (signal: "SIGTERM" | "SIGKILL") => {
    proc.kill(signal);
    const code = await proc.exited;
    await Promise.all([out.done, err.done]);
    return code;
  };
  return {
    url,
    port: Number(m[2]),
    proc,
    stdout: out.text,
    stderr: err.text,
    untilLog: err.until,
    admin: (method, path, body) =>
      fetch(`${url}${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { "content-type": "application/json" }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      }),
    stop: () => end("SIGTERM"),
    kill: () => end("SIGKILL"),
  };
}

/**
 * Starts a desk on `data` that is expected to refuse, and returns how it ended; one that starts
 * listening instead is killed at once and reported as "listening" (a check fails, never hangs).
 */
export function tryStartDesk(data: string): Promise<{ code: number | "listening"; stdout: string; stderr: string }> {
  return tryStartDeskWith(data, []);
}

/** tryStartDesk with more flags and variables. */
export async function tryStartDeskWith(
  data: string,
  extraArgs: string[],
  extraEnv: Record<string, string> = {},
): Promise<{ code: number | "listening"; stdout: string; stderr: string }> {
  const proc = Bun.spawn([BINARY, "desk", "--listen", "127.0.0.1:0", "--data", data, ...extraArgs], {
    env: testEnv({ ASK_ONLY_DESK_ADMIN_TOKEN: DESK_TOKEN, ...extraEnv }),
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = collectText(proc.stdout as ReadableStream<Uint8Array>);
  const err = collectText(proc.stderr as ReadableStream<Uint8Array>);
  const listening = err.until(/desk listening on/).then(
    () => "listening" as const,
    () => null,
  );
  const ended = await Promise.race([proc.exited, listening]);
  if (ended === "listening") proc.kill("SIGKILL");
  await proc.exited;
  await Promise.all([out.done, err.done]);
  return { code: ended === "listening" ? "listening" : proc.exitCode!, stdout: out.text(), stderr: err.text() };
}

/** The admin call's JSON, or an error naming the status (set-up steps that must succeed). */
export async function adminJson(desk: DeskProcess, method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const r = await desk.admin(method, path, body);
  if (r.status >= 300) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as Record<string, unknown>;
}

/** One call of a tool through the desk's REST API. */
export function callTool(url: string, secret: string, tool: string, args: unknown): Promise<Response> {
  return fetch(`${url}/v1/tools/${tool}`, {
    method: "POST",
    headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
    body: JSON.stringify(args),
  });
}
