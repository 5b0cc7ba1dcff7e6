import assert from "node:assert/strict";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  type JSONRPCMessage,
  type RequestId,
} from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../../core/support/clock.ts";
import { compose } from "../../core/plugin_api/stage_pipeline.ts";
import type { UnreadLimits, UnreadOverflow } from "../../core/plugin_api/mod.ts";
import { initializeRequest } from "../../tests/support/gateway.ts";
import { DirectRequests, type ResponseMode } from "./direct_requests.ts";

const HEADERS = {
  "content-type": "application/json",
  accept: "application/json, text/event-stream",
  "mcp-protocol-version": "2025-11-25",
};

/** One session: the SDK transport and Server, with DirectRequests composed as the plugin does. */
async function session(
  mode: ResponseMode,
  clock = new ManualClock(),
  limits: UnreadLimits = { maxBytes: 1 << 24, maxMessages: 10_000 },
) {
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: () => crypto.randomUUID(),
    enableJsonResponse: mode === "json",
  });
  const cutOffs: { id: RequestId; overflow: UnreadOverflow }[] = [];
  // As the plugin does: a cut-off request is cancelled.
  const direct = new DirectRequests(transport, mode, clock, limits, (id, overflow) => {
    cutOffs.push({ id, overflow });
    transport.onmessage?.({
      jsonrpc: "2.0",
      method: "notifications/cancelled",
      params: { requestId: id, reason: "not read" },
    });
  });
  const server = new Server({ name: "s", version: "1" }, { capabilities: { tools: {} } });
  let release: (() => void) | undefined;
  let flooding: AbortSignal | undefined;
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    if (request.params.name === "flood") {
      flooding = extra.signal;
      for (let i = 0; i < 1000 && !extra.signal.aborted; i++) {
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken: "f", progress: i, message: "x".repeat(100) },
        });
      }
      return { content: [{ type: "text", text: "flooded" }] };
    }
    const token = request.params._meta?.progressToken;
    if (token !== undefined) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: 1, total: 2 },
      });
    }
    if (request.params.name === "hold") await new Promise<void>((r) => release = r);
    if (request.params.name === "late") {
      await new Promise<void>((r) => release = r);
      await extra.sendNotification({
        method: "notifications/message",
        params: { level: "info", data: "still working" },
      });
    }
    if (request.params.name === "fail") throw new Error("it failed");
    return { content: [{ type: "text", text: `${request.params.name}:${extra.requestId}` }] };
  });
  await server.connect(compose(transport, [direct]));
  const init = await transport.handleRequest(post(initializeRequest("2025-11-25", 0)));
  await init.text(); // read, not cancelled: in SSE mode the answer is still being written
  const id = init.headers.get("mcp-session-id")!;
  return {
    transport,
    direct,
    server,
    id,
    release: () => release?.(),
    cutOffs,
    flooding: () => flooding,
    request: (body: unknown, headers: Record<string, string> = {}) =>
      post(body, { "mcp-session-id": id, ...headers }),
  };
}

function post(body: unknown, headers: Record<string, string> = {}): Request {
  return new Request("http://localhost/mcp", {
    method: "POST",
    headers: { ...HEADERS, ...headers },
    body: JSON.stringify(body),
  });
}

/** A POST answered the direct way (asserting it qualifies). */
async function directly(s: Awaited<ReturnType<typeof session>>, body: unknown) {
  const request = s.request(body);
  const message = s.direct.qualifies(request, body);
  assert.ok(message, "the call qualifies for the direct path");
  return await s.direct.serve(request, message as JSONRPCMessage & { id: number });
}

/** The SSE events of a response body, parsed. */
async function events(response: Response): Promise<unknown[]> {
  const text = await response.text();
  return text.split("\n\n").filter((e) => e.startsWith("event: message")).map((e) =>
    JSON.parse(e.split("\n").find((l) => l.startsWith("data: "))!.slice(6))
  );
}

const call = (id: number, name: string, meta?: Record<string, unknown>) => ({
  jsonrpc: "2.0",
  id,
  method: "tools/call",
  params: { name, arguments: {}, ...(meta ? { _meta: meta } : {}) },
});

