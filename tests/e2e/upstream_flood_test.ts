/**
 * An upstream flooding the gateway with log notifications, without end, costs it bounded memory
 * and leaves the rest of the fleet serving: a real stdio upstream
 * (tests/fixtures/upstreams/log_flood_server.ts) floods beside a normal one, behind a real gateway
 * and real SDK clients in two sessions.
 */
import assert from "node:assert/strict";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;
const entry = (id: string) => `
  - id: ${id}
    command: ${
  JSON.stringify(["deno", "run", "--config", DENO_JSON, fixture("upstreams/log_flood_server.ts")])
}
    sandbox: deno
`;
/** How long the flood runs while the other upstream is called. */
const FLOOD_MS = 10_000;
/** Generous: a call to the other upstream answers in milliseconds when the gateway is not frozen. */
const CALL_DEADLINE_MS = 5_000;
/**
 * Unbounded, the flood grew the process by gigabytes (1.3 → 5.0 GB in 30 s); bounded, ~190 MB,
 * with short-lived garbage between full collections that reached ~450 MB in a busy suite run.
 */
const RSS_GROWTH_LIMIT = 1024 * 1024 * 1024;

function text(result: unknown): string {
  return (result as CallToolResult).content.map((c) => c.type === "text" ? c.text : "").join("");
}

Deno.test("An upstream flooding log notifications without end leaves another session's calls to another upstream answered and the gateway's memory bounded", async () => {
  const fleet = await writeFleet(`proxy_servers:${entry("flood")}${entry("calm")}`);
  // The operator log is not kept: the test measures the gateway, not its log buffer.
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, {
    keepLog: () => false,
  });
  try {
    await gateway.kernel.fleetStarted;
    const attacker = await connectHttp(gateway);
    const victim = await connectHttp(gateway);
    try {
      assert.equal(
        text(await victim.callTool({ name: "calm__echo", arguments: { text: "warm" } })),
        "warm",
      );
      const baseline = Deno.memoryUsage().rss;
      assert.equal(
        text(await attacker.callTool({ name: "flood__flood", arguments: {} })),
        "flooding",
      );
      const started = Date.now();
      let peak = baseline;
      let calls = 0;
      while (Date.now() - started < FLOOD_MS) {
        const answer = await victim.callTool(
          { name: "calm__echo", arguments: { text: `call ${calls}` } },
          undefined,
          { timeout: CALL_DEADLINE_MS },
        ).then(text, (error) => `no answer: ${error}`);
        assert.equal(answer, `call ${calls}`, `call ${calls} during the flood`);
        calls++;
        peak = Math.max(peak, Deno.memoryUsage().rss);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const growth = peak - baseline;
      assert.ok(
        growth < RSS_GROWTH_LIMIT,
        `RSS grew ${(growth / 1e6).toFixed(0)} MB during ${FLOOD_MS / 1000} s of flood`,
      );
      assert.ok(calls >= 10, `only ${calls} calls answered during the flood`);
    } finally {
      await attacker.close();
      await victim.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});
