/**
 * An upstream's list_changed is paced: a real stdio upstream that lists new tool names on every
 * tools/list and sends list_changed after each answer and every 10 ms, beside a calm one, behind
 * a real gateway and a real SDK client.
 */
import assert from "node:assert/strict";
import { eventually, fixture, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway } from "../support/gateway.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;

function upstream(id: string, mode: string): string {
  return `  - id: ${id}
    command: ["deno", "run", "--config", "${DENO_JSON}", "${
    fixture("upstreams/rotating_server.ts")
  }", "${mode}", "1000"]
`;
}

const text = (result: Record<string, unknown>) =>
  (result.content as { type: string; text: string }[])[0]!.text;

Deno.test("An upstream that changes its lists on every refresh is fetched at most once per pause, and another upstream keeps answering", async () => {
  const fleet = await writeFleet(
    "proxy_servers:\n" + upstream("rot", "rotate") + upstream("calm", "static"),
  );
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path }, {
    keepLog: () => false,
  });
  try {
    await gateway.kernel.fleetStarted;
    const client = await connectHttp(gateway);
    let notified = 0;
    client.fallbackNotificationHandler = () => Promise.resolve(void notified++);
    try {
      await eventually(
        async () => (await client.listTools()).tools.some((t) => t.name === "rot__served"),
        "rot to list served",
        20_000,
      );
      const start = Number(text(await client.callTool({ name: "rot__served", arguments: {} })));
      const latencies: number[] = [];
      const until = performance.now() + 3_000;
      while (performance.now() < until) {
        const began = performance.now();
        const result = await client.callTool({ name: "calm__echo", arguments: { q: "hi" } });
        latencies.push(performance.now() - began);
        assert.equal(text(result), "hi");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      const served = Number(text(await client.callTool({ name: "rot__served", arguments: {} })));
      latencies.sort((a, b) => a - b);
      const p95 = latencies[Math.floor(latencies.length * 0.95)]!;
      const figures = `tools/list served in 3 s: ${served - start}; list_changed to the client: ` +
        `${notified}; calm__echo p95 ${p95.toFixed(1)} ms over ${latencies.length} calls`;
      if (Deno.env.get("PACING_FIGURES")) {
        Deno.stderr.writeSync(new TextEncoder().encode(`${figures}\n`));
      }
      assert.ok(served - start <= 6, figures);
      assert.ok(notified <= 12, figures);
      assert.ok(latencies.length >= 20, figures);
    } finally {
      await client.close();
    }
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
});
