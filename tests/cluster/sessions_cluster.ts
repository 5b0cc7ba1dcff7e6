/**
 * Streamable HTTP sessions on any replica (issue 22, item 1): through HAProxy round-robin with no
 * stickiness, a session opened on one replica is served by all three; a GET stream on one replica
 * hears what another replica changed; a session id is no credential on any replica; DELETE and
 * expiry end a session everywhere.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { NEEDS_CLUSTER, startCluster, type TestCluster } from "../support/cluster.ts";
import { eventually, faultServer, fixtureCommand } from "../support/fleet.ts";

const IDLE_SECONDS = 4;

/** The fault server (`fixture`) and the sampling fixture (`sampling`: asks its client, has a subscribable resource). */
const FLEET = `proxy_servers:${faultServer("fixture")}
  - id: sampling
    command: ${JSON.stringify(fixtureCommand("upstreams/sampling_server.ts"))}
    sandbox: none
`;

/** Finished tool calls a replica counted (its own /metrics). */
async function callsServed(cluster: TestCluster, url: string): Promise<number> {
  const response = await fetch(`${url}/metrics`, {
    headers: { Authorization: `Bearer ${cluster.adminToken}` },
  });
  const text = await response.text();
  assert.equal(response.status, 200, text.slice(0, 200));
  return text.split("\n").filter((line) => line.startsWith("agent33_tool_calls_total{"))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

/** One JSON-RPC message POSTed on a session at `url`; the HTTP status and the answer, if any. */
async function post(
  url: string,
  token: string,
  session: string | undefined,
  message: Record<string, unknown>,
): Promise<
  { status: number; session: string | null; answer?: Record<string, unknown>; methods: string[] }
> {
  const response = await fetch(`${url}/mcp`, {
    method: "POST",
    headers: {
      Authorization: `Bearer ${token}`,
      Accept: "application/json, text/event-stream",
      "Content-Type": "application/json",
      ...(session ? { "Mcp-Session-Id": session } : {}),
    },
    body: JSON.stringify({ jsonrpc: "2.0", ...message }),
  });
  const text = await response.text();
  const sse = response.headers.get("content-type")?.includes("text/event-stream");
  const messages: Record<string, unknown>[] = sse
    ? text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)))
    : text
    ? [JSON.parse(text)]
    : [];
  return {
    status: response.status,
    session: response.headers.get("mcp-session-id"),
    answer: messages.find((m) => "result" in m || "error" in m),
    methods: messages.flatMap((m) => typeof m.method === "string" ? [m.method] : []),
  };
}

async function initialize(url: string, token: string): Promise<string> {
  const opened = await post(url, token, undefined, {
    id: 0,
    method: "initialize",
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "sessions-cluster", version: "1" },
    },
  });
  assert.equal(opened.status, 200);
  assert.ok(opened.session);
  await post(url, token, opened.session, { method: "notifications/initialized" });
  return opened.session;
}

/** Reads an SSE body until `want` matches one of its messages or `ms` pass; every method seen. */
/** Opens a session's GET stream on a replica; `methods` is what it hears until `heard()`. */
async function openStream(
  url: string,
  token: string,
  session: string,
): Promise<{ methods: Promise<string[]>; heard: () => void }> {
  const stream = await fetch(`${url}/mcp`, {
    headers: {
      Authorization: `Bearer ${token}`,
      Accept: "text/event-stream",
      "Mcp-Session-Id": session,
    },
  });
  assert.equal(stream.status, 200);
  let heard: () => void = () => {};
  const methods = listen(stream.body!, new Promise<void>((resolve) => heard = resolve));
  return { methods, heard: () => heard() };
}

async function listen(
  body: ReadableStream<Uint8Array>,
  until: Promise<unknown>,
): Promise<string[]> {
  const methods: string[] = [];
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  const stop = until.then(() => reader.cancel());
  for (;;) {
    const { value, done } = await reader.read().catch(() => ({ value: undefined, done: true }));
    if (done) break;
    buffer += value;
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const line of lines) {
      if (line.startsWith("data: ")) methods.push(JSON.parse(line.slice(6)).method);
    }
  }
  await stop;
  return methods;
}

