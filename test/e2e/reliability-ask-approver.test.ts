// The approver under hostile requests (SPEC 7.1), with the compiled binary over real mTLS: a
// small run of the fuzzer of `npm run fuzz:approver`, and the faults it found, each pinned.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { pathOf } from "../../src/core/http/routes.ts";
import { mintApprovalId } from "../../src/core/ids.ts";
import { run, send, type Tls } from "../../scripts/fuzz/approver.ts";
import { formatSummary } from "../../scripts/fuzz/common.ts";
import { approverFiles, type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { type ApproverProcess, startApprover } from "../helpers/approver-process.ts";
import { tempDir } from "../helpers/tmp.ts";

setDefaultTimeout(120_000);
const SEED = Number(process.env.FUZZ_SEED ?? 20261130);

test("fuzz: 300 random and malformed requests; never a 5xx, every answer a code or a valid shape, state only from 201s", async () => {
  const s = await run({ runs: 300, seed: SEED, concurrency: 8 });
  if (s.failures.length > 0) console.log(formatSummary("fuzz:approver", s, { kinds: s.byKind, answers: s.byAnswer }));
  expect(s.failures).toEqual([]);
  // The run tried what it claims to try, and some asks were stored.
  for (const kind of ["valid-ask", "wrong-type", "unicode-field", "card-number", "bad-json", "dribble", "wrong-route", "content-type", "replay"]) {
    expect(s.byKind[kind] ?? 0).toBeGreaterThan(0);
  }
  expect(s.accepted).toBeGreaterThan(10);
  expect(s.byAnswer["409 ID_ALREADY_USED"] ?? 0).toBeGreaterThan(0);
  expect(s.byAnswer["413 BODY_TOO_LARGE"] ?? 0).toBeGreaterThan(0);
});

describe("pinned: faults the fuzzer found, and clients that stall", () => {
  const dir = tempDir("ask-only-reliability-approver-");
  let link: LinkPaths;
  let ap: ApproverProcess;
  let tls: Tls;
  beforeAll(async () => {
    link = await writeLink(dir.path);
    tls = { cert: readFileSync(link.clientCert), key: readFileSync(link.clientKey), ca: readFileSync(link.approverCa) };
    ap = await startApprover({ files: approverFiles(link), db: join(dir.path, "asks.db") });
  });
  afterAll(async () => {
    await ap?.stop();
    dir[Symbol.dispose]();
  });
  const raw = (text: string, abortMs?: number) => send(ap.port, tls, [new TextEncoder().encode(text)], 0, abortMs, false);

  test("a Host header that is no host gets the route's answer, not a 500 INTERNAL", async () => {
    for (const head of [
      "GET /v1/asks/K7Q2M4XZ3A HTTP/1.0\r\n",
      "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: a b\r\n",
      "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: [::1\r\n",
      "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: x:99999\r\n",
      "GET /v1/asks/K7Q2M4XZ3A HTTP/1.1\r\nHost: %zz\r\n",
    ]) {
      const a = await raw(`${head}Connection: close\r\n\r\n`);
      expect("status" in a && [a.status, a.body]).toEqual([404, '{"error":"ASK_NOT_FOUND"}']);
    }
    const body = JSON.stringify({ approval_id: mintApprovalId(), provider_url: "https://provider.example/" });
    const a = await raw(
      `POST /v1/asks/account HTTP/1.1\r\nHost: x:99999\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
    );
    expect("status" in a && a.status).toBe(201);
    expect(ap.err.text).not.toContain("fault");
  });

  test("the path is read without the host: query and fragment dropped, dot segments resolved, // kept", () => {
    expect(pathOf("http://a b/v1/asks/pay?x=1")).toBe("/v1/asks/pay");
    expect(pathOf("/v1/asks/pay#f")).toBe("/v1/asks/pay");
    expect(pathOf("http://h//evil/v1/asks/pay")).toBe("//evil/v1/asks/pay");
    expect(pathOf("https://[::1/v1/asks/../asks/account")).toBe("/v1/asks/account");
    expect(pathOf("")).toBe("/");
  });

  test("200 connections stalled mid-body do not keep the approver from answering others at once", async () => {
    const stalled = await Promise.all(
      Array.from(
        { length: 200 },
        () =>
          new Promise<TLSSocket>((resolve) => {
            const socket = connect({ host: "127.0.0.1", port: ap.port, servername: "localhost", ...tls }, () => {
              socket.write("POST /v1/asks/pay HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{");
              resolve(socket);
            });
            socket.on("error", () => {});
          }),
      ),
    );
    try {
      const body = JSON.stringify({ approval_id: mintApprovalId(), provider_url: "https://provider.example/" });
      const t = performance.now();
      const created = await raw(
        `POST /v1/asks/account HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`,
      );
      const read = await raw(`GET /v1/asks/${mintApprovalId()} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
      expect("status" in created && created.status).toBe(201);
      expect("status" in read && read.body).toBe('{"error":"ASK_NOT_FOUND"}');
      expect(performance.now() - t).toBeLessThan(1_000);
    } finally {
      for (const socket of stalled) socket.destroy();
    }
  });

  test("a client that goes away mid-body is not a server fault, and the approver keeps serving", async () => {
    const a = await raw('POST /v1/asks/pay HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"appr', 20);
    expect(a).toEqual({ none: "client gave up" });
    const after = await raw(`GET /v1/asks/${mintApprovalId()} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n`);
    expect("status" in after && after.body).toBe('{"error":"ASK_NOT_FOUND"}');
    // The abort reaches the handler a moment after the next answer: wait for a line that would
    // follow it, then check that no fault was logged.
    ap.type("list");
    await ap.out.waitFor(/no pending asks|PAY|ACCOUNT/);
    expect(ap.err.text).not.toContain("fault");
  });
});
