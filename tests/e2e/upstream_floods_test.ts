/**
 * A hostile upstream's notifications cost the gateway a bounded amount of work and time: real stdio
 * upstreams send thousands of `notifications/tools/list_changed` at once
 * (tests/fixtures/upstreams/catalog_server.ts `relist`), or progress forever and no answer
 * (fault_server.ts `trickle`), behind a real gateway and a real SDK client.
 */
import assert from "node:assert/strict";
import type { CallToolResult, McpError } from "@modelcontextprotocol/sdk/types.js";
import { faultServer, fixture } from "../support/fleet.ts";
import { withFleet } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;
const FLEET = `proxy_servers:
  - id: relist
    command: ${
  JSON.stringify([
    "deno",
    "run",
    "--config",
    DENO_JSON,
    fixture("upstreams/catalog_server.ts"),
    "relist",
  ])
}
`;

function text(result: unknown): string {
  return (result as CallToolResult).content.map((c) => c.type === "text" ? c.text : "").join("");
}

Deno.test("A flood of tools/list_changed from an upstream costs one catalog fetch at a time and one after the burst, not one per notification", async () => {
  await withFleet(FLEET, async (_gateway, client) => {
    const lists = async (): Promise<[number, number]> => {
      const [served, most] = text(await client.callTool({ name: "relist__lists", arguments: {} }))
        .split(" ").map(Number);
      return [served!, most!];
    };
    const [before] = await lists();
    await client.callTool({ name: "relist__flood", arguments: { count: 2000 } });
    // The refetches a flood causes are over once two reads in a row see the same count.
    let [after, most] = [-1, 0];
    for (let seen = -2; seen !== after;) {
      seen = after;
      await new Promise((resolve) => setTimeout(resolve, 300));
      [after, most] = await lists();
    }
    assert.equal(most, 1, "catalog fetches of one upstream overlapped");
    // One in flight and one after it per burst; a loaded machine may split the burst in a few.
    assert.ok(after - before <= 20, `2000 notifications caused ${after - before} tools/list`);
    assert.ok(after - before >= 1, "the change was fetched at least once");
  });
});

Deno.test("Progress resets a call's timeout, but never past 10 × timeouts.call: an upstream trickling progress cannot hold a call forever", async () => {
  await withFleet(
    `proxy_servers:${faultServer("drip", { extra: "    timeouts: { call: 0.3 }\n" })}`,
    async (_gateway, client) => {
      let progress = 0;
      const started = Date.now();
      const refused = await client.callTool(
        { name: "drip__trickle", arguments: { every: 100 } },
        undefined,
        { onprogress: () => progress++, timeout: 60_000, resetTimeoutOnProgress: true },
      ).then(() => assert.fail("trickle never answers"), (e: McpError) => e);
      const elapsed = Date.now() - started;
      assert.ok(progress > 3, `progress was relayed (${progress}), so it did reset the timeout`);
      assert.equal(
        (refused.data as { code?: string } | undefined)?.code,
        "timeout",
        refused.message,
      );
      assert.ok(elapsed < 20_000, `the call was held ${elapsed} ms`);
    },
  );
});

Deno.test("An upstream's log messages that reach no caller are logged at most 20 a second and 2,000 characters each; the rest are counted, not lost", async () => {
  await withFleet(`proxy_servers:${faultServer("chatty")}`, async (gateway, client) => {
    // Sent after the answer, with no call in flight: no caller may receive them.
    await client.callTool({
      name: "chatty__log_after",
      arguments: { count: 3000, bytes: 100_000 },
    });
    const logged = () => gateway.logs.filter((l) => l.includes("upstream log not relayed"));
    const held = () =>
      gateway.logs.map((l) => /(\d+) more upstream log messages were not relayed/.exec(l))
        .reduce((sum, m) => sum + (m ? Number(m[1]) : 0), 0);
    const started = Date.now();
    while (logged().length + held() < 3000 && Date.now() - started < 60_000) {
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    const seconds = (Date.now() - started) / 1000;
    assert.equal(logged().length + held(), 3000, "every message is logged or counted");
    assert.ok(
      logged().length <= 20 * (Math.ceil(seconds) + 2),
      `${logged().length} lines logged in ${seconds.toFixed(1)} s`,
    );
    assert.ok(held() > 0, "the flood went past the bound");
    for (const line of logged()) {
      assert.ok(line.length < 2500, `a logged line of ${line.length} characters`);
      assert.match(line, /\(100\d{3} characters, cut\)/);
    }
  });
});

Deno.test("A credential crossing the cut of an unrelayed log message leaves no prefix in the log", async () => {
  const token = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8";
  await withFleet(`proxy_servers:${faultServer("chatty")}`, async (gateway, client) => {
    // The data's JSON is `"1 <pad> <token>x…"`: the token starts 12 characters before the cut,
    // so cut first, "ghp_A1b2C3d4" would be too short to look like a credential any more.
    await client.callTool({
      name: "chatty__log_after",
      arguments: { count: 1, bytes: 100, text: `${"y".repeat(2000 - 12 - 4)} ${token}` },
    });
    const started = Date.now();
    const line = () => gateway.logs.find((l) => l.includes("upstream log not relayed"));
    while (line() === undefined && Date.now() - started < 30_000) {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    assert.match(line()!, /characters, cut\)/);
    assert.doesNotMatch(line()!, /ghp_A1b2/);
  });
});
