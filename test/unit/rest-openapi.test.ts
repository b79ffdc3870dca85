// An OpenAPI document as the desk's tools: names, input schemas the desk's validator compiles,
// output schemas, the stored operations; and the document refused when it reaches outside itself.
import { afterAll, describe, expect, test } from "bun:test";
import { validate } from "@readme/openapi-parser";
import { constants, openSync, closeSync, readdirSync, readFileSync } from "node:fs";
import { open } from "node:fs/promises";
import { join } from "node:path";
import { compileArgsSchema } from "../../src/core/desk/args.ts";
import { DocumentRefused, PARSER_OPTIONS } from "../../src/core/rest/document.ts";
import { builtName, toolsFromOpenApi } from "../../src/core/rest/tools.ts";
import { tempDir } from "../helpers/tmp.ts";

const EXAMPLES = join(import.meta.dir, "../../node_modules/@readme/oas-examples");
const example = (version: string, file: string) => JSON.parse(readFileSync(join(EXAMPLES, version, "json", file), "utf8")) as Record<string, unknown>;

/** A minimal document around `paths` (and `components`). */
function doc(paths: Record<string, unknown>, extra: Record<string, unknown> = {}, openapi = "3.0.3") {
  return { openapi, info: { title: "t", version: "1" }, paths, ...extra };
}
const ok = { "200": { description: "ok" } };

async function refusal(promise: Promise<unknown>): Promise<string[]> {
  try {
    await promise;
  } catch (err) {
    if (err instanceof DocumentRefused) return err.problems;
    throw err;
  }
  throw new Error("the document was not refused");
}

describe("the Petstore documents, as written", () => {
  for (const version of ["3.0", "3.1"]) {
    test(`Petstore ${version}: one tool per operation, named by operationId, schemas the desk compiles`, async () => {
      const { tools, skipped } = await toolsFromOpenApi("petstore", example(version, "petstore.json"));
      expect(skipped).toEqual([]);
      expect(tools.map((t) => t.name)).toEqual([
        "addPet",
        "updatePet",
        "findPetsByStatus",
        "findPetsByTags",
        "getPetById",
        "updatePetWithForm",
        "deletePet",
        "uploadFile",
        "getInventory",
        "placeOrder",
        "getOrderById",
        "deleteOrder",
        "createUser",
        "createUsersWithArrayInput",
        "createUsersWithListInput",
        "loginUser",
        "logoutUser",
        "getUserByName",
        "updateUser",
        "deleteUser",
      ]);
      for (const t of tools) {
        const check = compileArgsSchema(t.inputSchema);
        expect(t.inputSchema.additionalProperties).toBe(false);
        expect(check({ surprise: 1 })).toContainEqual({ path: "/", rule: "additionalProperties" });
      }
      const byName = new Map(tools.map((t) => [t.name, t]));
      const addPet = byName.get("addPet")!;
      expect(addPet.operation).toEqual({
        method: "post",
        path: "/pet",
        parameters: [],
        body: { arg: "body", mediaType: "application/json", required: true },
        accept: "application/json",
      });
      const check = compileArgsSchema(addPet.inputSchema);
      expect(check({ body: { name: "rex", photoUrls: [] } })).toEqual([]);
      // id is readOnly: never required from the agent, still allowed.
      expect(check({ body: { name: "rex", photoUrls: [], id: 3 } })).toEqual([]);
      expect(check({ body: { name: "rex" } })).toEqual([{ path: "/body/photoUrls", rule: "required" }]);
      expect(check({})).toEqual([{ path: "/body", rule: "required" }]);

      const getPet = byName.get("getPetById")!;
      expect(getPet.operation.parameters).toEqual([{ name: "petId", in: "path", arg: "petId", required: true, style: "simple", explode: false }]);
      expect(compileArgsSchema(getPet.inputSchema)({ petId: "x" })).toEqual([{ path: "/petId", rule: "type" }]);
      expect(getPet.outputSchema?.required).toEqual(["name", "photoUrls"]);

      const del = byName.get("deletePet")!;
      expect(del.operation.parameters.map((p) => [p.in, p.arg, p.required])).toEqual([
        ["header", "api_key", false],
        ["path", "petId", true],
      ]);
      // A JSON array answer is carried as {"value": [...]}; its schema says so.
      expect(byName.get("findPetsByStatus")!.outputSchema).toMatchObject({ type: "object", required: ["value"], properties: { value: { type: "array" } } });
      // Form and multipart bodies are optional here: the tools are kept without them.
      expect(byName.get("updatePetWithForm")!.operation.body).toBeUndefined();
      expect(byName.get("uploadFile")!.operation.body).toBeUndefined();
    });
  }

  test("the same document gives the same tools, byte for byte", async () => {
    for (const file of ["petstore.json", "circular.json", "polymorphism.json"]) {
      const runs = await Promise.all([toolsFromOpenApi("x", example("3.0", file)), toolsFromOpenApi("x", example("3.0", file))]);
      expect(JSON.stringify(runs[1])).toBe(JSON.stringify(runs[0]));
    }
  });

  test("every 3.0 and 3.1 document of @readme/oas-examples gives tools whose schemas compile, or a refusal with reasons", async () => {
    let documents = 0;
    let tools = 0;
    for (const version of ["3.0", "3.1"]) {
      for (const file of readdirSync(join(EXAMPLES, version, "json")).filter((f) => f.endsWith(".json"))) {
        const first = await toolsFromOpenApi("x", example(version, file)).catch((e: unknown) => e);
        documents++;
        if (first instanceof DocumentRefused) {
          expect(first.problems.length).toBeGreaterThan(0);
          continue;
        }
        if (first instanceof Error) throw first;
        for (const t of (first as Awaited<ReturnType<typeof toolsFromOpenApi>>).tools) {
          compileArgsSchema(t.inputSchema);
          if (t.outputSchema) compileArgsSchema(t.outputSchema);
          tools++;
        }
      }
    }
    expect(documents).toBeGreaterThan(50);
    expect(tools).toBeGreaterThan(500);
  }, 60_000);
});

