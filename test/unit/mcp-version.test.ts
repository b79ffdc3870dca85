// The refusal our MCP faces give a client of another protocol revision (src/core/mcp-version.ts).
import { describe, expect, test } from "bun:test";
import { headerAsksOtherVersion, newerRevisionProbe, unsupportedVersion } from "../../src/core/mcp-version.ts";

const OURS = ["2025-11-25", "2025-06-18"];

describe("the -32022 refusal", () => {
  test("names every version we speak and echoes the requested revision", () => {
    expect(unsupportedVersion("2026-07-28", OURS)).toEqual({
      code: -32022,
      message: "Unsupported protocol version 2026-07-28: this server speaks 2025-11-25, 2025-06-18",
      data: { supported: OURS, requested: "2026-07-28" },
    });
  });

  test("echoes nothing that is not shaped like a revision (the header is the client's text)", () => {
    for (const junk of ["2026-07-28\r\nx: y", "<script>", "", 20260728, null, undefined]) {
      const r = unsupportedVersion(junk, OURS);
      expect(r.data).toEqual({ supported: OURS });
      expect(r.message).toBe("Unsupported protocol version: this server speaks 2025-11-25, 2025-06-18");
    }
  });

  test("server/discover is refused with the revision from its _meta; other unknown methods are not ours to refuse", () => {
    const params = { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } };
    expect(newerRevisionProbe("server/discover", params, OURS)?.data).toEqual({ supported: OURS, requested: "2026-07-28" });
    expect(newerRevisionProbe("server/discover", undefined, OURS)?.code).toBe(-32022);
    expect(newerRevisionProbe("tools/frobnicate", params, OURS)).toBeUndefined();
  });

  test("a header naming a version we speak, or none, goes on to the transport", () => {
    expect(headerAsksOtherVersion(null, OURS)).toBe(false);
    expect(headerAsksOtherVersion("2025-06-18", OURS)).toBe(false);
    expect(headerAsksOtherVersion("2026-07-28", OURS)).toBe(true);
    expect(headerAsksOtherVersion("", OURS)).toBe(true);
  });
});