Deno.test("In JSON mode a direct request is answered exactly as the SDK transport answers it", async () => {
  const sdk = await session("json");
  const ours = await session("json");
  const requests = [
    call(1, "echo"),
    call(2, "fail"),
    call("x" as unknown as number, "echo"),
    { jsonrpc: "2.0", id: 3, method: "tools/list" },
    { jsonrpc: "2.0", id: 4, method: "ping" },
    { jsonrpc: "2.0", id: 5, method: "no/such/method" },
  ];
  for (const body of requests) {
    const expected = await sdk.transport.handleRequest(sdk.request(body));
    const actual = await directly(ours, body);
    assert.equal(actual.status, expected.status);
    assert.equal(actual.headers.get("content-type"), expected.headers.get("content-type"));
    assert.equal(actual.headers.get("mcp-session-id"), ours.id);
    assert.equal(expected.headers.get("mcp-session-id"), sdk.id);
    assert.deepEqual(await actual.json(), await expected.json());
  }
  await sdk.server.close();
  await ours.server.close();
});

Deno.test("In SSE mode a direct request streams its notifications, then its answer, as the SDK does", async () => {
  const sdk = await session("sse");
  const ours = await session("sse");
  const body = call(7, "echo", { progressToken: "p" });
  const expected = await sdk.transport.handleRequest(sdk.request(body));
  const actual = await directly(ours, body);
  assert.equal(actual.status, expected.status);
  for (const header of ["content-type", "cache-control", "connection", "x-accel-buffering"]) {
    assert.equal(actual.headers.get(header), expected.headers.get(header), header);
  }
  const got = await events(actual);
  assert.deepEqual(got, await events(expected));
  assert.equal(got.length, 2, "a progress notification, then the result");
  await sdk.server.close();
  await ours.server.close();
});

Deno.test("In JSON mode a direct request's notifications are dropped, as in the SDK's JSON mode", async () => {
  const s = await session("json");
  const response = await directly(s, call(3, "echo", { progressToken: 9 }));
  assert.deepEqual((await response.json()).id, 3);
  await s.server.close();
});

Deno.test("Only a single well-formed request other than initialize, with acceptable headers, takes the direct path", async () => {
  const s = await session("json");
  const ok = call(1, "echo");
  assert.ok(s.direct.qualifies(s.request(ok), ok));
  const list = { jsonrpc: "2.0", id: 2, method: "tools/list" };
  assert.ok(s.direct.qualifies(s.request(list), list));
  const refused: [string, unknown, Record<string, string>][] = [
    ["a batch", [ok], {}],
    ["initialize", { jsonrpc: "2.0", id: 1, method: "initialize", params: {} }, {}],
    ["a notification", { jsonrpc: "2.0", method: "tools/call", params: { name: "x" } }, {}],
    ["a malformed message", { ...ok, extra: true }, {}],
    ["an Accept without SSE", ok, { accept: "application/json" }],
    ["a text/plain body", ok, { "content-type": "text/plain" }],
    ["an unsupported protocol version", ok, { "mcp-protocol-version": "1999-01-01" }],
  ];
  for (const [what, body, headers] of refused) {
    assert.equal(s.direct.qualifies(s.request(body, headers), body), undefined, what);
  }
  await s.server.close();
});

Deno.test("A request still waiting when its session closes is answered with an error naming why", async () => {
  for (const mode of ["json", "sse"] as const) {
    const s = await session(mode);
    const pending = directly(s, call(5, "hold"));
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(s.direct.size, 1);
    await s.transport.close();
    s.direct.abandonAll("it was closed");
    const response = await pending;
    const answer = mode === "json" ? await response.json() : (await events(response))[0];
    assert.equal(answer.id, 5);
    assert.match(answer.error.message, /session closed \(it was closed\)/);
    assert.equal(s.direct.size, 0);
    s.release();
    await s.server.close();
  }
});