describe("tool names", () => {
  test("operations without operationId get a name from method and path", async () => {
    expect(builtName("get", "/pets/{petId}/photos")).toBe("get_pets_petId_photos");
    expect(builtName("DELETE", "/")).toBe("delete");
    expect(builtName("get", "/a b/c:d")).toBe("get_a_b_c_d");
    const { tools } = await toolsFromOpenApi(
      "up",
      doc({ "/pets/{id}": { parameters: [{ name: "id", in: "path", required: true, schema: { type: "string" } }], get: { responses: ok } } }),
    );
    expect(tools.map((t) => t.name)).toEqual(["get_pets_id"]);
  });

  test("invalid and colliding names refuse the whole document, every one listed", async () => {
    const problems = await refusal(
      toolsFromOpenApi(
        "up",
        doc({
          "/a": { get: { operationId: "find pet", responses: ok }, post: { operationId: "émoji", responses: ok } },
          "/b": { get: { operationId: "get_c", responses: ok } },
          "/c": { get: { responses: ok } },
        }),
      ),
    );
    expect(problems).toHaveLength(3);
    expect(problems[0]).toContain('"up__find pet" (GET /a)');
    expect(problems[1]).toContain("(POST /a)");
    expect(problems[2]).toBe("the tool name up__get_c is used by both GET /b and GET /c");
  });

  test("the upstream's name counts toward the 128 characters", async () => {
    const id = "a".repeat(120);
    expect((await toolsFromOpenApi("up", doc({ "/a": { get: { operationId: id, responses: ok } } }))).tools).toHaveLength(1);
    expect(await refusal(toolsFromOpenApi("upstream", doc({ "/a": { get: { operationId: id, responses: ok } } })))).toHaveLength(1);
  });
});

