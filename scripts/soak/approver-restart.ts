// `npm run soak:approver`: a stream of asks (the HTTP API over mTLS) and of decisions typed on
// the console, while the approver (`dist/ask-only approver`) is killed mid-stream, by SIGKILL
// and by SIGTERM in turn, and restarted on the same ledger and port.
// Usage: bun scripts/soak/approver-restart.ts [--cycles N] [--asks N] [--seed S]
//
// Promised and checked: nothing pending is lost (every ask that got 201 is still there, with
// the expiry it was given); nothing decided changes (every decision the console confirmed reads
// the same, with the same ref, after every restart; deciding it again says "already decided");
// no id is accepted twice (every accepted id sent again after a restart gets 409). An ask or a
// decision cut by a kill before its answer may have landed or not, but never half: such an ask
// is absent or stored whole; such a decision is absent or recorded whole (approved with a ref).
import { join } from "node:path";
import { mintApprovalId } from "../../src/core/ids.ts";
import { AskLedger } from "../../src/adapters/sqlite/asks.ts";
import { approverFiles, writeLink } from "../../test/helpers/approver-link.ts";
import { type ApproverProcess, startApprover } from "../../test/helpers/approver-process.ts";
import { tempDir } from "../../test/helpers/tmp.ts";
import { seededRandom } from "../lib/seeded-random.ts";

export type RestartSoakOptions = {
  /** Kill-and-restart cycles; signals alternate SIGKILL, SIGTERM. */
  cycles: number;
  /** Asks accepted in each cycle before its kill. */
  asksPerCycle: number;
  /** Decisions confirmed in each cycle before its kill. */
  decisionsPerCycle: number;
  seed: number;
  /** Senders posting asks at once. */
  senders?: number;
};

export type RestartSoakSummary = {
  cycles: number;
  seed: number;
  kills: Record<string, number>;
  asksSent: number;
  accepted: number;
  /** Asks whose answer a kill cut off (may have landed or not). */
  cutAsks: number;
  cutAsksStored: number;
  decisionsConfirmed: number;
  cutDecisions: number;
  cutDecisionsRecorded: number;
  replaysRefused: number;
  redecisionsRefused: number;
  elapsedMs: number;
  failures: string[];
};

const PAY = { merchant: "Example Shop", amount: "19.00", currency: "EUR", card_handle: "card-2", checkout_url: "https://shop.example/checkout/123" };
const ACCOUNT = { provider_url: "https://provider.example/signup", identity_handle: "work" };

type Decided = { state: "approved" | "denied"; ref?: string };

