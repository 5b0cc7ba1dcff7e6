import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { TransportSendOptions } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  type ClientCapabilities,
  ErrorCode,
  type JSONRPCMessage,
  ListRootsRequestSchema,
  ListRootsResultSchema,
  ListToolsRequestSchema,
  McpError,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";
import {
  type HandlerExtra,
  type ToolCallHandler,
  ToolCallLane,
  type ToolCallRequest,
} from "./tool_call_lane.ts";
import { compose } from "../plugin_api/stage_pipeline.ts";

/** Leak sanitizers on (Deno 2.9 has them off by default): every timer cleared, every transport closed. */
const SANITIZED = { sanitizeOps: true, sanitizeResources: true };

type Message = JSONRPCMessage & {
  id?: unknown;
  method?: unknown;
  result?: unknown;
  error?: unknown;
};

/** A handler whose calls the test answers one by one. */
function heldHandler() {
  const calls: {
    request: ToolCallRequest;
    extra: HandlerExtra;
    reply: PromiseWithResolvers<CallToolResult>;
  }[] = [];
  let arrived = Promise.withResolvers<void>();
  const handler: ToolCallHandler = (request, extra) => {
    const reply = Promise.withResolvers<CallToolResult>();
    calls.push({ request, extra, reply });
    arrived.resolve();
    arrived = Promise.withResolvers<void>();
    return reply.promise;
  };
  return {
    handler,
    calls,
    /** The `n`th call (1-based), once it has reached the handler. */
    async call(n: number) {
      while (calls.length < n) await arrived.promise;
      return calls[n - 1]!;
    },
  };
}

interface Session {
  client: Client;
  clientTransport: InMemoryTransport;
  server: Server;
  /** Undefined when the session runs without the lane (the SDK path, for comparison). */
  lane: ToolCallLane | undefined;
  /** Every raw message the client's transport received. */
  received: Message[];
  /** Every message the server sent, with its send options. */
  serverSent: { message: Message; options: TransportSendOptions | undefined }[];
  /** Calls that reached the SDK's registered tools/call handler. */
  sdkCalls: unknown[];
  /** What the SDK Server reported through `onerror`. */
  serverErrors: string[];
  /** The raw response to `id`, once it arrives. */
  response(id: string | number): Promise<Message>;
  /** Sends a raw message from the client side (with the caller's auth, as a transport would). */
  send(message: unknown, options?: Parameters<InMemoryTransport["send"]>[1]): Promise<void>;
  /** A round trip through the SDK Server (ping): everything sent before it has been handled. */
  roundTrip(): Promise<void>;
  close(): Promise<void>;
}

/**
 * A real SDK Server (tools capability) and Client over the SDK's in-memory pair, with the lane
 * composed in front of the Server unless `handler` is undefined.
 */
async function session(options: {
  handler: ToolCallHandler | undefined;
  sdkHandler?: (request: unknown, extra: HandlerExtra) => CallToolResult | Promise<CallToolResult>;
  capabilities?: ClientCapabilities;
  setupClient?: (client: Client) => void;
}): Promise<Session> {
  const [clientTransport, serverTransport] = InMemoryTransport.createLinkedPair();
  const server = new Server({ name: "lane-test", version: "1.0.0" }, {
    capabilities: { tools: {} },
  });
  const sdkCalls: unknown[] = [];
  server.setRequestHandler(CallToolRequestSchema, (request, extra) => {
    sdkCalls.push(request);
    if (!options.sdkHandler) throw new Error("the SDK's tools/call handler ran");
    return options.sdkHandler(request, extra);
  });
  server.setRequestHandler(ListToolsRequestSchema, () => ({
    tools: [{ name: "echo", inputSchema: { type: "object" } }],
  }));
  const serverSent: Session["serverSent"] = [];
  const send = serverTransport.send.bind(serverTransport);
  serverTransport.send = (message, sendOptions) => {
    serverSent.push({ message: message as Message, options: sendOptions });
    return send(message, sendOptions);
  };
  const serverErrors: string[] = [];
  server.onerror = (error) => serverErrors.push(error.message);
  const lane = options.handler ? new ToolCallLane(server, options.handler) : undefined;
  await server.connect(lane ? compose(serverTransport, [lane]) : serverTransport);

  const received: Message[] = [];
  const waiting = new Map<unknown, PromiseWithResolvers<Message>>();
  const waiter = (id: unknown) => {
    let w = waiting.get(id);
    if (!w) waiting.set(id, w = Promise.withResolvers<Message>());
    return w;
  };
  // Set before the Client connects: the SDK's Protocol calls it first for every message.
  clientTransport.onmessage = (message) => {
    const m = message as Message;
    received.push(m);
    if (m.method === undefined && m.id !== undefined) waiter(m.id).resolve(m);
  };
  const client = new Client(
    { name: "lane-test-client", version: "1.0.0" },
    { capabilities: options.capabilities ?? {} },
  );
  options.setupClient?.(client);
  await client.connect(clientTransport);

  let pings = 0;
  const s: Session = {
    client,
    clientTransport,
    server,
    lane,
    received,
    serverSent,
    sdkCalls,
    serverErrors,
    response: (id) => waiter(id).promise,
    send: (message, sendOptions) => clientTransport.send(message as JSONRPCMessage, sendOptions),
    async roundTrip() {
      const id = `ping-${++pings}`;
      await s.send({ jsonrpc: "2.0", id, method: "ping" });
      await s.response(id);
    },
    close: () => client.close(),
  };
  return s;
}

