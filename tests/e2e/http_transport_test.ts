import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import {
  McpError,
  SUPPORTED_PROTOCOL_VERSIONS,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { STATUS_URI } from "../../core/mcp/bridge.ts";
import {
  connectHttp,
  connectSse,
  initializeRequest,
  mcpHeaders,
  openSession,
  startGateway,
  type TestGateway,
} from "../support/gateway.ts";
import { eventually } from "../support/fleet.ts";

async function withGateway(
  env: Record<string, string>,
  fn: (gateway: TestGateway) => Promise<void>,
): Promise<void> {
  const gateway = await startGateway(env);
  try {
    await fn(gateway);
  } finally {
    await gateway.stop();
  }
}

async function withClient(
  gateway: TestGateway,
  connect: (g: TestGateway) => Promise<Client>,
  fn: (client: Client) => Promise<void>,
): Promise<void> {
  const client = await connect(gateway);
  try {
    await fn(client);
  } finally {
    await client.close();
  }
}

function addSkill(gateway: TestGateway, id: string): void {
  gateway.kernel.skills.set({
    id,
    name: `${id} skill`,
    description: `The ${id} skill`,
    prompt: {
      template: "Summarize {{topic}} briefly.",
      arguments: [{ name: "topic", description: "What to summarize", required: true }],
    },
    body: { id, kind: "skill" },
  });
}

Deno.test("Streamable HTTP negotiates every protocol version the SDK supports", async () => {
  await withGateway({ MCP_HTTP_RESPONSE_MODE: "json" }, async (gateway) => {
    for (const version of SUPPORTED_PROTOCOL_VERSIONS) {
      const response = await fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers: mcpHeaders(gateway.token),
        body: JSON.stringify(initializeRequest(version)),
      });
      assert.equal(response.status, 200, version);
      const body = await response.json();
      assert.equal(body.result.protocolVersion, version);
      const session = response.headers.get("mcp-session-id");
      assert.ok(session, "a session id is issued");
      const closed = await fetch(`${gateway.url}/mcp`, {
        method: "DELETE",
        headers: mcpHeaders(gateway.token, {
          "Mcp-Session-Id": session,
          "Mcp-Protocol-Version": version,
        }),
      });
      await closed.body?.cancel();
      assert.equal(closed.status, 200);
    }
  });
});

Deno.test("Streamable HTTP JSON response mode answers a POST with one JSON body", async () => {
  await withGateway({ MCP_HTTP_RESPONSE_MODE: "json" }, async (gateway) => {
    await withClient(gateway, connectHttp, async (client) => {
      const { tools } = await client.listTools();
      assert.ok(tools.some((t) => t.name === "system_status"));
    });
    const response = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(gateway.token),
      body: JSON.stringify(initializeRequest("2025-11-25")),
    });
    assert.match(response.headers.get("content-type") ?? "", /application\/json/);
    await response.body?.cancel();
  });
});

Deno.test("Streamable HTTP SSE response mode answers a POST with an event stream", async () => {
  await withGateway({}, async (gateway) => {
    const response = await fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers: mcpHeaders(gateway.token),
      body: JSON.stringify(initializeRequest("2025-11-25")),
    });
    assert.match(response.headers.get("content-type") ?? "", /text\/event-stream/);
    const text = await response.text();
    assert.match(text, /"protocolVersion":"2025-11-25"/);
  });
});