Deno.test("An SSE-mode answer that comes first is the whole body: one event, the SDK's headers", async () => {
  const sdk = await session("sse");
  const ours = await session("sse");
  const expected = await sdk.transport.handleRequest(sdk.request(call(8, "echo")));
  const actual = await directly(ours, call(8, "echo"));
  for (const header of ["content-type", "cache-control", "connection", "x-accel-buffering"]) {
    assert.equal(actual.headers.get(header), expected.headers.get(header), header);
  }
  assert.equal(actual.headers.get("mcp-session-id"), ours.id);
  const text = await actual.text();
  assert.match(text, /^event: message\ndata: \{.*\}\n\n$/);
  assert.deepEqual((await events(new Response(text)))[0], (await events(expected))[0]);
  await sdk.server.close();
  await ours.server.close();
});

Deno.test("An SSE-mode request still running after 1 s gets its headers and stream before its answer", async () => {
  const clock = new ManualClock();
  const s = await session("sse", clock);
  let settled = false;
  const pending = directly(s, call(9, "hold")).finally(() => settled = true);
  await new Promise((r) => setTimeout(r, 10));
  assert.equal(settled, false, "headers are held while the answer may still come first");
  clock.advance(1_000);
  const response = await pending;
  s.release();
  const got = await events(response);
  assert.equal((got[0] as { id: number }).id, 9);
  await s.server.close();
});

Deno.test("After its SSE client went away, a request's notifications and answer are dropped quietly", async () => {
  const clock = new ManualClock();
  const s = await session("sse", clock);
  const errors: Error[] = [];
  s.server.onerror = (error) => errors.push(error);
  s.transport.onerror = (error) => errors.push(error);
  const pending = directly(s, call(10, "late", { progressToken: "p" }));
  const response = await pending; // the progress notification opened the stream
  await response.body!.cancel();
  s.release();
  await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(errors.map(String), []);
  assert.equal(s.direct.size, 0, "the answer released the waiter");
  await s.server.close();
});

Deno.test("An SSE-mode direct request sends a keep-alive comment every 15 s while it runs", async () => {
  const clock = new ManualClock();
  const s = await session("sse", clock);
  const pending = directly(s, call(6, "hold"));
  clock.advance(1_000); // the stream opens
  const response = await pending;
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  clock.advance(15_000);
  assert.equal((await reader.read()).value, ": keepalive\n\n");
  s.release();
  const rest = (await reader.read()).value!;
  assert.match(rest, /^event: message\ndata: .*"id":6/);
  assert.equal((await reader.read()).done, true);
  await s.server.close();
});

Deno.test("An SSE-mode request whose client does not read its stream is cut off at the bound and cancelled", async () => {
  const s = await session("sse", new ManualClock(), { maxBytes: 1 << 20, maxMessages: 50 });
  const errors: Error[] = [];
  s.server.onerror = (error) => errors.push(error);
  const response = await directly(s, call(11, "flood"));
  // Never read: the notifications pile up until the bound.
  for (let i = 0; i < 50 && s.cutOffs.length === 0; i++) {
    await new Promise((r) => setTimeout(r, 1));
  }
  assert.equal(s.cutOffs.length, 1);
  assert.equal(s.cutOffs[0]!.id, 11);
  assert.equal(s.cutOffs[0]!.overflow.limit, "messages");
  assert.equal(s.cutOffs[0]!.overflow.queuedMessages, 50);
  assert.equal(s.flooding()?.aborted, true, "the request was cancelled");
  assert.equal(s.direct.size, 0, "its waiter is gone");
  await assert.rejects(response.body!.getReader().read(), /fell behind/);
  assert.deepEqual(errors.map(String), []);
  await s.server.close();
});

Deno.test("A request the client cancels ends its response at once, without an answer, and frees its waiter", async () => {
  for (const mode of ["sse", "json"] as const) {
    const s = await session(mode);
    const pending = directly(s, call(12, "hold"));
    s.direct.cancel(12);
    const response = await pending;
    assert.equal(await response.text(), "", `${mode}: no answer`);
    assert.equal(s.direct.size, 0);
    s.release();
    await s.server.close();
  }
});
