// Splits a desk CPU profile (`bun scripts/bench/desk.ts --profile DIR`) into the clearing path's
// stages: each sample goes to the first stage (in this order) that has a frame on its stack.
// Usage: bun scripts/bench/desk-profile.ts DIR/CPU....cpuprofile
import { argv } from "node:process";
type CallFrame = { functionName: string; url: string; lineNumber: number };
type ProfileNode = { id: number; callFrame: CallFrame; children?: number[] };
type Profile = { nodes: ProfileNode[]; samples: number[] };

const file = argv[2];
if (!file) throw new Error("usage: bun scripts/bench/desk-profile.ts FILE.cpuprofile");
const profile = (await Bun.file(file).json()) as Profile;
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parentOf = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);

const STAGES: [string, (f: CallFrame) => boolean][] = [
  ["receipt signing (canonical JSON, checks, Ed25519, envelope)", (f) => f.url.endsWith("core/desk/receipt-maker.ts")],
  ["upstream MCP client (SDK, zod, fetch)", (f) => /@modelcontextprotocol|\/zod\/|commands\/desk\/upstream\.ts/.test(f.url)],
  ["key lookup (sha256 + SELECT by lookup)", (f) => f.functionName === "validKey"],
  ["ledger writes (group commit: statements, savepoints, COMMIT)", (f) => f.functionName === "flush" && f.url.includes("adapters/sqlite/desk/")],
  ["argument validation (Ajv)", (f) => /\/ajv\//.test(f.url)],
  ["params / result hashes (RFC 8785 + sha256)", (f) => /^(paramsSha256|resultSha256|hashJson)$/.test(f.functionName)],
  ["body reading (readJson)", (f) => f.functionName.includes("readJson")],
  ["clearing path, rest", (f) => f.url.endsWith("core/desk/clearing.ts")],
  ["HTTP handler, rest (routing, headers, Response.json)", (f) => f.url.endsWith("commands/desk/http.ts")],
  ["other JS of the desk", (f) => f.url.includes("/src/")],
];
const OUTSIDE = "native without JS frames (Bun.serve, event loop, GC)";

const counts = new Map<string, number>();
for (const sample of profile.samples) {
  const frames: CallFrame[] = [];
  for (let id: number | undefined = sample; id !== undefined; id = parentOf.get(id)) frames.push(byId.get(id)!.callFrame);
  const stage = STAGES.find(([, test]) => frames.some(test))?.[0] ?? OUTSIDE;
  counts.set(stage, (counts.get(stage) ?? 0) + 1);
}
const total = profile.samples.length;
console.log(`${total} samples`);
for (const [stage, n] of [...counts].sort((a, b) => b[1] - a[1])) console.log(`${((100 * n) / total).toFixed(1).padStart(5)}%  ${stage}`);
