/**
 * upstream-sse end to end: the kernel's SDK Client → WorkerTransport → relay worker → a real
 * legacy HTTP+SSE server on 127.0.0.1.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamPlan } from "../../core/plugin_api/mod.ts";
import { WorkerTransport } from "../../core/proxy/worker_transport.ts";
import { startEverything } from "../../tests/fixtures/upstreams/reference_server.ts";
import { recordingLogger } from "../../tests/fixtures/upstreams/support.ts";
import plugin from "./mod.ts";

const adapter = await plugin.create();

function planFor(url: string): UpstreamPlan {
  return adapter.plan(
    { id: "legacy", transport: "sse", url, headers: {}, env: {}, permissions: {}, sandbox: "none" },
    { maxMessageBytes: 1024 * 1024, baseEnv: {} },
  );
}

function transport(plan: UpstreamPlan): WorkerTransport {
  return new WorkerTransport({
    workerUrl: adapter.workerUrl,
    plan,
    serverId: "legacy",
    logger: recordingLogger().logger,
    startTimeoutMs: 30_000,
  });
}

Deno.test("upstream-sse serves server-everything's SSE mode to an SDK Client", async () => {
  const everything = await startEverything("sse");
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  try {
    await client.connect(transport(planFor(everything.url)));
    assert.equal(client.getServerVersion()?.name, "mcp-servers/everything");
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "echo"));
    const result = await client.callTool({ name: "echo", arguments: { message: "over sse" } });
    const content = (result as CallToolResult).content[0];
    assert.deepEqual(content, { type: "text", text: "Echo: over sse" });
  } finally {
    await client.close();
    await everything.stop();
  }
});

Deno.test("An unreachable SSE upstream fails start with upstream_error naming the server", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${(probe.addr as Deno.NetAddr).port}/sse`;
  probe.close();
  await assert.rejects(transport(planFor(url)).start(), {
    name: "GatewayError",
    code: "upstream_error",
    message: new RegExp(`^Upstream "legacy" failed to start: cannot connect to ${url}: `),
  });
});

Deno.test("An SSE upstream that goes away closes the transport exactly once", async () => {
  const everything = await startEverything("sse");
  const t = transport(planFor(everything.url));
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  const closed = Promise.withResolvers<void>();
  let closes = 0;
  try {
    await client.connect(t);
    client.onclose = () => {
      closes++;
      closed.resolve();
    };
    await everything.stop();
    await closed.promise;
    assert.equal(closes, 1);
    assert.match(t.closeInfo?.reason ?? "", /^connection to .* lost: SSE error/);
  } finally {
    await client.close();
    await everything.stop();
  }
});