for (
  const [name, connect] of [["Streamable HTTP", connectHttp], ["legacy SSE", connectSse]] as const
) {
  Deno.test(`${name} serves tools, resources, templates and prompts to the SDK client`, async () => {
    await withGateway({}, async (gateway) => {
      addSkill(gateway, "summarize");
      await withClient(gateway, connect, async (client) => {
        const { tools } = await client.listTools();
        const status = tools.find((t) => t.name === "system_status");
        assert.ok(status, "system_status is listed");
        assert.equal(status.annotations?.readOnlyHint, true);

        const called = await client.callTool({ name: "system_status", arguments: {} });
        const counts = called.structuredContent as Record<string, number>;
        assert.equal(counts.tools, 1);
        assert.equal(counts.skills, 1);
        assert.equal(counts.sessions, 1);

        const { resources } = await client.listResources();
        assert.deepEqual(resources.map((r) => r.uri), [STATUS_URI, "agent33://skills/summarize"]);
        const read = await client.readResource({ uri: STATUS_URI });
        const content = read.contents[0] as { text: string };
        assert.equal(JSON.parse(content.text).skills, 1);

        const { resourceTemplates } = await client.listResourceTemplates();
        assert.deepEqual(resourceTemplates.map((t) => t.uriTemplate), [
          "agent33://agents/{id}",
          "agent33://workflows/{id}",
          "agent33://skills/{id}",
        ]);
        const byName = await client.readResource({ uri: "agent33://skills/summarize%20skill" });
        assert.equal(JSON.parse((byName.contents[0] as { text: string }).text).id, "summarize");
        await assert.rejects(
          client.readResource({ uri: "agent33://agents/nobody" }),
          (e: McpError) => e.code === -32002 && /nobody/.test(e.message),
        );

        const { prompts } = await client.listPrompts();
        assert.deepEqual(prompts.map((p) => p.name), ["summarize"]);
        const prompt = await client.getPrompt({ name: "summarize", arguments: { topic: "MCP" } });
        assert.deepEqual(prompt.messages[0]?.content, {
          type: "text",
          text: "Summarize MCP briefly.",
        });
        await assert.rejects(
          client.getPrompt({ name: "summarize", arguments: {} }),
          (e: McpError) => e.code === -32602 && /topic/.test(e.message),
        );

        const completion = await client.complete({
          ref: { type: "ref/resource", uri: "agent33://skills/{id}" },
          argument: { name: "id", value: "sum" },
        });
        assert.deepEqual(completion.completion.values, ["summarize"]);
        assert.deepEqual(await client.ping(), {});
        assert.deepEqual(await client.setLoggingLevel("warning"), {});
      });
    });
  });

  Deno.test(`${name} sends tools/list_changed when a tool is registered`, async () => {
    await withGateway({}, async (gateway) => {
      await withClient(gateway, connect, async (client) => {
        const changed = Promise.withResolvers<void>();
        client.setNotificationHandler(ToolListChangedNotificationSchema, () => changed.resolve());
        // The client opens its server-to-client stream right after initialize; give it a round trip.
        await client.ping();
        const remove = gateway.kernel.tools.register({
          name: "late_tool",
          description: "Registered after the client connected",
          inputSchema: { type: "object" },
          handler: () => Promise.resolve({ content: [] }),
        });
        await changed.promise;
        const { tools } = await client.listTools();
        assert.ok(tools.some((t) => t.name === "late_tool"));
        remove();
      });
    });
  });
}

Deno.test("Every list paginates with nextCursor", async () => {
  await withGateway({ MCP_LIST_PAGE_SIZE: "1" }, async (gateway) => {
    for (const name of ["alpha", "beta"]) {
      gateway.kernel.tools.register({
        name,
        description: name,
        inputSchema: { type: "object" },
        handler: () => Promise.resolve({ content: [] }),
      });
    }
    addSkill(gateway, "one");
    addSkill(gateway, "two");
    await withClient(gateway, connectHttp, async (client) => {
      const names: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const page = await client.listTools(cursor === undefined ? {} : { cursor });
        names.push(...page.tools.map((t) => t.name));
        cursor = page.nextCursor;
        pages++;
      } while (cursor !== undefined);
      assert.deepEqual(names, ["system_status", "alpha", "beta"]);
      assert.equal(pages, 3);

      const first = await client.listPrompts();
      assert.equal(first.prompts.length, 1);
      assert.ok(first.nextCursor);
      const second = await client.listPrompts({ cursor: first.nextCursor });
      assert.equal(second.prompts[0]?.name, "two");
      assert.equal(second.nextCursor, undefined);

      const resources = await client.listResources();
      assert.equal(resources.resources.length, 1);
      assert.ok(resources.nextCursor);
      const templates = await client.listResourceTemplates();
      assert.equal(templates.resourceTemplates.length, 1);
      assert.ok(templates.nextCursor);

      await assert.rejects(
        client.listTools({ cursor: "not-a-cursor" }),
        (e: McpError) => e.code === -32602 && /cursor/.test(e.message),
      );
    });
  });
});