async function otherTenantToken(): Promise<{ token: string; file: string }> {
  const token = crypto.randomUUID().replaceAll("-", "");
  const digest = new Uint8Array(
    await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token)),
  );
  const hex = [...digest].map((b) => b.toString(16).padStart(2, "0")).join("");
  const file = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(
    file,
    `tokens:\n  - sha256: ${hex}\n    tenant: globex\n    scopes: [mcp]\n    subject: mallory\n`,
  );
  return { token, file };
}

Deno.test("Streamable HTTP sessions are served by any replica", NEEDS_CLUSTER, async (t) => {
  const other = await otherTenantToken();
  const cluster = await startCluster({
    fleet: FLEET,
    env: {
      MCP_HTTP_SESSION_IDLE_SECONDS: String(IDLE_SECONDS),
      MCP_TOOL_DISCOVERY_MODE: "search",
      MCP_AUTH_TOKENS_FILE: other.file,
    },
  });
  const [a, b, c] = cluster.replicas as [
    TestCluster["replicas"][0],
    TestCluster["replicas"][0],
    TestCluster["replicas"][0],
  ];
  try {
    await t.step(
      "an SDK client initializes through HAProxy, then 100 calls spread over all three replicas succeed on its one session",
      async () => {
        const before = await Promise.all(cluster.replicas.map((r) => callsServed(cluster, r.url)));
        const transport = new StreamableHTTPClientTransport(new URL(`${cluster.url}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${cluster.token}` } },
        });
        const client = new Client({ name: "sessions-cluster", version: "1" });
        await client.connect(transport);
        const session = transport.sessionId;
        try {
          for (let i = 0; i < 100; i++) {
            const result = await client.callTool({ name: "fixture__ok", arguments: {} });
            assert.deepEqual(result.content, [{ type: "text", text: "ok" }], `call ${i}`);
          }
          assert.equal(transport.sessionId, session, "the same session throughout");
          const tools = await client.listTools();
          assert.ok(tools.tools.some((tool) => tool.name === "tool_search"));
        } finally {
          await transport.terminateSession();
          await client.close();
        }
        const after = await Promise.all(cluster.replicas.map((r) => callsServed(cluster, r.url)));
        const served = after.map((n, i) => n - before[i]!);
        assert.equal(served.reduce((x, y) => x + y, 0), 100);
        for (const [i, n] of served.entries()) {
          assert.ok(n > 0, `replica ${cluster.replicas[i]!.id} served none: ${served}`);
        }
      },
    );

    await t.step(
      "a GET stream on replica C hears tools/list_changed, once, for an activation made through replica A",
      async () => {
        const session = await initialize(a.url, cluster.token);
        const { methods, heard } = await openStream(c.url, cluster.token, session);
        const activated = await post(a.url, cluster.token, session, {
          id: 1,
          method: "tools/call",
          params: { name: "tool_activate", arguments: { names: ["fixture__ok"] } },
        });
        assert.equal(activated.status, 200);
        assert.equal((activated.answer?.result as { isError?: boolean }).isError, undefined);
        // Replica B's copy sees the activation as well (it reads the record once).
        const listed = await post(b.url, cluster.token, session, { id: 2, method: "tools/list" });
        const names = (listed.answer?.result as { tools: { name: string }[] }).tools.map((x) =>
          x.name
        );
        assert.ok(names.includes("fixture__ok"), names.join(", "));
        await new Promise((resolve) => setTimeout(resolve, 1000));
        heard();
        const seen = await methods;
        assert.deepEqual(
          seen.filter((m) => m === ToolListChangedNotificationSchema.shape.method.value),
          ["notifications/tools/list_changed"],
          `exactly one list_changed on C's stream: ${seen}`,
        );
      },
    );

    await t.step(
      "a GET stream on replica C hears tools/list_changed for a fleet edit made through replica A",
      async () => {
        const session = await initialize(b.url, cluster.token);
        const { methods, heard } = await openStream(c.url, cluster.token, session);
        const added = await fetch(`${a.url}/v1/mcp/proxy/servers`, {
          method: "POST",
          headers: {
            Authorization: `Bearer ${cluster.adminToken}`,
            "Content-Type": "application/json",
          },
          body: JSON.stringify({
            id: "extra",
            command: fixtureCommand("upstreams/fault_server.ts"),
            sandbox: "none",
          }),
        });
        assert.ok(added.ok, await added.text());
        // The new upstream starts on C too; its tools appear to the session through C.
        let id = 40;
        await eventually(async () => {
          const listed = await post(c.url, cluster.token, session, {
            id: id++,
            method: "tools/call",
            params: { name: "tool_search", arguments: { query: "answers at once", k: 10 } },
          });
          return JSON.stringify(listed.answer).includes("extra__ok");
        }, "extra__ok searchable through C");
        heard();
        assert.ok(
          (await methods).includes("notifications/tools/list_changed"),
          "C's stream heard the fleet change",
        );
      },
    );

    await t.step(
      "an SDK client's sampling answers reach the replica that asked, whichever replica HAProxy gives them to",
      async () => {
        const client = new Client({ name: "sampler", version: "1" }, {
          capabilities: { sampling: {} },
        });
        let asked = 0;
        client.setRequestHandler(CreateMessageRequestSchema, () => {
          asked++;
          return { role: "assistant", model: "m", content: { type: "text", text: "sampled" } };
        });
        const transport = new StreamableHTTPClientTransport(new URL(`${cluster.url}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${cluster.token}` } },
        });
        await client.connect(transport);
        try {
          for (let i = 0; i < 6; i++) {
            const result = await client.callTool({
              name: "sampling__ask",
              arguments: { marker: `m${i}` },
            });
            assert.deepEqual(result.content, [{ type: "text", text: `answer for m${i}: sampled` }]);
          }
          assert.equal(asked, 6);
        } finally {
          await transport.terminateSession();
          await client.close();
        }
      },
    );

    await t.step(
      "a resource update from replica A's upstream reaches the GET stream on replica C",
      async () => {
        const session = await initialize(a.url, cluster.token);
        const listed = await post(a.url, cluster.token, session, {
          id: 30,
          method: "resources/list",
        });
        const resources = (listed.answer?.result as { resources: { uri: string; name: string }[] })
          .resources;
        const uri = resources.find((r) => r.uri.includes("sampling") && r.name === "state")?.uri;
        assert.ok(uri, JSON.stringify(resources));
        const subscribed = await post(a.url, cluster.token, session, {
          id: 31,
          method: "resources/subscribe",
          params: { uri },
        });
        assert.deepEqual(subscribed.answer?.result, {});
        const { methods, heard } = await openStream(c.url, cluster.token, session);
        const touched = await post(a.url, cluster.token, session, {
          id: 32,
          method: "tools/call",
          params: { name: "sampling__touch", arguments: { marker: "x" } },
        });
        assert.equal(touched.status, 200);
        assert.deepEqual(touched.methods, [], "no update on the POST's own stream");
        await new Promise((resolve) => setTimeout(resolve, 1000));
        heard();
        assert.deepEqual(
          (await methods).filter((m) => m === "notifications/resources/updated"),
          ["notifications/resources/updated"],
        );
      },
    );

    await t.step(
      "a log level set through replica A filters a call's upstream log messages on B and C",
      async () => {
        const session = await initialize(a.url, cluster.token);
        const flood = (url: string, id: number) =>
          post(url, cluster.token, session, {
            id,
            method: "tools/call",
            params: { name: "fixture__flood", arguments: { count: 2 } },
          });
        const logs = (r: { methods: string[] }) =>
          r.methods.filter((m) => m === "notifications/message").length;
        assert.equal(logs(await flood(b.url, 10)), 2, "info messages pass by default");
        const set = await post(a.url, cluster.token, session, {
          id: 11,
          method: "logging/setLevel",
          params: { level: "error" },
        });
        assert.deepEqual(set.answer?.result, {});
        assert.equal(logs(await flood(c.url, 12)), 0, "C rebuilt its copy with the level");
        // B's copy learns it from the bucket watch (within milliseconds of the write).
        let id = 13;
        await eventually(async () => logs(await flood(b.url, id++)) === 0, "B's copy at error");
      },
    );

    await t.step(
      "another tenant's token with a valid session id is refused on every replica",
      async () => {
        const session = await initialize(a.url, cluster.token);
        for (const replica of [c, b, a]) {
          const refused = await post(replica.url, other.token, session, {
            id: 3,
            method: "tools/call",
            params: { name: "fixture__ok", arguments: {} },
          });
          assert.equal(refused.status, 403, replica.id);
        }
        const own = await post(c.url, cluster.token, session, { id: 4, method: "tools/list" });
        assert.equal(own.status, 200, "its owner still uses it after the refusals");
      },
    );

    await t.step("DELETE on one replica ends the session on every replica", async () => {
      const session = await initialize(a.url, cluster.token);
      for (const replica of [a, b, c]) {
        assert.equal(
          (await post(replica.url, cluster.token, session, { id: 5, method: "ping" })).status,
          200,
        );
      }
      const deleted = await fetch(`${b.url}/mcp`, {
        method: "DELETE",
        headers: { Authorization: `Bearer ${cluster.token}`, "Mcp-Session-Id": session },
      });
      await deleted.body?.cancel();
      assert.equal(deleted.status, 200);
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (const replica of [a, b, c]) {
        const gone = await post(replica.url, cluster.token, session, { id: 6, method: "ping" });
        assert.equal(gone.status, 404, replica.id);
      }
    });

    await t.step("an expired session is gone on every replica", async () => {
      const session = await initialize(a.url, cluster.token);
      for (const replica of [a, b, c]) {
        assert.equal(
          (await post(replica.url, cluster.token, session, { id: 7, method: "ping" })).status,
          200,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, (IDLE_SECONDS + 2) * 1000));
      for (const replica of [a, b, c]) {
        const gone = await post(replica.url, cluster.token, session, { id: 8, method: "ping" });
        assert.equal(gone.status, 404, replica.id);
      }
    });

    await t.step(
      "a replica restarted makes the subscriptions it held again when it rebuilds the session",
      async () => {
        const session = await initialize(b.url, cluster.token);
        const listed = await post(b.url, cluster.token, session, {
          id: 50,
          method: "resources/list",
        });
        const uri = (listed.answer?.result as { resources: { uri: string; name: string }[] })
          .resources.find((r) => r.uri.includes("sampling") && r.name === "state")?.uri;
        assert.ok(uri);
        const subscribed = await post(b.url, cluster.token, session, {
          id: 51,
          method: "resources/subscribe",
          params: { uri },
        });
        assert.deepEqual(subscribed.answer?.result, {});
        await b.kill("SIGKILL");
        await b.start();
        const { methods, heard } = await openStream(c.url, cluster.token, session);
        // The first request on the new process rebuilds the copy, subscribing its upstream again.
        const touched = await post(b.url, cluster.token, session, {
          id: 52,
          method: "tools/call",
          params: { name: "sampling__touch", arguments: { marker: "after restart" } },
        });
        assert.equal(touched.status, 200);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        heard();
        assert.ok(
          (await methods).includes("notifications/resources/updated"),
          "C's stream heard the update from the restarted replica's upstream",
        );
      },
    );

    await t.step(
      "a session outlives the replica that opened it: SIGKILLed, the others serve it through HAProxy",
      async () => {
        const session = await initialize(a.url, cluster.token);
        await a.kill("SIGKILL");
        let id = 20;
        const ping = () => post(cluster.url, cluster.token, session, { id: id++, method: "ping" });
        await eventually(async () => (await ping()).status === 200, "a live replica");
        for (let i = 0; i < 6; i++) {
          const called = await post(cluster.url, cluster.token, session, {
            id: id++,
            method: "tools/call",
            params: { name: "fixture__ok", arguments: {} },
          });
          assert.equal(called.status, 200, `call ${i}`);
          assert.deepEqual(
            (called.answer?.result as { content: unknown }).content,
            [{ type: "text", text: "ok" }],
          );
        }
      },
    );
  } finally {
    await cluster.stop();
    await Deno.remove(other.file);
  }
});
