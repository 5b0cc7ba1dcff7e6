/**
 * An HTTP upstream that redirects: the relay follows a redirect within the upstream's own origin
 * (a moved path) and no other, so a fleet entry cannot be turned by its server into a request to
 * another host (an internal service, a metadata endpoint). Real servers on 127.0.0.1, the
 * gateway's real relay worker and its fetch.
 */
import assert from "node:assert/strict";
import { startHeaderEchoServer } from "../fixtures/upstreams/header_echo_server.ts";
import { eventually, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

/** Runs `fn` on a gateway whose one upstream `moved` is at `url`. */
async function withUpstreamAt(url: string, fn: (gateway: TestGateway) => Promise<void>) {
  const fleet = await writeFleet(`proxy_servers:
  - id: moved
    transport: http
    url: ${url}
    timeouts: { connect: 5 }
`);
  const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway);
  } finally {
    await gateway.stop();
    await fleet.remove();
  }
}

const status = (gateway: TestGateway) =>
  gateway.kernel.proxy.status().find((s) => s.id === "moved");

Deno.test("An http upstream redirecting within its own origin is followed: its tools serve", async () => {
  const server = startHeaderEchoServer({ "/old": "/mcp" });
  try {
    await withUpstreamAt(server.url.replace("/mcp", "/old"), async (gateway) => {
      await eventually(() => status(gateway)?.state === "READY", "the start");
      const client = await connectHttp(gateway);
      try {
        const result = await client.callTool({ name: "moved__headers", arguments: {} });
        assert.equal(result.isError, undefined);
      } finally {
        await client.close();
      }
    });
  } finally {
    await server.close();
  }
});

Deno.test("An http upstream redirecting to another origin is not followed: nothing reaches that host, and the error names the redirect", async () => {
  const inside = startHeaderEchoServer();
  const server = startHeaderEchoServer({ "/mcp": inside.url });
  try {
    await withUpstreamAt(server.url, async (gateway) => {
      await eventually(() => status(gateway)?.lastError !== undefined, "the refusal");
      assert.notEqual(status(gateway)!.state, "READY");
      assert.match(
        status(gateway)!.lastError!,
        new RegExp(`Redirect to ${inside.url.replaceAll(".", "\\.")} not followed`),
      );
      assert.deepEqual(inside.authorizations, [], "no request reached the other host");
    });
  } finally {
    await server.close();
    await inside.close();
  }
});

Deno.test("An sse upstream naming a message endpoint on another origin is not posted to: nothing reaches that host, and the error names the origin", async () => {
  const inside = startHeaderEchoServer();
  const legacy = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () =>
      new Response(
        new ReadableStream({
          start(controller) {
            const endpoint = inside.url.replace("/mcp", "/messages?sessionId=1");
            controller.enqueue(new TextEncoder().encode(`event: endpoint\ndata: ${endpoint}\n\n`));
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      ),
  );
  try {
    const fleet = await writeFleet(`proxy_servers:
  - id: moved
    transport: sse
    url: http://127.0.0.1:${legacy.addr.port}/sse
    timeouts: { connect: 5 }
`);
    const gateway = await startGateway({ MCP_PROXY_CONFIG_PATH: fleet.path });
    try {
      await gateway.kernel.fleetStarted;
      await eventually(() => status(gateway)?.lastError !== undefined, "the refusal");
      assert.notEqual(status(gateway)!.state, "READY");
      assert.match(status(gateway)!.lastError!, /Endpoint origin does not match connection origin/);
      assert.deepEqual(inside.authorizations, [], "no request reached the other host");
    } finally {
      await gateway.stop();
      await fleet.remove();
    }
  } finally {
    await legacy.shutdown();
    await inside.close();
  }
});
