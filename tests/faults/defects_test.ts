/**
 * Defects the fault matrix found, each shown with real processes and kept as its regression test
 * (an open one stays `ignore: true` with a `// DEFECT:` comment until its fix lands).
 * @module
 */
import assert from "node:assert/strict";
import { eventually, faultServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, connectSse, startGateway } from "../support/gateway.ts";
import { call } from "./rig.ts";

Deno.test({
  name:
    "the first call after a breaker's OPEN window lapses is let through as the HALF_OPEN probe, not answered unknown_tool",
  // Regression (fixed in core/proxy/proxy_manager.ts): resolveTool looked the name up in the
  // aggregate cached while the breaker was OPEN (the server's tools hidden); #resolveHidden then
  // read handle.serving, which moved the breaker OPEN → HALF_OPEN, skipped the now-serving server,
  // and the call was answered -32602 unknown_tool instead of becoming the probe.
  async fn() {
    // No health checks (interval 1 h): nothing but the call looks at the breaker after it opens.
    const fleet = await writeFleet(`proxy_servers:${
      faultServer("b", {
        extra: "    timeouts: { connect: 20, call: 0.3 }\n    health: { interval: 3600 }\n" +
          "    breaker: { threshold: 2, base: 1, max: 1 }\n",
      })
    }`);
    const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    try {
      await gateway.kernel.fleetStarted;
      const client = await connectHttp(gateway);
      try {
        const hangs = await Promise.all([call(client, "b__hang"), call(client, "b__hang")]);
        assert.ok(hangs.every((h) => (h.error?.data as { code?: string })?.code === "timeout"));
        assert.equal(gateway.kernel.proxy.get("b")!.breaker.state, "OPEN");
        await new Promise((resolve) => setTimeout(resolve, 1_300));
        const probe = await call(client, "b__ok");
        assert.equal(probe.error?.message, undefined, "the probe is forwarded");
        assert.equal(probe.text, "ok");
        assert.equal(gateway.kernel.proxy.get("b")!.breaker.state, "CLOSED");
      } finally {
        await client.close();
      }
    } finally {
      await gateway.stop();
      await fleet.remove();
    }
  },
});

Deno.test({
  name:
    "sse inbound: a client that disconnects ends its gateway session at once, cancelling its calls upstream",
  // Regression (fixed in plugins/transport-sse/mod.ts): the plugin set `transport.onclose` after
  // `ctx.serve(transport)`, replacing the handler the SDK Server installed in connect(); a client
  // that left was forgotten by the plugin but its bridge session stayed open forever (no
  // session.closed), its calls ran on upstream until their timeout, its subscriptions stayed.
  async fn() {
    const fleet = await writeFleet(
      `proxy_servers:${faultServer("b", { extra: "    timeouts: { connect: 20, call: 30 }\n" })}`,
    );
    const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    try {
      await gateway.kernel.fleetStarted;
      const observer = await connectHttp(gateway);
      const leaving = await connectSse(gateway);
      try {
        const running = async () => Number((await call(observer, "b__inflight")).text);
        const hang = call(leaving, "b__hang");
        await eventually(async () => (await running()) === 1, "the call to reach the upstream");
        const sessions = gateway.kernel.bridge.sessionCount;
        await leaving.close();
        assert.ok((await hang).error, "the leaving client's own call ends");
        await eventually(
          () => gateway.kernel.bridge.sessionCount === sessions - 1,
          "the gateway to close the SSE session",
          3_000,
        );
        await eventually(async () => (await running()) === 0, "the call cancelled upstream", 3_000);
      } finally {
        await observer.close();
        await leaving.close();
      }
    } finally {
      await gateway.stop();
      await fleet.remove();
    }
  },
});