Deno.test("A tool call with bad arguments or an unknown name gets a JSON-RPC error and the session stays up", async () => {
  await withGateway({}, async (gateway) => {
    gateway.kernel.tools.register({
      name: "add",
      description: "Adds two numbers",
      inputSchema: {
        type: "object",
        properties: { a: { type: "number" }, b: { type: "number" } },
        required: ["a", "b"],
      },
      handler: (args) =>
        Promise.resolve({
          content: [{ type: "text", text: String((args.a as number) + (args.b as number)) }],
        }),
    });
    await withClient(gateway, connectHttp, async (client) => {
      await assert.rejects(
        client.callTool({ name: "add", arguments: { a: "one", b: 2 } }),
        (e: McpError) =>
          e.code === -32602 && (e.data as { code: string }).code === "invalid_arguments",
      );
      await assert.rejects(
        client.callTool({ name: "nope", arguments: {} }),
        (e: McpError) => e.code === -32602 && (e.data as { code: string }).code === "unknown_tool",
      );
      const ok = await client.callTool({ name: "add", arguments: { a: 1, b: 2 } });
      assert.deepEqual(ok.content, [{ type: "text", text: "3" }]);
    });
  });
});

Deno.test("Streamable HTTP answers transport mistakes with 4xx that say what to send", async () => {
  await withGateway({ MCP_MAX_MESSAGE_BYTES: "2048" }, async (gateway) => {
    const post = (body: string, headers: Record<string, string> = mcpHeaders(gateway.token)) =>
      fetch(`${gateway.url}/mcp`, { method: "POST", headers, body });

    const notJson = await post("{nope");
    assert.equal(notJson.status, 400);
    assert.equal((await notJson.json()).error.code, -32700);

    const noSession = await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }));
    assert.equal(noSession.status, 400);
    assert.match((await noSession.json()).error.message, /initialize/);

    const unknown = await post(
      JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      mcpHeaders(gateway.token, { "Mcp-Session-Id": "no-such-session" }),
    );
    assert.equal(unknown.status, 404);
    assert.match((await unknown.json()).error.message, /initialize/);

    const wrongType = await post(
      JSON.stringify(initializeRequest("2025-11-25")),
      { ...mcpHeaders(gateway.token), "Content-Type": "text/plain" },
    );
    assert.equal(wrongType.status, 415);
    await wrongType.body?.cancel();

    // Refused by the listener before the transport saw it, yet answered as JSON-RPC, as MCP is.
    const tooBig = await post(JSON.stringify({ pad: "x".repeat(4096) }));
    assert.equal(tooBig.status, 413);
    const tooBigBody = await tooBig.json();
    assert.equal(tooBigBody.jsonrpc, "2.0");
    assert.equal(tooBigBody.error.code, -32600);
    assert.equal(tooBigBody.error.data.code, "payload_too_large");
    assert.match(tooBigBody.error.message, /MCP_MAX_MESSAGE_BYTES/);

    const get = await fetch(`${gateway.url}/mcp`, { headers: mcpHeaders(gateway.token) });
    assert.equal(get.status, 400);
    assert.match((await get.json()).error.message, /Mcp-Session-Id/);

    const missing = await fetch(`${gateway.url}/nowhere`, { headers: mcpHeaders(gateway.token) });
    assert.equal(missing.status, 404);
    assert.match((await missing.json()).error.message, /\/mcp/);
  });
});

