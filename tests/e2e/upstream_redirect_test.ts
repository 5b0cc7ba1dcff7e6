/**
 * An HTTP upstream that redirects: the relay follows a redirect within the upstream's own origin
 * (a moved path) and no other, so a fleet entry cannot be turned by its server into a request to
 * another host (an internal service, a metadata endpoint). Real servers on 127.0.0.1, the
 * gateway's real relay worker and its fetch.
 */
import assert from "node:assert/strict";
import { startHeaderEchoServer } from "../fixtures/upstreams/header_echo_server.ts";
import { eventually } from "../support/fleet.ts";
import { type TestGateway, withFleet } from "../support/gateway.ts";

/** The fleet of one upstream `moved` at `url`. */
const movedAt = (url: string, transport = "http") =>
  `proxy_servers:
  - id: moved
    transport: ${transport}
    url: ${url}
    timeouts: { connect: 5 }
`;

const status = (gateway: TestGateway) =>
  gateway.kernel.proxy.status().find((s) => s.id === "moved");

Deno.test("An http upstream redirecting within its own origin is followed: its tools serve", async () => {
  const server = startHeaderEchoServer({ "/old": "/mcp" });
  try {
    await withFleet(movedAt(server.url.replace("/mcp", "/old")), async (gateway, client) => {
      await eventually(() => status(gateway)?.state === "READY", "the start");
      const result = await client.callTool({ name: "moved__headers", arguments: {} });
      assert.equal(result.isError, undefined);
    });
  } finally {
    await server.close();
  }
});

Deno.test("An http upstream redirecting to another origin is not followed: nothing reaches that host, and the error names the redirect", async () => {
  const inside = startHeaderEchoServer();
  const server = startHeaderEchoServer({ "/mcp": inside.url });
  try {
    await withFleet(movedAt(server.url), async (gateway) => {
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
    await withFleet(movedAt(`http://127.0.0.1:${legacy.addr.port}/sse`, "sse"), async (gateway) => {
      await eventually(() => status(gateway)?.lastError !== undefined, "the refusal");
      assert.notEqual(status(gateway)!.state, "READY");
      assert.match(status(gateway)!.lastError!, /Endpoint origin does not match connection origin/);
      assert.deepEqual(inside.authorizations, [], "no request reached the other host");
    });
  } finally {
    await legacy.shutdown();
    await inside.close();
  }
});
