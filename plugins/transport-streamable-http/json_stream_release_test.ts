import assert from "node:assert/strict";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import { initializeRequest } from "../../tests/support/gateway.ts";
import { openStreamCount, releaseJsonStreams } from "./json_stream_release.ts";

const headers = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
};

async function session(release: boolean) {
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => crypto.randomUUID(),
    enableJsonResponse: true,
  });
  if (release) releaseJsonStreams(transport);
  const server = new Server({ name: "s", version: "1" }, { capabilities: {} });
  await server.connect(transport);
  const init = await transport.handleRequest(
    new Request("http://localhost/mcp", {
      method: "POST",
      headers,
      body: JSON.stringify(initializeRequest("2025-11-25", 0)),
    }),
  );
  await init.body?.cancel();
  const id = init.headers.get("mcp-session-id")!;
  for (let i = 1; i <= 20; i++) {
    const response = await transport.handleRequest(
      new Request("http://localhost/mcp", {
        method: "POST",
        headers: { ...headers, "mcp-session-id": id, "mcp-protocol-version": "2025-11-25" },
        body: JSON.stringify({ jsonrpc: "2.0", id: i, method: "ping" }),
      }),
    );
    assert.deepEqual(await response.json(), { jsonrpc: "2.0", id: i, result: {} });
  }
  const count = openStreamCount(transport);
  await server.close();
  return count;
}

Deno.test("releaseJsonStreams frees each JSON-mode request's stream entry once it is answered", async () => {
  assert.equal(await session(true), 0);
});

Deno.test("without releaseJsonStreams the SDK keeps one entry per answered request (the leak it works around)", async () => {
  // When this fails, the SDK fixed typescript-sdk#2559 and the workaround can go.
  assert.equal(await session(false), 21);
});
