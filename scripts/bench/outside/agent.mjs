// The outsider's agent: Node's own fetch (its built-in undici, keep-alive), never a client of
// ask-only. Reads its plan as JSON on argv[2], prints the latencies it measured as JSON.
//   sequential: one call after another, direct and via the desk interleaved
//   rate: a fixed rate over N lanes (each lane one request in flight at most, so at most N
//         connections); latency counts from the time a call was due, so a slow answer that
//         delays the next call is charged to the system, not hidden (no coordinated omission)
const plan = JSON.parse(process.argv[2]);
const args = JSON.stringify({ text: "x".repeat(plan.argBytes) });
let rpcId = 0;

async function direct() {
  const r = await fetch(plan.upstreamUrl, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: `{"jsonrpc":"2.0","id":${++rpcId},"method":"tools/call","params":{"name":"echo","arguments":${args}}}`,
  });
  const text = await r.text();
  if (r.status !== 200 || !text.includes('"result"')) throw new Error(`direct: ${r.status} ${text.slice(0, 200)}`);
}

async function viaDesk(key, tool = plan.tool, body = args, want = 200) {
  const r = await fetch(`${plan.deskUrl}/v1/tools/${tool}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body,
  });
  await r.arrayBuffer();
  if (r.status !== want) throw new Error(`desk ${tool}: ${r.status}, wanted ${want}`);
}

// Refusals cycle through four kinds; each refused key serves at most 20 (its hourly failure limit).
const REFUSALS = [
  (key) => viaDesk(key, plan.tool, args, 402),
  (key) => viaDesk(key, plan.otherTool, args, 403),
  (key) => viaDesk(key, `${plan.tool}_nope`, "{}", 404),
  (key) => viaDesk(key, plan.tool, '{"text":1}', 400),
];
let refused = 0;
const refusal = () => {
  const i = refused++;
  return REFUSALS[i % 4](plan.brokeKeys[Math.floor(i / 20)]);
};

const ms = (t0) => Number(process.hrtime.bigint() - t0) / 1e6;

async function sequential(calls) {
  const out = { direct: [], desk: [], refusal: [] };
  for (let i = 0; i < plan.warmCalls; i++) {
    await direct();
    await viaDesk(plan.keys[i % plan.keys.length]);
  }
  for (let i = 0; i < calls; i++) {
    let t = process.hrtime.bigint();
    await direct();
    out.direct.push(ms(t));
    t = process.hrtime.bigint();
    await viaDesk(plan.keys[i % plan.keys.length]);
    out.desk.push(ms(t));
  }
  for (let i = 0; i < plan.sequentialRefusals; i++) {
    const t = process.hrtime.bigint();
    await refusal();
    out.refusal.push(ms(t));
  }
  return out;
}

async function atRate(one, rate, lanes, seconds) {
  const latencies = [];
  const interval = (1000 * lanes) / rate;
  const start = performance.now() + 20;
  const perLane = Math.floor((rate * seconds) / lanes);
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      for (let k = 0; k < perLane; k++) {
        const due = start + (k + lane / lanes) * interval;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
        await one(lane);
        latencies.push(performance.now() - due);
      }
    }),
  );
  const elapsed = (performance.now() - start) / 1000;
  return { latencies, achieved: latencies.length / elapsed };
}

const result = { sequential: await sequential(plan.sequentialCalls) };
if (plan.rate > 0) {
  // Warm the concurrent paths of both sides, then measure each.
  await atRate(() => direct(), plan.rate, plan.lanes, 1);
  await atRate((lane) => viaDesk(plan.keys[lane]), plan.rate, plan.lanes, 1);
  result.rateDirect = await atRate(() => direct(), plan.rate, plan.lanes, plan.seconds);
  result.rateDesk = await atRate((lane) => viaDesk(plan.keys[lane]), plan.rate, plan.lanes, plan.seconds);
  result.rateRefusal = await atRate(() => refusal(), plan.rate, plan.lanes, plan.refusalSeconds);
}
console.log(JSON.stringify(result));
