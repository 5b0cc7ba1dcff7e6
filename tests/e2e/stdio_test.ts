import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SUPPORTED_PROTOCOL_VERSIONS } from "@modelcontextprotocol/sdk/types.js";
import { StreamTransport } from "../../core/mcp/stream_transport.ts";
import { FrameReader, spawnStdioGateway } from "../support/child_gateway.ts";
import { initializeRequest } from "../support/gateway.ts";

const encoder = new TextEncoder();

Deno.test("stdio serves the SDK client from a real child process and exits on stdin EOF", async () => {
  const child = spawnStdioGateway({ MCP_STDIO_TENANT: "desk" });
  const transport = new StreamTransport(child.stdout, child.stdin, {
    maxMessageBytes: 1 << 20,
    answerMalformed: false,
  });
  const client = new Client({ name: "stdio-e2e", version: "1.0.0" });
  await client.connect(transport);
  const { tools } = await client.listTools();
  assert.ok(tools.some((t) => t.name === "system_status"));
  const result = await client.callTool({ name: "system_status", arguments: {} });
  assert.equal((result.structuredContent as { sessions: number }).sessions, 1);
  const { resources } = await client.listResources();
  assert.ok(resources.some((r) => r.uri === "agent33://system/status"));
  const { prompts } = await client.listPrompts();
  assert.deepEqual(prompts, []);
  await client.close();
  const status = await child.process.status;
  await child.stderr;
  assert.equal(status.code, 0, "clean exit on stdin EOF");
});

Deno.test("stdio negotiates every protocol version the SDK supports", async () => {
  const child = spawnStdioGateway();
  const writer = child.stdin.getWriter();
  const frames = new FrameReader(child.stdout);
  try {
    for (const [i, version] of SUPPORTED_PROTOCOL_VERSIONS.entries()) {
      await writer.write(encoder.encode(JSON.stringify(initializeRequest(version, i)) + "\n"));
      const reply = await frames.next();
      assert.equal(reply.id, i);
      assert.equal((reply.result as { protocolVersion: string }).protocolVersion, version);
    }
  } finally {
    await writer.close();
    await frames.cancel();
    await child.close();
  }
});

Deno.test("stdio answers bad frames with JSON-RPC errors, keeps the connection, and logs only to stderr", async () => {
  const child = spawnStdioGateway({ MCP_MAX_MESSAGE_BYTES: "2048", MCP_LOG_LEVEL: "debug" });
  const writer = child.stdin.getWriter();
  const frames = new FrameReader(child.stdout);
  const send = (text: string) => writer.write(encoder.encode(text + "\n"));
  const expectError = async (code: number, id: unknown = null) => {
    const frame = await frames.next();
    assert.equal(frame.jsonrpc, "2.0");
    assert.equal(frame.id, id);
    assert.equal((frame.error as { code: number }).code, code);
    return (frame.error as { message: string }).message;
  };
  try {
    await send(JSON.stringify(initializeRequest("2025-11-25", 0)));
    await frames.next();
    await send(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }));

    await send("this is not json");
    await expectError(-32700);
    await send(JSON.stringify({ jsonrpc: "1.0", id: 7, method: "ping" }));
    await expectError(-32600, 7);
    await send(JSON.stringify([{ jsonrpc: "2.0", id: 8, method: "ping" }]));
    assert.match(await expectError(-32600), /batch/);
    await send(JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping", pad: "x".repeat(4096) }));
    assert.match(await expectError(-32600), /2048 bytes/);
    await send(JSON.stringify({ jsonrpc: "2.0", id: 10, method: "no/such/method" }));
    await expectError(-32601, 10);
    await send(
      JSON.stringify({ jsonrpc: "2.0", id: 11, method: "tools/call", params: { name: 42 } }),
    );
    await expectError(-32602, 11);
    await send(
      JSON.stringify({ jsonrpc: "2.0", id: 12, method: "tools/call", params: { name: "nope" } }),
    );
    await expectError(-32602, 12);

    await send(JSON.stringify({ jsonrpc: "2.0", id: 13, method: "ping" }));
    assert.deepEqual(await frames.next(), { jsonrpc: "2.0", id: 13, result: {} });
  } finally {
    await writer.close();
    await frames.cancel();
  }
  const status = await child.close();
  assert.equal(status.code, 0);
  assert.match(await child.stderr, /bad frame on stdin/, "diagnostics go to stderr");
});

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test(`stdio exits cleanly on ${signal}`, async () => {
    const child = spawnStdioGateway();
    const writer = child.stdin.getWriter();
    const frames = new FrameReader(child.stdout);
    await writer.write(encoder.encode(JSON.stringify(initializeRequest("2025-11-25")) + "\n"));
    await frames.next();
    child.process.kill(signal);
    const status = await child.process.status;
    await writer.close().catch(() => {});
    await frames.cancel();
    await child.stderr;
    assert.equal(status.code, 0);
  });
}
