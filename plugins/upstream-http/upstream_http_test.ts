/**
 * upstream-http end to end: the kernel's SDK Client → WorkerTransport → relay worker → a real
 * Streamable HTTP server on 127.0.0.1.
 * @module
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { LATEST_PROTOCOL_VERSION } from "@modelcontextprotocol/sdk/types.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamPlan, UpstreamServerSpec } from "../../core/plugin_api/mod.ts";
import { WorkerTransport } from "../../core/proxy/worker_transport.ts";
import { startHeaderEchoServer } from "../../tests/fixtures/upstreams/header_echo_server.ts";
import { startEverything } from "../../tests/fixtures/upstreams/reference_server.ts";
import { recordingLogger } from "../../tests/fixtures/upstreams/support.ts";
import plugin from "./mod.ts";

const adapter = await plugin.create();

function spec(url: string, headers: Record<string, string> = {}): UpstreamServerSpec {
  return {
    id: "remote",
    transport: "http",
    url,
    headers,
    env: {},
    permissions: {},
    sandbox: "none",
  };
}

function transport(plan: UpstreamPlan, workerUrl = adapter.workerUrl) {
  const { logger, entries } = recordingLogger();
  const t = new WorkerTransport({
    workerUrl,
    plan,
    serverId: "remote",
    logger,
    startTimeoutMs: 30_000,
  });
  return { transport: t, entries };
}

function planFor(url: string, headers: Record<string, string> = {}): UpstreamPlan {
  return adapter.plan(spec(url, headers), { maxMessageBytes: 1024 * 1024, baseEnv: {} });
}

function text(result: unknown): string {
  const content = (result as CallToolResult).content[0];
  return content?.type === "text" ? content.text : "";
}

Deno.test("upstream-http serves server-everything's Streamable HTTP mode to an SDK Client", async () => {
  const everything = await startEverything("streamableHttp");
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  try {
    await client.connect(transport(planFor(everything.url)).transport);
    assert.equal(client.getServerVersion()?.name, "mcp-servers/everything");
    const { tools } = await client.listTools();
    assert.ok(tools.some((t) => t.name === "echo"));
    const result = await client.callTool({ name: "echo", arguments: { message: "over http" } });
    assert.equal(text(result), "Echo: over http");
  } finally {
    await client.close();
    await everything.stop();
  }
});

Deno.test("upstream-http sends the configured headers and the negotiated MCP-Protocol-Version", async () => {
  const echo = startHeaderEchoServer();
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  try {
    await client.connect(transport(planFor(echo.url, { "X-Upstream-Key": "k1" })).transport);
    const headers = JSON.parse(text(await client.callTool({ name: "headers", arguments: {} })));
    assert.equal(headers["x-upstream-key"], "k1");
    assert.equal(headers["mcp-protocol-version"], LATEST_PROTOCOL_VERSION);
  } finally {
    await client.close();
    await echo.close();
  }
});

Deno.test("The http relay worker may reach only its URL's host and port", async () => {
  const echo = startHeaderEchoServer();
  const other = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const plan = planFor(echo.url, { "x-probe-port": String((other.addr as Deno.NetAddr).port) });
  const { transport: t, entries } = transport(
    plan,
    new URL("../../tests/fixtures/upstreams/sandbox_probe_worker.ts", import.meta.url).href,
  );
  try {
    await t.start();
    assert.deepEqual(
      entries.filter((e) => e.message === "upstream stderr").map((e) => e.fields.line),
      [
        "probe connect: NotCapable",
        "probe listen: NotCapable",
        "probe read: NotCapable",
        "probe write: NotCapable",
        "probe env: NotCapable",
        "probe sys: NotCapable",
        "probe run: NotCapable",
        "probe fetch-url: allowed",
      ],
    );
  } finally {
    await t.close();
    other.close();
    await echo.close();
  }
});

Deno.test("An unreachable http upstream fails the handshake and reports why it closed", async () => {
  const probe = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const url = `http://127.0.0.1:${(probe.addr as Deno.NetAddr).port}/mcp`;
  probe.close();
  const { transport: t } = transport(planFor(url));
  let closes = 0;
  const client = new Client({ name: "upstream-test", version: "1.0.0" });
  client.onclose = () => closes++;
  await assert.rejects(client.connect(t), /Connection closed/);
  assert.match(t.closeInfo?.reason ?? "", new RegExp(`^request to ${url} failed: `));
  assert.equal(closes, 1);
  await client.close();
});