export async function run(options: RestartSoakOptions): Promise<RestartSoakSummary> {
  const { cycles, asksPerCycle, decisionsPerCycle, seed, senders = 4 } = options;
  const rnd = seededRandom(seed);
  const failures: string[] = [];
  const kills: Record<string, number> = {};
  /** Asks that got 201, with the expiry they were given. */
  const accepted = new Map<string, string>();
  /** Asks whose answer never came (a kill cut the exchange), until they are sent again. */
  const cut = new Set<string>();
  /** Cut asks that had landed (409 when sent again), and those that had not (201). */
  const cutLanded = new Set<string>();
  const cutAbsent = new Set<string>();
  const decided = new Map<string, Decided>();
  /** Decisions typed but not confirmed before a kill. */
  const cutDecisions = new Map<string, "approved" | "denied">();
  let asksSent = 0;
  let replaysRefused = 0;
  let redecisionsRefused = 0;

  await using dir = tempDir("ask-only-soak-approver-");
  const link = await writeLink(dir.path);
  const db = join(dir.path, "asks.db");
  const tls = {
    cert: await Bun.file(link.clientCert).text(),
    key: await Bun.file(link.clientKey).text(),
    ca: await Bun.file(link.approverCa).text(),
  };
  const start = (listen?: string) => startApprover({ files: approverFiles(link), db, ttl: "1h", maxPending: 100_000, listen });
  let ap: ApproverProcess = await start();
  const listen = `127.0.0.1:${ap.port}`;
  const url = `https://localhost:${ap.port}`;
  const started = performance.now();

  /** The approver is up: a promise that resolves when it is (again). */
  let up = Promise.resolve();
  let markUp = () => {};
  let stopping = false;
  const acceptWaiters: (() => void)[] = [];
  /** Resolves when the next ask is accepted. */
  const nextAccepted = () => new Promise<void>((wake) => acceptWaiters.push(wake));

  const post = async (id: string, kind: "pay" | "account") =>
    fetch(`${url}/v1/asks/${kind}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ approval_id: id, ...(kind === "pay" ? PAY : ACCOUNT) }),
      tls,
      keepalive: true,
    });

  // Senders: fresh asks, one after another, whether or not the approver is up.
  const sender = async () => {
    while (!stopping) {
      const id = mintApprovalId();
      asksSent++;
      try {
        const res = await post(id, rnd() < 0.7 ? "pay" : "account");
        const body = (await res.json()) as { approval_id?: string; expires_at?: string; error?: string };
        if (res.status === 201 && body.approval_id === id && typeof body.expires_at === "string") {
          accepted.set(id, body.expires_at);
          for (const wake of acceptWaiters.splice(0)) wake();
        } else failures.push(`fresh ask ${id} answered ${res.status} ${JSON.stringify(body)}`);
      } catch {
        // Cut by a kill (or refused while down): it may have been stored or not.
        cut.add(id);
        await up;
      }
    }
  };

  // The person: decides pending asks on the console, and waits for the confirmation.
  const undecided = () => [...accepted.keys()].filter((id) => !decided.has(id) && !cutDecisions.has(id));
  const decideOne = async (): Promise<boolean> => {
    const pool = undecided();
    if (pool.length === 0) return false;
    const id = pool[Math.floor(rnd() * pool.length)]!;
    const verb = rnd() < 0.5 ? "approve" : "deny";
    const current = ap;
    const at = current.type(`${verb} ${id}`);
    let m: RegExpExecArray;
    try {
      // Any answer the console gives about this id, so a wrong one fails at once.
      m = await current.out.waitFor(
        new RegExp(`^${id}: (?:(approved): .*\\n {2}(demo-[0-9a-f]{8}): no money moved.*|(denied): .*|(?!approved: |denied: )(.*))$`, "m"),
        at,
      );
    } catch {
      // The kill came first: the decision may have been recorded or not.
      cutDecisions.set(id, verb === "approve" ? "approved" : "denied");
      return false;
    }
    const [, approved, ref, denied, other] = m;
    if (approved && verb === "approve") decided.set(id, { state: "approved", ref: ref! });
    else if (denied && verb === "deny") decided.set(id, { state: "denied" });
    else {
      failures.push(`${verb} ${id} (accepted, never decided) was answered ${JSON.stringify(other ?? m[0])}`);
      return false;
    }
    return true;
  };

  /**
   * Accepted ids sent again are refused (a sample of them while the stream goes on, all of them
   * at the end); every confirmed decision reads the same.
   */
  const checkAfterRestart = async (cycle: number, all: boolean) => {
    // A snapshot: the senders keep adding while this runs.
    const ids = [...accepted.keys()];
    const sample = all ? ids : Array.from({ length: Math.min(100, ids.length) }, () => ids[Math.floor(rnd() * ids.length)]!);
    for (const id of sample) {
      const res = await post(id, rnd() < 0.5 ? "pay" : "account");
      const text = await res.text();
      if (res.status === 409 && text === '{"error":"ID_ALREADY_USED"}') replaysRefused++;
      else failures.push(`after restart ${cycle}: ${id} sent again answered ${res.status} ${text}`);
    }
    // Asks cut by the kill, sent again: 409 if the first one landed, else stored now (201).
    for (const id of [...cut]) {
      const res = await post(id, "pay");
      const body = (await res.json()) as { expires_at?: string };
      cut.delete(id);
      if (res.status === 409) cutLanded.add(id);
      else if (res.status === 201 && typeof body.expires_at === "string") {
        cutAbsent.add(id);
        accepted.set(id, body.expires_at);
      } else failures.push(`after restart ${cycle}: cut ask ${id} sent again answered ${res.status} ${JSON.stringify(body)}`);
    }
    for (const [id, d] of [...decided]) {
      const res = await fetch(`${url}/v1/asks/${id}`, { tls, keepalive: true });
      const body = await res.json();
      const want = d.ref === undefined ? { approval_id: id, state: d.state } : { approval_id: id, state: d.state, ref: d.ref };
      if (JSON.stringify(body) !== JSON.stringify(want))
        failures.push(`after restart ${cycle}: ${id} reads ${JSON.stringify(body)}, decided ${JSON.stringify(want)}`);
    }
    // The person tries to change a few decisions: the console refuses and nothing changes.
    for (const [id, d] of [...decided].slice(0, 3)) {
      const at = ap.type(`${d.state === "approved" ? "deny" : "approve"} ${id}`);
      try {
        await ap.out.waitFor(new RegExp(`^${id}: already decided \\(${d.state}\\)$`, "m"), at);
        redecisionsRefused++;
      } catch {
        failures.push(`after restart ${cycle}: deciding ${id} again did not say already decided`);
      }
    }
  };

  const senderLoops = Array.from({ length: senders }, sender);
  for (let cycle = 1; cycle <= cycles; cycle++) {
    const acceptedBefore = accepted.size;
    let confirmed = 0;
    while (accepted.size - acceptedBefore < asksPerCycle || confirmed < decisionsPerCycle) {
      if (confirmed < decisionsPerCycle && (await decideOne())) confirmed++;
      else await nextAccepted();
      if (failures.length > 0) break;
    }
    if (failures.length > 0) break;
    // Kill mid-stream: senders are posting, and one more decision is typed and not waited for.
    const signal = cycle % 2 === 1 ? "SIGKILL" : "SIGTERM";
    const pool = undecided();
    if (pool.length > 0) {
      const id = pool[Math.floor(rnd() * pool.length)]!;
      const verb = rnd() < 0.5 ? "approve" : "deny";
      ap.type(`${verb} ${id}`);
      cutDecisions.set(id, verb === "approve" ? "approved" : "denied");
    }
    ({ promise: up, resolve: markUp } = Promise.withResolvers<void>());
    ap.proc.kill(signal);
    const code = await ap.proc.exited;
    kills[signal] = (kills[signal] ?? 0) + 1;
    if (signal === "SIGTERM" && code !== 0) failures.push(`cycle ${cycle}: SIGTERM ended the approver with exit ${code}`);
    ap = await start(listen);
    markUp();
    await checkAfterRestart(cycle, false);
    if (failures.length > 0) break;
  }
  stopping = true;
  await Promise.all(senderLoops);
  await checkAfterRestart(cycles, true);
  const elapsedMs = performance.now() - started;
  await ap.stop();

  // The ledger itself, once the approver has stopped.
  let cutDecisionsRecorded = 0;
  {
    using ledger = AskLedger.open(db, () => new Date());
    for (const [id, expiresAt] of accepted) {
      const s = ledger.get(id);
      if (!s) {
        failures.push(`accepted ${id} is lost`);
        continue;
      }
      if (s.expires_at.toISOString() !== expiresAt) failures.push(`${id} expires at ${s.expires_at.toISOString()}, was given ${expiresAt}`);
      const d = decided.get(id);
      const cutD = cutDecisions.get(id);
      if (d) {
        if (s.state !== d.state || s.ref !== d.ref) failures.push(`${id} was ${d.state} ${d.ref ?? ""}, now ${s.state} ${s.ref ?? ""}`);
      } else if (cutD) {
        if (s.state === cutD) cutDecisionsRecorded++;
        else if (s.state !== "pending") failures.push(`${id}: a cut ${cutD} became ${s.state}`);
        if (s.state === "approved" && !s.ref) failures.push(`${id}: approved without a ref`);
      } else if (s.state !== "pending") failures.push(`${id} was never decided, and is ${s.state}`);
    }
    // A cut ask that answered 409 when sent again is in the ledger, whole.
    for (const id of cutLanded) if (!ledger.get(id)) failures.push(`cut ask ${id} answered 409 when sent again but is not in the ledger`);
    for (const id of cut) if (ledger.get(id)) cutLanded.add(id);
    const pendingNow = ledger.listPending();
    for (const s of pendingNow) {
      const id = s.ask.approval_id;
      if (!accepted.has(id) && !cutLanded.has(id)) failures.push(`${id} is pending but was never sent`);
    }
  }

  return {
    cycles,
    seed,
    kills,
    asksSent,
    accepted: accepted.size,
    cutAsks: cutLanded.size + cutAbsent.size + cut.size,
    cutAsksStored: cutLanded.size,
    decisionsConfirmed: decided.size,
    cutDecisions: cutDecisions.size,
    cutDecisionsRecorded,
    replaysRefused,
    redecisionsRefused,
    elapsedMs,
    failures,
  };
}

export function formatRestartSummary(s: RestartSoakSummary): string {
  const lines = [
    `soak:approver: seed ${s.seed}, ${s.cycles} kill-and-restart cycles (${Object.entries(s.kills)
      .map(([k, n]) => `${n} ${k}`)
      .join(", ")})`,
    `  asks sent ${s.asksSent}; accepted (201) ${s.accepted}, every one found after the last restart with its original expiry`,
    `  asks cut by a kill or sent while it was down ${s.cutAsks} (had landed whole: ${s.cutAsksStored}; had not, so stored when sent again: ${s.cutAsks - s.cutAsksStored})`,
    `  decisions confirmed on the console ${s.decisionsConfirmed}, each unchanged after every later restart`,
    `  decisions typed as the kill came ${s.cutDecisions} (recorded whole: ${s.cutDecisionsRecorded}, not recorded: ${s.cutDecisions - s.cutDecisionsRecorded})`,
    `  accepted ids sent again after restarts: ${s.replaysRefused} refused with 409; decisions typed again: ${s.redecisionsRefused} refused`,
    `${s.failures.length === 0 ? "ok" : `FAILED (${s.failures.length})`}: soak:approver in ${(s.elapsedMs / 1000).toFixed(1)} s`,
  ];
  for (const f of s.failures.slice(0, 30)) lines.push(`  ! ${f}`);
  return lines.join("\n");
}

if (import.meta.main) {
  const flag = (name: string, fallback: number) => {
    const i = process.argv.indexOf(name);
    return i === -1 ? fallback : Number(process.argv[i + 1]);
  };
  const seed = flag("--seed", (Date.now() ^ (Math.random() * 0x7fffffff)) | 0);
  const options = { cycles: flag("--cycles", 6), asksPerCycle: flag("--asks", 300), decisionsPerCycle: 30, seed };
  if (![options.cycles, options.asksPerCycle, seed].every(Number.isSafeInteger) || options.cycles < 1 || options.asksPerCycle < 1) {
    console.error("usage: bun scripts/soak/approver-restart.ts [--cycles N] [--asks N] [--seed S]");
    process.exit(2);
  }
  console.log(`scripts/soak/approver-restart.ts: seed ${seed} (replay the choices: --seed ${seed})`);
  const s = await run(options);
  console.log(formatRestartSummary(s));
  process.exit(s.failures.length === 0 ? 0 : 1);
}
