// serve-mcp (the compiled binary) against approvers that are stuck or slow, each a real socket
// with the test certificates: one that accepts TCP and never speaks TLS, one that completes the
// mutual-TLS handshake and never answers, one that dribbles its answer a byte at a time. The
// agent gets APPROVER_TIMEOUT within the deadline (ASK_ONLY_PAY_TIMEOUT_MS), and meanwhile
// serve-mcp keeps answering what needs no approver. (ask-fake-approver.test.ts covers a handler
// that never answers and a body that stops; this file adds the transport-level cases, the
// timing bound, and service beside a stuck call.)
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from "node:net";
import { createServer as createTlsServer, type Server as TlsServer, type TLSSocket } from "node:tls";
import { type LinkPaths, writeLink } from "../helpers/approver-link.ts";
import { type LinkPems, makeLinkPems } from "../helpers/certs.ts";
import { connectServeMcp, type ServeMcp, serveMcpEnv } from "../helpers/mcp-client.ts";
import { tempDir } from "../helpers/tmp.ts";
import { PAY_FIELDS } from "../helpers/sample-asks.ts";

setDefaultTimeout(60_000);
const TIMEOUT_MS = 500;
/** Scheduling slack on a shared machine: the deadline plus this is the bound. */
const SLACK_MS = 1_500;

const PAY = { verb: "pay", ...PAY_FIELDS };

const dir = tempDir("ask-only-stuck-");
let pems: LinkPems;
let link: LinkPaths;
const servers: (TcpServer | TlsServer)[] = [];
const sockets = new Set<Socket>();

beforeAll(async () => {
  pems = await makeLinkPems();
  link = await writeLink(dir.path, pems);
}, 30_000);
afterAll(() => {
  for (const s of sockets) s.destroy();
  for (const s of servers) s.close();
  dir[Symbol.dispose]();
});

function listen(server: TcpServer | TlsServer): Promise<number> {
  servers.push(server);
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port)));
}

/** Accepts TCP connections and never sends a byte: the TLS handshake never completes. */
function silentTcp(): Promise<number> {
  return listen(
    createTcpServer((socket) => {
      sockets.add(socket);
      socket.on("error", () => {});
    }),
  );
}

/**
 * A mutual-TLS server that reads each request and then does what `answer` says with the socket.
 * `requests` counts the requests that arrived in full.
 */
