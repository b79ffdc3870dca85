// A document no one here wrote: the Petstore of @readme/oas-examples, 3.0 and 3.1, turned into
// tools as written and every tool called against a server that answers from that same document.
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RestUpstreamClient } from "../../src/adapters/rest-upstream/client.ts";
import { compileArgsSchema } from "../../src/core/desk/args.ts";
import { meaningOf } from "../../src/core/rest/answer.ts";
import { toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { NO_CREDENTIAL } from "../../src/core/upstream/credential.ts";
import { type Jwks, verifyResponse } from "../../src/core/receipt/index.ts";
import { type MockServer, startOpenApiMock } from "../fixtures/openapi-mock.ts";
import { makeDesk } from "./desk-harness.ts";

type Schema = Record<string, unknown>;

/** Arguments an agent could send: every property, each a value its schema accepts. */
function argsFor(schema: Schema, root: Schema, depth = 0): unknown {
  if (typeof schema.$ref === "string") return argsFor((root.$defs as Record<string, Schema>)[schema.$ref.slice("#/$defs/".length)]!, root, depth);
  if (Array.isArray(schema.examples)) return schema.examples[0];
  if (schema.default !== undefined) return schema.default;
  if (Array.isArray(schema.enum)) return schema.enum[0];
  const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
  if (type === "object" || schema.properties) {
    const out: Record<string, unknown> = {};
    if (depth < 4) for (const [k, v] of Object.entries((schema.properties ?? {}) as Record<string, Schema>)) out[k] = argsFor(v, root, depth + 1);
    return out;
  }
  if (type === "array") return [argsFor((schema.items ?? {}) as Schema, root, depth + 1)];
  if (type === "integer" || type === "number") return 7;
  if (type === "boolean") return true;
  return "doggie";
}

const mocks: MockServer[] = [];
afterAll(() => Promise.all(mocks.map((m) => m.stop())));

for (const version of ["3.0", "3.1"]) {
  describe(`Petstore ${version}`, () => {
    const doc = JSON.parse(readFileSync(join(import.meta.dir, `../../node_modules/@readme/oas-examples/${version}/json/petstore.json`), "utf8"));

    test("every tool called as an agent would: the outcome its document promises, answers that fit their output schema", async () => {
      const mock = startOpenApiMock(doc, "/v2");
      mocks.push(mock);
      const { tools } = await toolsFromOpenApi("petstore", doc);
      const client = new RestUpstreamClient({ name: "petstore", baseUrl: new URL(`${mock.url}/v2`), tools, credential: NO_CREDENTIAL, timeoutMs: 5_000 });
      const kinds: Record<string, string> = {};
      for (const tool of tools) {
        const args = argsFor(tool.inputSchema, tool.inputSchema) as Record<string, unknown>;
        expect(compileArgsSchema(tool.inputSchema)(args)).toEqual([]);
        const before = mock.seen.length;
        const outcome = await client.call(tool.name, args);
        kinds[tool.name] = outcome.kind;
        // Exactly one request, on the operation's own path under base_url.
        expect(mock.seen.length - before).toBe(1);
        const seen = mock.seen[before]!;
        expect(seen.method).toBe(tool.operation.method.toUpperCase());
        const pattern = new RegExp(`^/v2${tool.operation.path.replace(/\{[^}]+\}/g, "[^/]+")}$`);
        expect(seen.path).toMatch(pattern);
        // What the document says the success answer is decides the outcome.
        const responses = Object.keys((doc.paths[tool.operation.path][tool.operation.method] as { responses: object }).responses);
        const promised = responses.some((c) => /^2\d\d$/.test(c)) || responses.includes("default") ? "ok" : meaningOf(Number(responses.sort()[0]));
        expect(`${tool.name}: ${outcome.kind}`).toBe(`${tool.name}: ${promised === "auth_refused" ? "auth_failed" : promised}`);
        if (outcome.kind === "ok" && tool.outputSchema) {
          expect(compileArgsSchema(tool.outputSchema)(outcome.result.structuredContent)).toEqual([]);
        }
      }
      // The document's own answers: pets, orders, users and the inventory come back as data.
      expect(kinds.getPetById).toBe("ok");
      expect(kinds.findPetsByStatus).toBe("ok");
      expect(kinds.getInventory).toBe("ok");
      expect(kinds.placeOrder).toBe("ok");
      // addPet and updatePet declare only error answers (405, 400, 404): the desk refunds them.
      expect(kinds.addPet).toBe("upstream_error");
      expect(kinds.updatePet).toBe("args_refused");
    });

    test("registered with the desk as written: every tool cleared, charged or refunded as its document promises, every receipt verified", async () => {
      const mock = startOpenApiMock(doc, "/v2");
      mocks.push(mock);
      await using t = await makeDesk();
      const r = await t.admin("POST", "/admin/upstreams", { name: "petstore", base_url: `${mock.url}/v2`, openapi: doc });
      expect(r.status).toBe(201);
      const { tools: names } = (await r.json()) as { tools: string[] };
      const { tools } = await toolsFromOpenApi("petstore", doc);
      expect(names).toEqual(tools.map((x) => `petstore__${x.name}`));
      for (const name of names) expect((await t.admin("PUT", `/admin/tools/${name}`, { price_mc: 100, upstream_cost_mc: 10 })).status).toBe(200);
      const k = await t.makeKey({ budget_mc: 1_000_000, reset: "none", allow: names });
      const jwks = (await (await t.handler(new Request("http://desk.test/.well-known/receipt-signing-key.json"))).json()) as Jwks;
      const OUTCOMES: Record<string, string> = {
        ok: "charged",
        args_refused: "refunded_args_refused",
        auth_refused: "refunded_upstream_error",
        upstream_error: "refunded_upstream_error",
      };
      let charged = 0;
      for (const tool of tools) {
        const args = argsFor(tool.inputSchema, tool.inputSchema) as Record<string, unknown>;
        const res = await t.call(k.secret, `petstore__${tool.name}`, args);
        const body = (await res.json()) as Record<string, unknown>;
        const responses = Object.keys((doc.paths[tool.operation.path][tool.operation.method] as { responses: object }).responses);
        const promised = responses.some((c) => /^2\d\d$/.test(c)) || responses.includes("default") ? "ok" : meaningOf(Number(responses.sort()[0]));
        expect(`${tool.name}: ${res.headers.get("x-clearing-outcome")}`).toBe(`${tool.name}: ${OUTCOMES[promised]}`);
        expect(verifyResponse(body, jwks, args).every((c) => c.ok)).toBe(true);
        if (promised === "ok") charged++;
      }
      expect(charged).toBeGreaterThan(4);
      expect((await t.ledger.keys.get(k.keyId))!.spentMc).toBe(charged * 100);
    });

    test("query arrays go as form, explode (the document's default); a path parameter as its one segment", async () => {
      const mock = startOpenApiMock(doc, "/v2");
      mocks.push(mock);
      const { tools } = await toolsFromOpenApi("petstore", doc);
      const client = new RestUpstreamClient({ name: "petstore", baseUrl: new URL(`${mock.url}/v2`), tools, credential: NO_CREDENTIAL, timeoutMs: 5_000 });
      const found = await client.call("findPetsByStatus", { status: ["available", "sold"] });
      expect(found).toMatchObject({ kind: "ok", result: { structuredContent: { value: [{ name: "doggie" }] } } });
      expect(mock.seen.at(-1)).toEqual({ method: "GET", path: "/v2/pet/findByStatus", search: "?status=available&status=sold" });
      await client.call("getUserByName", { username: "../store/inventory" });
      expect(mock.seen.at(-1)!.path).toBe("/v2/user/..%2Fstore%2Finventory");
      await client.call("deletePet", { petId: 3, api_key: "k" });
      expect(mock.seen.at(-1)).toMatchObject({ method: "DELETE", path: "/v2/pet/3" });
    });
  });
}