function toolsCall(id: string | number, params: unknown) {
  return { jsonrpc: "2.0", id, method: "tools/call", params };
}

/** The raw response to one message, sent through a session. */
async function answer(s: Session, message: { id: string | number }): Promise<Message> {
  await s.send(message);
  return await s.response(message.id);
}

/** Lets queued promise reactions run until `check` holds (no timers). */
async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 100 && !check(); i++) await Promise.resolve();
  assert.ok(check(), "the condition held after the pending reactions ran");
}

Deno.test(
  "A well-formed tools/call reaches the lane's handler, not the SDK's, and the client receives the handler's result",
  SANITIZED,
  async () => {
    const result: CallToolResult = {
      content: [{ type: "text", text: "from the lane" }],
      structuredContent: { n: 1 },
      isError: false,
    };
    const held = heldHandler();
    const s = await session({ handler: held.handler });
    try {
      const call = s.client.callTool({ name: "echo", arguments: { message: "hi" } });
      const { request, extra, reply } = await held.call(1);
      assert.deepEqual(request, {
        method: "tools/call",
        params: { name: "echo", arguments: { message: "hi" } },
      });
      reply.resolve(result);
      assert.deepEqual(await call, result);
      const raw = await s.response(extra.requestId);
      assert.deepEqual(raw, { jsonrpc: "2.0", id: extra.requestId, result });
      assert.deepEqual(s.sdkCalls, []);
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "The handler receives the SDK's context: an abort signal, the request id, _meta and the caller's auth",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const s = await session({ handler: held.handler });
    try {
      const authInfo = { token: "t0k3n", clientId: "desk", scopes: ["mcp"] };
      const _meta = { progressToken: "p-1", "example.com/trace": "abc" };
      await s.send(toolsCall("ctx-1", { name: "echo", arguments: {}, _meta }), { authInfo });
      const { request, extra, reply } = await held.call(1);
      assert.equal(extra.requestId, "ctx-1");
      assert.deepEqual(extra._meta, _meta);
      assert.deepEqual(request.params._meta, _meta);
      assert.deepEqual(extra.authInfo, authInfo);
      assert.ok(extra.signal instanceof AbortSignal);
      assert.equal(extra.signal.aborted, false);
      assert.equal(extra.sessionId, undefined, "the in-memory transport has no session id");
      reply.resolve({ content: [] });
      await s.response("ctx-1");
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "A rejection with an McpError reaches the client as the same JSON-RPC error the SDK sends",
  SANITIZED,
  async () => {
    const errors = [
      new McpError(ErrorCode.InvalidParams, "Unknown tool", { code: "unknown_tool", tool: "x" }),
      new McpError(-32042, "needs a URL", { elicitations: [] }),
      new McpError(ErrorCode.InvalidRequest, "no data"),
      new GatewayError("tool_denied", 'Tool "x" is denied', { tool: "x" }).toMcpError(),
    ];
    for (const [i, error] of errors.entries()) {
      const lane = await session({ handler: () => Promise.reject(error) });
      const sdk = await session({ handler: undefined, sdkHandler: () => Promise.reject(error) });
      try {
        const message = toolsCall(`e-${i}`, { name: "x", arguments: {} });
        const viaLane = await answer(lane, message);
        const viaSdk = await answer(sdk, message);
        assert.deepEqual(viaLane, viaSdk, `error ${i} as the SDK sends it`);
        assert.deepEqual(viaLane.error, {
          code: error.code,
          message: error.message,
          ...(error.data === undefined ? {} : { data: error.data }),
        });
        await assert.rejects(lane.client.callTool({ name: "x" }), (e: unknown) => {
          assert.ok(e instanceof McpError);
          assert.equal(e.code, error.code);
          assert.deepEqual(e.data, error.data);
          return true;
        });
      } finally {
        await lane.close();
        await sdk.close();
      }
    }
  },
);

Deno.test(
  "An error without an integer code becomes InternalError, as through the SDK",
  SANITIZED,
  async () => {
    const errors: unknown[] = [
      new Error("boom"),
      Object.assign(new Error("string code"), { code: "unknown_tool", data: { why: "x" } }),
      Object.assign(new Error("fractional code"), { code: 1.5 }),
      "a thrown string",
    ];
    for (const [i, error] of errors.entries()) {
      const lane = await session({ handler: () => Promise.reject(error) });
      const sdk = await session({ handler: undefined, sdkHandler: () => Promise.reject(error) });
      try {
        const message = toolsCall(`i-${i}`, { name: "x" });
        const viaLane = await answer(lane, message);
        assert.deepEqual(viaLane, await answer(sdk, message), `error ${i} as the SDK sends it`);
        assert.equal((viaLane.error as { code: number }).code, ErrorCode.InternalError);
      } finally {
        await lane.close();
        await sdk.close();
      }
    }
  },
);

Deno.test(
  "A malformed call (name not a string, arguments an array, _meta not an object, a task param) gets the SDK's own handling",
  SANITIZED,
  async () => {
    const malformed: [string, unknown][] = [
      ["name not a string", { name: 42 }],
      ["no name", { arguments: {} }],
      ["no params", undefined],
      ["arguments an array", { name: "echo", arguments: ["a"] }],
      ["arguments a string", { name: "echo", arguments: "a" }],
      ["_meta not an object", { name: "echo", _meta: "x" }],
      ["_meta an array", { name: "echo", _meta: [] }],
      ["a fractional progress token", { name: "echo", _meta: { progressToken: 1.5 } }],
      ["a task param", { name: "echo", arguments: {}, task: { ttl: 1000 } }],
    ];
    const sdkHandler = () => ({ content: [{ type: "text" as const, text: "sdk" }] });
    const held = heldHandler();
    const lane = await session({ handler: held.handler, sdkHandler });
    const sdk = await session({ handler: undefined, sdkHandler });
    /** The SDK answers, or reports the frame through onerror (at once) and answers nothing. */
    const outcome = async (s: Session, message: { id: string }) => {
      const errors = s.serverErrors.length;
      await s.send(message);
      if (s.serverErrors.length === errors) await s.response(message.id);
      return {
        replies: s.received.filter((m) => m.id === message.id),
        errors: s.serverErrors.slice(errors),
      };
    };
    try {
      for (const [i, [what, params]] of malformed.entries()) {
        const message = toolsCall(`m-${i}`, params) as { id: string };
        const viaLane = await outcome(lane, message);
        assert.deepEqual(viaLane, await outcome(sdk, message), `${what}: as the SDK handles it`);
      }
      assert.equal(held.calls.length, 0, "the lane's handler saw none of them");
      assert.equal(lane.sdkCalls.length, sdk.sdkCalls.length);
      assert.equal(lane.lane!.inFlight, 0);
    } finally {
      await lane.close();
      await sdk.close();
    }
  },
);

Deno.test(
  "notifications/cancelled for a call in the lane aborts the handler's signal with the reason and no response is sent for it",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const s = await session({ handler: held.handler });
    try {
      const controller = new AbortController();
      const call = s.client.callTool({ name: "slow" }, undefined, { signal: controller.signal });
      const { extra, reply } = await held.call(1);
      controller.abort("the user pressed stop"); // the Client sends notifications/cancelled
      await assert.rejects(call);
      assert.equal(extra.signal.aborted, true);
      assert.equal(extra.signal.reason, "the user pressed stop");
      assert.equal(s.lane!.inFlight, 0);

      reply.resolve({ content: [{ type: "text", text: "too late" }] });
      await reply.promise;
      await s.roundTrip();
      assert.equal(s.received.filter((m) => m.id === extra.requestId).length, 0);
      const cancelled = s.serverSent.find((x) => x.message.id === extra.requestId);
      assert.equal(cancelled, undefined, "the server sent nothing for the cancelled call");
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "A cancelled handler's notifications are dropped and its requests fail with ConnectionClosed, as in the SDK",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const s = await session({ handler: held.handler, capabilities: { roots: {} } });
    try {
      await s.send(toolsCall("c-1", { name: "slow", _meta: { progressToken: "p" } }));
      const { extra, reply } = await held.call(1);
      await s.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: "c-1", reason: "stop" },
      });
      assert.equal(extra.signal.reason, "stop");
      const before = s.serverSent.length;
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: "p", progress: 1 },
      });
      assert.equal(s.serverSent.length, before, "no notification after the cancellation");
      await assert.rejects(
        extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema),
        (e: unknown) => e instanceof McpError && e.code === ErrorCode.ConnectionClosed,
      );
      reply.resolve({ content: [] });
      await s.roundTrip();
      assert.equal(s.received.some((m) => m.id === "c-1"), false);
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "notifications/cancelled for a request the lane does not serve goes to the SDK",
  SANITIZED,
  async () => {
    let aborted: unknown;
    const sdkHandler = (_: unknown, extra: HandlerExtra) =>
      new Promise<CallToolResult>((resolve) =>
        extra.signal.addEventListener("abort", () => {
          aborted = extra.signal.reason;
          resolve({ content: [] });
        })
      );
    const held = heldHandler();
    const s = await session({ handler: held.handler, sdkHandler });
    try {
      await s.send(toolsCall("d", { name: "slow" }));
      const first = await held.call(1);
      await s.send(toolsCall("d", { name: "slow" })); // the same id in flight: the SDK's
      await waitFor(() => s.sdkCalls.length === 1);
      // The lane's call under "d" takes the first cancellation.
      await s.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: "d", reason: "first" },
      });
      assert.equal(first.extra.signal.reason, "first");
      assert.equal(aborted, undefined);
      // The lane serves nothing under "d" now: the next cancellation reaches the SDK's handler.
      await s.send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: "d", reason: "second" },
      });
      await waitFor(() => aborted !== undefined);
      assert.equal(aborted, "second");
      first.reply.resolve({ content: [] });
      await s.roundTrip();
      assert.equal(s.received.some((m) => m.id === "d"), false, "neither call was answered");
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "A duplicate id while the first call is in flight goes to the SDK",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const sdkHandler = () => ({ content: [{ type: "text" as const, text: "from the SDK" }] });
    const s = await session({ handler: held.handler, sdkHandler });
    try {
      await s.send(toolsCall("dup", { name: "echo" }));
      const first = await held.call(1);
      const second = s.response("dup");
      await s.send(toolsCall("dup", { name: "echo" }));
      assert.deepEqual((await second).result, {
        content: [{ type: "text", text: "from the SDK" }],
      });
      assert.equal(s.sdkCalls.length, 1);
      assert.equal(held.calls.length, 1);

      first.reply.resolve({ content: [{ type: "text", text: "from the lane" }] });
      await waitFor(() => s.received.filter((m) => m.id === "dup").length === 2);
      await waitFor(() => s.lane!.inFlight === 0);
      // Once the first is answered, the id is free: the lane takes it again.
      await s.send(toolsCall("dup", { name: "echo" }));
      (await held.call(2)).reply.resolve({ content: [] });
      await waitFor(() => s.received.filter((m) => m.id === "dup").length === 3);
      assert.equal(s.sdkCalls.length, 1);
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "extra.sendNotification from the handler reaches the client, related to the call",
  SANITIZED,
  async () => {
    const s = await session({
      handler: async (request, extra) => {
        const progressToken = request.params._meta!.progressToken!;
        await extra.sendNotification({
          method: "notifications/progress",
          params: { progressToken, progress: 1, total: 2, message: "half way" },
        });
        return { content: [{ type: "text", text: "done" }] };
      },
    });
    try {
      const seen: Progress[] = [];
      const result = await s.client.callTool({ name: "slow" }, undefined, {
        onprogress: (progress) => seen.push(progress),
      });
      assert.deepEqual(result.content, [{ type: "text", text: "done" }]);
      assert.deepEqual(seen, [{ progress: 1, total: 2, message: "half way" }]);
      const sent = s.serverSent.find((x) => x.message.method === "notifications/progress");
      const call = s.serverSent.findLast((x) => "result" in x.message); // the call's result
      assert.ok(sent && call);
      assert.equal(sent.options?.relatedRequestId, call.message.id, "routed to the call's stream");
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "extra.sendRequest from the handler makes a server-to-client request, related to the call",
  SANITIZED,
  async () => {
    const s = await session({
      capabilities: { roots: {} },
      setupClient: (client) =>
        client.setRequestHandler(ListRootsRequestSchema, () => ({
          roots: [{ uri: "file:///work", name: "work" }],
        })),
      handler: async (_request, extra) => {
        const { roots } = await extra.sendRequest({ method: "roots/list" }, ListRootsResultSchema);
        return { content: [{ type: "text", text: roots.map((r) => r.uri).join(",") }] };
      },
    });
    try {
      const result = await s.client.callTool({ name: "roots" });
      assert.deepEqual(result.content, [{ type: "text", text: "file:///work" }]);
      const request = s.serverSent.find((x) => x.message.method === "roots/list");
      const call = s.serverSent.findLast((x) => "result" in x.message); // the call's result
      assert.ok(request && call);
      assert.equal(
        request.options?.relatedRequestId,
        call.message.id,
        "routed to the call's stream",
      );
    } finally {
      await s.close();
    }
  },
);

Deno.test(
  "abortAll() aborts every in-flight handler and none of them is answered",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const s = await session({ handler: held.handler });
    try {
      await s.send(toolsCall("a", { name: "slow" }));
      await s.send(toolsCall("b", { name: "slow" }));
      const [a, b] = [await held.call(1), await held.call(2)];
      assert.equal(s.lane!.inFlight, 2);
      s.lane!.abortAll();
      assert.equal(s.lane!.inFlight, 0);
      for (const { extra } of [a, b]) {
        assert.equal(extra.signal.aborted, true);
        assert.equal(extra.signal.reason, "the session closed");
      }
      a.reply.resolve({ content: [] });
      b.reply.reject(new McpError(ErrorCode.InternalError, "aborted"));
      await s.roundTrip();
      assert.equal(s.received.some((m) => m.id === "a" || m.id === "b"), false);
    } finally {
      await s.close();
    }
  },
);

Deno.test("inFlight counts the calls being served", SANITIZED, async () => {
  const held = heldHandler();
  const s = await session({ handler: held.handler });
  try {
    assert.equal(s.lane!.inFlight, 0);
    await s.send(toolsCall(1, { name: "slow" }));
    await s.send(toolsCall("two", { name: "slow" }));
    await held.call(2);
    assert.equal(s.lane!.inFlight, 2);
    held.calls[0]!.reply.resolve({ content: [] });
    await s.response(1);
    await waitFor(() => s.lane!.inFlight === 1);
    held.calls[1]!.reply.reject(new Error("failed"));
    await s.response("two");
    await waitFor(() => s.lane!.inFlight === 0);
  } finally {
    await s.close();
  }
});

Deno.test("Requests other than tools/call still go to the SDK Server", SANITIZED, async () => {
  const held = heldHandler();
  const s = await session({ handler: held.handler });
  try {
    const { tools } = await s.client.listTools();
    assert.deepEqual(tools.map((t) => t.name), ["echo"]);
    await s.client.ping();
    const unknown = await answer(s, { jsonrpc: "2.0", id: "u", method: "no/such/method" } as never);
    assert.equal((unknown.error as { code: number }).code, ErrorCode.MethodNotFound);
    assert.equal(held.calls.length, 0);
  } finally {
    await s.close();
  }
});

Deno.test(
  "A call's reply is sent only once its notifications are written, never in the same write",
  SANITIZED,
  async () => {
    const held = heldHandler();
    const s = await session({ handler: held.handler });
    const transport = s.server.transport!;
    const send = transport.send.bind(transport);
    const gate = Promise.withResolvers<void>();
    const order: string[] = [];
    transport.send = async (message, options) => {
      const m = message as Message;
      if (m.method === "notifications/progress") await gate.promise; // a write still in flight
      order.push(m.method === undefined ? `reply ${String(m.id)}` : String(m.method));
      return send(message, options);
    };
    try {
      await s.send(toolsCall("c-1", { name: "slow", _meta: { progressToken: "p" } }));
      const { extra, reply } = await held.call(1);
      void extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: "p", progress: 1, total: 1 },
      });
      reply.resolve({ content: [] });
      for (let i = 0; i < 50; i++) await Promise.resolve(); // every reaction that could reply
      assert.deepEqual(order, [], "the reply waits for the notification's write");
      gate.resolve();
      await s.response("c-1");
      assert.deepEqual(order, ["notifications/progress", "reply c-1"]);
    } finally {
      await s.close();
    }
  },
);