function tlsApprover(answer: (socket: TLSSocket, body: Record<string, unknown>) => void): {
  port: Promise<number>;
  requests: () => number;
  /** Resolves when the n-th request has arrived. */
  arrived: (n: number) => Promise<void>;
} {
  let requests = 0;
  const waiters: { n: number; wake: () => void }[] = [];
  const server = createTlsServer(
    { cert: pems.approverCert, key: pems.approverKey, ca: pems.clientCa, requestCert: true, rejectUnauthorized: true },
    (socket) => {
      sockets.add(socket);
      socket.on("error", () => {});
      let buf = Buffer.alloc(0);
      socket.on("data", (d: Buffer) => {
        buf = Buffer.concat([buf, d]);
        const end = buf.indexOf("\r\n\r\n");
        if (end === -1) return;
        const length = Number(/content-length: *(\d+)/i.exec(buf.subarray(0, end).toString("latin1"))?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        const body = length > 0 ? (JSON.parse(buf.subarray(end + 4, end + 4 + length).toString("utf8")) as Record<string, unknown>) : {};
        buf = Buffer.alloc(0);
        requests++;
        for (const w of waiters.filter((w) => w.n <= requests)) w.wake();
        answer(socket, body);
      });
    },
  );
  const arrived = (n: number) =>
    new Promise<void>((wake) => {
      if (requests >= n) wake();
      else waiters.push({ n, wake });
    });
  return { port: listen(server), requests: () => requests, arrived };
}

const createdAnswer = (body: Record<string, unknown>) => {
  const json = JSON.stringify({ approval_id: body.approval_id, state: "pending", expires_at: "2026-11-30T10:10:00.000Z" });
  return `HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`;
};

/** Writes `text` in `pieces` writes, `gapMs` apart (stops if the peer went away). */
async function dribble(socket: TLSSocket, text: string, pieces: number, gapMs: number): Promise<void> {
  const size = Math.ceil(text.length / pieces);
  for (let i = 0; i < text.length; i += size) {
    if (socket.destroyed) return;
    socket.write(text.slice(i, i + size));
    await Bun.sleep(gapMs);
  }
}

async function timed<T>(work: Promise<T>): Promise<{ value: T; ms: number }> {
  const t = performance.now();
  const value = await work;
  return { value, ms: performance.now() - t };
}

const connect = (port: number, timeoutMs = TIMEOUT_MS) =>
  connectServeMcp(serveMcpEnv(link, `https://localhost:${port}`, { ASK_ONLY_PAY_TIMEOUT_MS: String(timeoutMs) }));

const TIMEOUT_RESULT = { sc: { error: "APPROVER_TIMEOUT" }, isError: true, text: '{"error":"APPROVER_TIMEOUT"}' };

describe("a stuck approver: APPROVER_TIMEOUT within the deadline", () => {
  test("accepts TCP, never speaks TLS", async () => {
    await using mcp = await connect(await silentTcp());
    const { value, ms } = await timed(mcp.request(PAY));
    expect(value).toEqual(TIMEOUT_RESULT);
    expect(ms).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    expect(mcp.stderr()).toContain("approver exchange failed: APPROVER_TIMEOUT");
  });

  test("completes the handshake, reads the request, never answers", async () => {
    const stuck = tlsApprover(() => {});
    await using mcp = await connect(await stuck.port);
    const { value, ms } = await timed(mcp.request({ verb: "status", approval_id: "K7Q2M4XZ3A" }));
    expect(value).toEqual(TIMEOUT_RESULT);
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
    expect(stuck.requests()).toBe(1);
  });

  test("dribbles a good answer a byte at a time, past the deadline: the deadline is for the whole answer, not between bytes", async () => {
    const slow = tlsApprover((socket, body) => void dribble(socket, createdAnswer(body), 200, 20));
    await using mcp = await connect(await slow.port);
    const { value, ms } = await timed(mcp.request(PAY));
    expect(value).toEqual(TIMEOUT_RESULT);
    expect(ms).toBeLessThan(TIMEOUT_MS + SLACK_MS);
  });

  test("a good answer dribbled within the deadline is accepted", async () => {
    const slow = tlsApprover((socket, body) => void dribble(socket, createdAnswer(body), 8, 10));
    await using mcp = await connect(await slow.port, 5_000);
    const r = await mcp.request(PAY);
    expect(r.isError).toBe(false);
    expect(r.sc.state).toBe("pending");
  });
});

describe("serve-mcp keeps serving beside stuck calls", () => {
  let mcp: ServeMcp;
  let stuck: ReturnType<typeof tlsApprover>;
  beforeAll(async () => {
    stuck = tlsApprover(() => {});
    // A long deadline here: the stuck calls must still be pending while the others are answered.
    mcp = await connect(await stuck.port, 2_000);
    await mcp.client.listTools();
  });
  afterAll(async () => {
    await mcp?.client.close();
  });

  test("tools/list and local refusals are answered at once while a call hangs", async () => {
    let hungDone = false;
    const hung = mcp.request(PAY).then((r) => {
      hungDone = true;
      return r;
    });
    // The hung call's request has reached the stuck approver: it is truly in flight.
    await stuck.arrived(1);

    const list = await timed(mcp.client.listTools());
    expect(list.value.tools.map((t) => t.name)).toEqual(["request"]);
    const card = await timed(mcp.request({ ...PAY, reason: "pay with 4111 1111 1111 1111" }));
    expect(card.value.sc).toEqual({ error: "CARD_NUMBER_REFUSED" });
    const amount = await timed(mcp.request({ ...PAY, amount: "19.001" }));
    expect(amount.value.sc).toEqual({ error: "AMOUNT_INVALID" });
    const status = await timed(mcp.request({ verb: "status", approval_id: "not-an-id" }));
    expect(status.value.sc).toEqual({ error: "APPROVAL_ID_INVALID" });
    expect(hungDone).toBe(false);
    for (const t of [list, card, amount, status]) expect(t.ms).toBeLessThan(1_000);

    expect(await hung).toEqual(TIMEOUT_RESULT);
    // Only the hung call reached the approver.
    expect(stuck.requests()).toBe(1);
  });

  test("stuck calls time out side by side, each on its own deadline, not one after another", async () => {
    const before = stuck.requests();
    const { value, ms } = await timed(Promise.all(Array.from({ length: 5 }, () => mcp.request(PAY))));
    for (const r of value) expect(r).toEqual(TIMEOUT_RESULT);
    expect(stuck.requests() - before).toBe(5);
    // Five deadlines of 2 s served in sequence would take 10 s.
    expect(ms).toBeLessThan(2_000 + SLACK_MS);
  });
});