Deno.test("Legacy SSE answers transport mistakes with 4xx JSON-RPC errors that say what to send", async () => {
  await withGateway({}, async (gateway) => {
    const post = (query: string, body: string, type = "application/json") =>
      fetch(`${gateway.url}/messages${query}`, {
        method: "POST",
        headers: { Authorization: `Bearer ${gateway.token}`, "Content-Type": type },
        body,
      });
    // /messages is an MCP endpoint: each refusal is a JSON-RPC error with the stable code.
    const refused = async (answer: Response, status: number, code: string, says: RegExp) => {
      assert.equal(answer.status, status);
      const body = await answer.json();
      assert.equal(body.jsonrpc, "2.0");
      assert.equal(body.id, null);
      assert.equal(body.error.code, -32600);
      assert.equal(body.error.data.code, code);
      assert.match(body.error.message, says);
    };
    await refused(await post("", "{}"), 400, "invalid_request", /sessionId/);
    await refused(await post("?sessionId=nope", "{}"), 404, "not_found", /GET \/sse/);
    const sse = await fetch(`${gateway.url}/sse`, {
      headers: { Authorization: `Bearer ${gateway.token}`, Accept: "text/event-stream" },
    });
    const reader = sse.body!.pipeThrough(new TextDecoderStream()).getReader();
    let head = "";
    while (!/sessionId=[\w-]+/.test(head)) head += (await reader.read()).value ?? "";
    const query = /data: \/messages(\?sessionId=[\w-]+)/.exec(head)![1]!;
    const ping = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "ping" });
    await refused(
      await post(query, ping, "text/plain"),
      415,
      "unsupported_media_type",
      /Content-Type: application\/json/,
    );
    await reader.cancel();
  });
});

Deno.test("/healthz and /readyz answer without credentials", async () => {
  await withGateway({}, async (gateway) => {
    const health = await fetch(`${gateway.url}/healthz`);
    assert.deepEqual(await health.json(), { status: "ok" });
    const ready = await fetch(`${gateway.url}/readyz`);
    assert.equal(ready.status, 200);
    assert.equal((await ready.json()).status, "ready");
  });
});

Deno.test("Streamable HTTP refuses a request id already in flight on the session instead of hanging", async () => {
  // Regression (found by the fuzzer): the SDK maps responses by id, so a second request with the
  // same id in flight left the first HTTP response waiting forever.
  await withGateway({ MCP_HTTP_RESPONSE_MODE: "json" }, async (gateway) => {
    gateway.kernel.tools.register({
      name: "slow",
      description: "Answers after a moment",
      inputSchema: { type: "object" },
      handler: () => new Promise((r) => setTimeout(() => r({ content: [] }), 200)),
    });
    const headers = await openSession(gateway);
    const call = (id: number) =>
      fetch(`${gateway.url}/mcp`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          jsonrpc: "2.0",
          id,
          method: "tools/call",
          params: { name: "slow" },
        }),
        signal: AbortSignal.timeout(10_000),
      });
    const [first, second] = await Promise.all([call(5), call(5)]);
    const statuses = [first.status, second.status].sort();
    assert.deepEqual(statuses, [200, 400]);
    const refused = first.status === 400 ? first : second;
    const answered = first.status === 400 ? second : first;
    assert.match((await refused.json()).error.message, /already used by a request in flight/);
    assert.equal((await answered.json()).id, 5);
    const again = await call(5);
    assert.equal(again.status, 200, "the id is free again once answered");
    await again.body?.cancel();
  });
});

Deno.test("An idle Streamable HTTP session is closed after MCP_HTTP_SESSION_IDLE_SECONDS; one with an open stream is kept", async () => {
  const gateway = await startGateway({ MCP_HTTP_SESSION_IDLE_SECONDS: "1" });
  const ping = (headers: Record<string, string>) =>
    fetch(`${gateway.url}/mcp`, {
      method: "POST",
      headers,
      body: JSON.stringify({ jsonrpc: "2.0", id: 9, method: "ping" }),
    });
  try {
    const left = await openSession(gateway);
    const listening = await openSession(gateway);
    // The listening client holds its GET stream open; the other just went away without DELETE.
    const stream = await fetch(`${gateway.url}/mcp`, {
      headers: { ...listening, Accept: "text/event-stream" },
    });
    assert.equal(stream.status, 200);
    const sessions = gateway.kernel.bridge.sessionCount;
    await eventually(
      () => gateway.kernel.bridge.sessionCount === sessions - 1,
      "the idle session to be closed",
      10_000,
    );
    const gone = await ping(left);
    assert.equal(gone.status, 404);
    assert.match(await gone.text(), /Session not found: it expired or was closed/);
    const kept = await ping(listening);
    assert.equal(kept.status, 200);
    await kept.body?.cancel();
    await stream.body?.cancel();
  } finally {
    await gateway.stop();
  }
});