describe("input schemas", () => {
  const str = { type: "string" };

  test("parameters by name, required ones required, the JSON body under body", async () => {
    const { tools } = await toolsFromOpenApi(
      "up",
      doc({
        "/items/{id}": {
          post: {
            operationId: "op",
            parameters: [
              { name: "id", in: "path", required: true, schema: { type: "integer" }, description: "the item" },
              { name: "q", in: "query", schema: str },
              { name: "X-Req", in: "header", required: true, schema: str },
              { name: "Authorization", in: "header", schema: str },
              { name: "Content-Length", in: "header", schema: str },
            ],
            requestBody: { required: false, content: { "text/plain": { schema: str }, "application/vnd.x+json": { schema: { type: "object" } } } },
            responses: ok,
          },
        },
      }),
    );
    const t = tools[0]!;
    expect(t.inputSchema).toEqual({
      $schema: "https://json-schema.org/draft/2020-12/schema",
      type: "object",
      properties: { id: { type: "integer", description: "the item" }, q: str, "X-Req": str, body: { type: "object" } },
      required: ["id", "X-Req"],
      additionalProperties: false,
    });
    expect(t.operation.body).toEqual({ arg: "body", mediaType: "application/vnd.x+json", required: false });
  });

  test("a name used twice: every parameter of that name is called in.name; a clash left after that leaves the operation out", async () => {
    const { tools, skipped } = await toolsFromOpenApi(
      "up",
      doc({
        "/a/{id}": {
          post: {
            operationId: "twice",
            parameters: [
              { name: "id", in: "path", required: true, schema: str },
              { name: "id", in: "query", schema: str },
              { name: "body", in: "query", schema: str },
              { name: "other", in: "header", schema: str },
            ],
            requestBody: { content: { "application/json": { schema: str } } },
            responses: ok,
          },
        },
        "/b/{id}": {
          get: {
            operationId: "clash",
            parameters: [
              { name: "id", in: "path", required: true, schema: str },
              { name: "id", in: "query", schema: str },
              { name: "query.id", in: "header", schema: str },
            ],
            responses: ok,
          },
        },
      }),
    );
    expect(Object.keys(tools[0]!.inputSchema.properties as object)).toEqual(["path.id", "query.id", "query.body", "other", "body"]);
    expect(tools[0]!.operation.parameters.map((p) => p.arg)).toEqual(["path.id", "query.id", "query.body", "other"]);
    expect(skipped).toEqual([{ operation: "GET /b/{id}", reason: "argument names clash (query.id)" }]);
  });

  test("OpenAPI 3.0's own keywords become JSON Schema 2020-12", async () => {
    const components = {
      schemas: {
        Node: { type: "object", properties: { next: { $ref: "#/components/schemas/Node" }, v: { type: "integer" } }, required: ["v"] },
        Secret: { type: "string", writeOnly: true },
      },
    };
    const { tools } = await toolsFromOpenApi(
      "up",
      doc(
        {
          "/n": {
            post: {
              operationId: "n",
              parameters: [
                { name: "a", in: "query", schema: { type: "string", nullable: true, enum: ["x"] } },
                { name: "b", in: "query", schema: { type: "integer", minimum: 1, exclusiveMinimum: true, maximum: 9, exclusiveMaximum: false } },
                { name: "c", in: "query", schema: { nullable: true, allOf: [{ type: "string" }] } },
                { name: "d", in: "query", schema: { $ref: "#/components/schemas/Secret", type: "integer" } },
              ],
              requestBody: { required: true, content: { "application/json": { schema: { $ref: "#/components/schemas/Node" } } } },
              responses: {
                "201": {
                  description: "made",
                  content: {
                    "application/json": {
                      schema: {
                        type: "object",
                        required: ["pw", "id"],
                        properties: { pw: { $ref: "#/components/schemas/Secret" }, id: { type: "integer", readOnly: true } },
                      },
                    },
                  },
                },
              },
            },
          },
        },
        { components },
      ),
    );
    const t = tools[0]!;
    const p = t.inputSchema.properties as Record<string, unknown>;
    expect(p.a).toEqual({ type: ["string", "null"], enum: ["x", null] });
    expect(p.b).toEqual({ type: "integer", exclusiveMinimum: 1, maximum: 9 });
    expect(p.c).toEqual({ anyOf: [{ allOf: [{ type: "string" }] }, { type: "null" }] });
    // 3.0: a $ref replaces its siblings.
    expect(p.d).toEqual({ $ref: "#/$defs/Secret" });
    const check = compileArgsSchema(t.inputSchema);
    expect(check({ a: null, b: 2, c: null, d: "s", body: { v: 1, next: { v: 2, next: { v: 3 } } } })).toEqual([]);
    expect(check({ b: 1, body: { v: 1 } })).toEqual([{ path: "/b", rule: "exclusiveMinimum" }]);
    expect(check({ body: { v: 1, next: { next: { v: 1 } } } })).toEqual([{ path: "/body/next/v", rule: "required" }]);
    // In an answer a writeOnly property is never required; a readOnly one still is.
    expect(t.outputSchema!.required).toEqual(["id"]);
  });

  test("OpenAPI 3.1 schemas are kept as 2020-12; what would change reference resolution leaves the operation out", async () => {
    const { tools, skipped } = await toolsFromOpenApi(
      "up",
      doc(
        {
          "/a": {
            get: {
              operationId: "kept",
              parameters: [
                { name: "t", in: "query", schema: { type: ["string", "null"], examples: ["x"] } },
                { name: "r", in: "query", schema: { $ref: "#/components/schemas/S", description: "beside the ref" } },
                { name: "any", in: "query", schema: { type: "object", properties: { free: true, never: false } } },
              ],
              responses: ok,
            },
          },
          "/b": {
            get: {
              operationId: "withId",
              parameters: [{ name: "x", in: "query", schema: { $id: "https://elsewhere.example/s", type: "string" } }],
              responses: ok,
            },
          },
          "/c": {
            get: {
              operationId: "draft4",
              parameters: [{ name: "x", in: "query", schema: { $schema: "http://json-schema.org/draft-04/schema#", type: "string" } }],
              responses: ok,
            },
          },
        },
        { components: { schemas: { S: { type: "string", maxLength: 3 } } } },
        "3.1.0",
      ),
    );
    expect(tools.map((t) => t.name)).toEqual(["kept"]);
    const p = tools[0]!.inputSchema.properties as Record<string, unknown>;
    expect(p.t).toEqual({ type: ["string", "null"], examples: ["x"] });
    expect(p.r).toEqual({ description: "beside the ref", $ref: "#/$defs/S" });
    expect(p.any).toEqual({ type: "object", properties: { free: true, never: false } });
    expect(compileArgsSchema(tools[0]!.inputSchema)({ r: "long", any: { free: 1, never: 2 } })).toEqual([
      { path: "/r", rule: "maxLength" },
      { path: "/any/never", rule: "false schema" },
    ]);
    expect(skipped).toEqual([
      { operation: "GET /b", reason: "a schema with $id" },
      { operation: "GET /c", reason: "a schema in another JSON Schema dialect" },
    ]);
  });

  test("what the desk cannot send leaves the operation out, with the reason", async () => {
    const str = { type: "string" };
    const { tools, skipped } = await toolsFromOpenApi(
      "up",
      doc({
        "/cookie": { get: { operationId: "c", parameters: [{ name: "s", in: "cookie", schema: str }], responses: ok } },
        "/matrix/{m}": { get: { operationId: "m", parameters: [{ name: "m", in: "path", required: true, style: "matrix", schema: str }], responses: ok } },
        "/deep": {
          get: { operationId: "d", parameters: [{ name: "f", in: "query", style: "deepObject", explode: false, schema: { type: "object" } }], responses: ok },
        },
        "/upload": {
          post: { operationId: "u", requestBody: { required: true, content: { "multipart/form-data": { schema: { type: "object" } } } }, responses: ok },
        },
        "/content": { get: { operationId: "j", parameters: [{ name: "f", in: "query", content: { "application/json": { schema: str } } }], responses: ok } },
        "/echo": { trace: { operationId: "t", responses: ok }, get: { operationId: "kept", responses: ok } },
        "/bad/{x}/../y": { get: { operationId: "dots", parameters: [{ name: "x", in: "path", required: true, schema: str }], responses: ok } },
        "/regex": { get: { operationId: "re", parameters: [{ name: "p", in: "query", schema: { type: "string", pattern: "\\p{Foo}" } }], responses: ok } },
      }),
    );
    expect(tools.map((t) => t.name)).toEqual(["kept"]);
    expect(skipped.map((s) => s.operation)).toEqual([
      "GET /cookie",
      "GET /matrix/{m}",
      "GET /deep",
      "POST /upload",
      "GET /content",
      "TRACE /echo",
      "GET /bad/{x}/../y",
      "GET /regex",
    ]);
    expect(skipped[0]!.reason).toBe("cookie parameters are not supported (s)");
    expect(skipped[5]!.reason).toBe("TRACE echoes the request, credential included");
    expect(skipped[7]!.reason).toStartWith("its input schema does not compile");
  });

  test("query styles and their defaults are stored per parameter", async () => {
    const arr = { type: "array", items: { type: "string" } };
    const { tools } = await toolsFromOpenApi(
      "up",
      doc({
        "/s": {
          get: {
            operationId: "s",
            parameters: [
              { name: "a", in: "query", schema: arr },
              { name: "b", in: "query", explode: false, schema: arr },
              { name: "c", in: "query", style: "pipeDelimited", explode: false, schema: arr },
              { name: "d", in: "query", style: "spaceDelimited", explode: true, schema: arr },
              { name: "e", in: "query", style: "deepObject", explode: true, schema: { type: "object" } },
            ],
            responses: ok,
          },
        },
      }),
    );
    expect(tools[0]!.operation.parameters.map((p) => `${p.name}:${p.style}:${p.explode}`)).toEqual([
      "a:form:true",
      "b:form:false",
      "c:pipeDelimited:false",
      "d:form:true",
      "e:deepObject:true",
    ]);
  });

  test("output schemas: an object's own, anything else wrapped as value, none when unknown", async () => {
    const answer = (schema: unknown, code = "200", type = "application/json") => ({ [code]: { description: "x", content: { [type]: { schema } } } });
    const { tools } = await toolsFromOpenApi(
      "up",
      doc({
        "/o": { get: { operationId: "o", responses: answer({ type: "object", properties: { a: { type: "string" } } }) } },
        "/s": { get: { operationId: "s", responses: answer({ type: "string" }, "201") } },
        "/u": { get: { operationId: "u", responses: answer({ oneOf: [{ type: "string" }, { type: "object" }] }) } },
        "/t": { get: { operationId: "t", responses: answer({ type: "string" }, "200", "text/csv") } },
        "/r": {
          get: { operationId: "r", responses: { "2XX": { description: "x", content: { "application/problem+json": { schema: { type: "object" } } } } } },
        },
      }),
    );
    const [o, s, u, t, r] = tools;
    expect(o!.outputSchema).toEqual({ $schema: "https://json-schema.org/draft/2020-12/schema", type: "object", properties: { a: { type: "string" } } });
    expect(s!.outputSchema).toMatchObject({ type: "object", properties: { value: { type: "string" } }, required: ["value"] });
    expect(u!.outputSchema).toBeUndefined();
    expect(t!.outputSchema).toBeUndefined();
    expect(t!.operation.accept).toBe("text/csv");
    expect(r!.operation.accept).toBe("application/problem+json");
  });
});

