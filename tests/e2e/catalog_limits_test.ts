/**
 * Upstream catalogs are bounded: real stdio upstreams with hostile catalogs (an endless
 * `nextCursor`, a slow endless one, oversized descriptors) beside a good one, behind a real
 * gateway and a real SDK client.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

function upstream(id: string, mode: string, extra = ""): string {
  return `  - id: ${id}
    command: ["deno", "run", "--config", "${DENO_JSON}", "${
    fixture("upstreams/catalog_server.ts")
  }", "${mode}"]
    breaker: { threshold: 5, base: 600, max: 600 }
${extra}`;
}

const FLEET = "proxy_servers:\n" +
  upstream("endless", "endless", "    timeouts: { connect: 60 }\n") +
  upstream("slow", "slow", "    timeouts: { connect: 2 }\n") +
  upstream("big", "oversized");

Deno.test("Hostile catalogs: an endless cursor and a slow one go FAILED naming the bound, oversized tools are dropped, the good upstream keeps serving", async () => {
  const fleet = await writeFleet(FLEET);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  const rssBefore = Deno.memoryUsage().rss;
  try {
    const state = (id: string) => gateway.kernel.proxy.status().find((s) => s.id === id);
    await eventually(() => state("endless")?.state === "FAILED", "endless to fail", 30_000);
    assert.match(state("endless")!.lastError!, /past limits\.pages \(100 pages\)/);
    await eventually(() => state("slow")?.state === "FAILED", "slow to fail", 30_000);
    assert.match(state("slow")!.lastError!, /timeouts\.connect/);
    // The one deadline (timeouts.connect: 2) ended it, not a page cap it never reached.
    assert.doesNotMatch(state("slow")!.lastError!, /limits\.pages/);
    const rssGrowth = Deno.memoryUsage().rss - rssBefore;
    assert.ok(rssGrowth < 200 * 1024 * 1024, `RSS grew ${Math.round(rssGrowth / 1e6)} MB`);

    await eventually(() => state("big")?.state === "READY", "big to be ready", 30_000);
    const client = await connectHttp(gateway);
    try {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).filter((n) => n.startsWith("big__")), [
        "big__good",
      ]);
      const result = await client.callTool({ name: "big__good", arguments: {} });
      assert.deepEqual(result.content, [{ type: "text", text: "called good" }]);
      const dropped = gateway.logs.filter((l) => l.includes("dropped tool")).join("\n");
      assert.match(dropped, /its name is not 1–128 letters/);
      assert.match(dropped, /tool "n{80}"… \(40000 characters\): its name/, "cut short, escaped");
      assert.match(dropped, /long_description.*over limits\.description_bytes \(16384\)/);
      assert.match(dropped, /deep_schema.*deeper than limits\.schema_depth \(32\)/);
      assert.match(dropped, /big_schema.*over limits\.schema_bytes \(16384\)/);

      // A 40 KB name from a client is unknown before any lookup or glob sees it.
      const error = await client.callTool({ name: "x".repeat(40_000), arguments: {} }).then(
        () => undefined,
        (e) => e,
      );
      assert.ok(error instanceof McpError, String(error));
      assert.match(error.message, /the name is 40000 characters, longer than any tool/);
      assert.equal((error.data as { code?: string }).code, "unknown_tool");

      // Alone at /mcp/big, a dropped tool is no more callable: it has no descriptor to govern by.
      const alone = new Client({ name: "e2e-scoped", version: "1.0.0" });
      await alone.connect(
        new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp/big`), {
          requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } },
        }),
      );
      try {
        assert.deepEqual((await alone.callTool({ name: "good", arguments: {} })).content, [
          { type: "text", text: "called good" },
        ]);
        const refused = await alone.callTool({ name: "long_description", arguments: {} }).then(
          (r) => r,
          (e) => e,
        );
        assert.ok(refused instanceof McpError, JSON.stringify(refused));
        assert.equal((refused.data as { code?: string }).code, "unknown_tool");
      } finally {
        await alone.close();
      }
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});

Deno.test("A server's limits: block sets its own bounds: a lower page cap fails sooner, named", async () => {
  const fleet = await writeFleet(
    "proxy_servers:\n" + upstream("endless", "endless", "    limits: { pages: 3 }\n"),
  );
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    const state = () => gateway.kernel.proxy.status().find((s) => s.id === "endless");
    await eventually(() => state()?.state === "FAILED", "endless to fail", 30_000);
    assert.match(state()!.lastError!, /past limits\.pages \(3 pages\)/);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});