describe("documents refused", () => {
  test("only OpenAPI 3.0 and 3.1, valid by the specification", async () => {
    expect(await refusal(toolsFromOpenApi("up", example("2.0", "petstore.json")))).toEqual([
      "only OpenAPI 3.0 and 3.1 documents are supported (the openapi field)",
    ]);
    expect(await refusal(toolsFromOpenApi("up", "{}"))).toEqual(["the document is not a JSON object"]);
    expect(await refusal(toolsFromOpenApi("up", doc({ "/a": { get: { operationId: "a" } } })))).not.toEqual([]);
    expect(await refusal(toolsFromOpenApi("up", doc({ "/a/{id}": { get: { operationId: "a", responses: ok } } })))).not.toEqual([]);
  });

  test("the document given is not changed (the library dereferences a copy)", async () => {
    const d = example("3.0", "petstore.json");
    const before = JSON.stringify(d);
    await toolsFromOpenApi("petstore", d);
    expect(JSON.stringify(d)).toBe(before);
  });
});

describe("a $ref outside the document is refused, and nothing it names is fetched or read", () => {
  const hits: string[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      hits.push(new URL(req.url).pathname);
      return Response.json({ type: "string" });
    },
  });
  const dir = tempDir();
  const fifo = join(dir.path, "schema.json");
  if (Bun.spawnSync(["mkfifo", fifo]).exitCode !== 0) throw new Error("mkfifo failed: the file-read check cannot run");
  // Opening a FIFO for writing waits until someone opens it for reading: if anything reads the
  // referenced file, this resolves before the test lets it (and closing it ends that read).
  let released = false;
  let readBySomeoneElse = false;
  const watcher = open(fifo, "w").then(async (handle) => {
    if (!released) readBySomeoneElse = true;
    await handle.close();
  });
  afterAll(async () => {
    released = true;
    if (!readBySomeoneElse) closeSync(openSync(fifo, constants.O_RDONLY | constants.O_NONBLOCK));
    await watcher;
    server.stop(true);
    await dir[Symbol.asyncDispose]();
  });

  const withRef = (ref: string) => doc({ "/a": { get: { operationId: "a", parameters: [{ name: "q", in: "query", schema: { $ref: ref } }], responses: ok } } });
  const remote = () => [`http://127.0.0.1:${server.port}/schema.json`, `http://127.0.0.1:${server.port}/s.json#/x`, `//127.0.0.1:${server.port}/s`];
  const local = () => [`file://${fifo}`, fifo, `./schema.json`, `schema.json#/a`];

  test("http and file references: refused, naming where they are", async () => {
    for (const ref of [...remote(), ...local()]) {
      expect(await refusal(toolsFromOpenApi("up", withRef(ref)))).toEqual([
        "a $ref outside the document at /paths/~1a/get/parameters/0/schema/$ref: only local references (#/...) are allowed",
      ]);
    }
    expect(hits).toEqual([]);
    expect(readBySomeoneElse).toBe(false);
  });

  test("also the library alone, as the desk runs it, fetches and reads nothing", async () => {
    for (const ref of [...remote(), ...local()]) await validate(withRef(ref) as never, PARSER_OPTIONS).catch(() => {});
    // A reference inside example data counts too: the library would follow it.
    await validate(
      doc({
        "/a": { get: { operationId: "a", responses: { "200": { description: "x", content: { "application/json": { example: { $ref: remote()[0] } } } } } } },
      }) as never,
      PARSER_OPTIONS,
    ).catch(() => {});
    expect(hits).toEqual([]);
    expect(readBySomeoneElse).toBe(false);
  });

  test("the wall can fail: the library told to read files does open the referenced one (so the tests above can see it)", async () => {
    await validate(withRef(fifo) as never, { resolve: { file: true } }).catch(() => {});
    await watcher;
    expect(readBySomeoneElse).toBe(true);
  });
});
