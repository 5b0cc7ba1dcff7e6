import assert from "node:assert/strict";
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../support/clock.ts";
import { compose } from "../plugin_api/stage_pipeline.ts";
import { RawRequests } from "./raw_requests.ts";

/** Leak sanitizers on (Deno 2.9 has them off by default): every timer cleared, every transport closed. */
const SANITIZED = { sanitizeOps: true, sanitizeResources: true };

type MessageExtra = Parameters<NonNullable<Transport["onmessage"]>>[1];

/** A transport whose `send` records and whose incoming messages the test injects. */
class FakeTransport implements Transport {
  readonly sent: JSONRPCMessage[] = [];
  sendError: Error | undefined;
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtra) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;

  start(): Promise<void> {
    return Promise.resolve();
  }

  send(message: JSONRPCMessage, _options?: TransportSendOptions): Promise<void> {
    if (this.sendError) return Promise.reject(this.sendError);
    this.sent.push(message);
    return Promise.resolve();
  }

  close(): Promise<void> {
    this.onclose?.();
    return Promise.resolve();
  }

  /** A message arriving from the upstream. */
  receive(message: unknown, extra?: MessageExtra): void {
    this.onmessage?.(message as JSONRPCMessage, extra);
  }
}

/** A transport whose pipeline holds RawRequests before a (stand-in) SDK Client. */
function connected(clock = new ManualClock()) {
  const transport = new FakeTransport();
  const delivered: { message: JSONRPCMessage; extra: MessageExtra }[] = [];
  let clientClosed = 0;
  const raw = new RawRequests(clock);
  const client = compose(transport, [raw]);
  client.onmessage = (message, extra) => delivered.push({ message, extra });
  client.onclose = () => clientClosed++;
  return { transport, raw, delivered, clientClosed: () => clientClosed };
}

const LONG = { timeout: 60_000 };

/** Whether a promise has settled, after letting pending reactions run. */
async function settled(promise: Promise<unknown>): Promise<boolean> {
  let done = false;
  promise.then(() => done = true, () => done = true);
  for (let i = 0; i < 5; i++) await Promise.resolve();
  return done;
}

function sentRequest(transport: FakeTransport, index = 0) {
  const message = transport.sent[index] as {
    jsonrpc: string;
    id: unknown;
    method: string;
    params: Record<string, unknown>;
  };
  assert.ok(message, `message ${index} was sent`);
  return message;
}

Deno.test(
  "A request is sent under a string id of its own and resolves with the upstream's result object unchanged",
  SANITIZED,
  async () => {
    const { transport, raw, delivered } = connected();
    const params = { name: "echo", arguments: { message: "hi" } };
    const first = raw.request("tools/call", params, {
      signal: new AbortController().signal,
      ...LONG,
    });
    const second = raw.request("tools/call", params, {
      signal: new AbortController().signal,
      ...LONG,
    });

    const a = sentRequest(transport, 0);
    const b = sentRequest(transport, 1);
    assert.equal(a.jsonrpc, "2.0");
    assert.equal(a.method, "tools/call");
    assert.deepEqual(a.params, params);
    assert.equal(typeof a.id, "string");
    assert.equal(typeof b.id, "string");
    assert.notEqual(a.id, b.id);

    const result = { content: [{ type: "text", text: "Echo: hi" }], extra: { kept: [1, 2] } };
    transport.receive({ jsonrpc: "2.0", id: a.id, result });
    transport.receive({ jsonrpc: "2.0", id: b.id, result: {} });
    assert.equal(await first, result, "the very object the upstream sent");
    assert.deepEqual(await second, {});
    assert.deepEqual(delivered, [], "our responses are not passed on to the Client");
    assert.equal(raw.size, 0);
  },
);

Deno.test(
  "An error response rejects with McpError carrying the upstream's code, message and data",
  SANITIZED,
  async () => {
    const { transport, raw, delivered } = connected();
    const call = raw.request("tools/call", { name: "x" }, {
      signal: new AbortController().signal,
      ...LONG,
    });
    const { id } = sentRequest(transport);
    const data = { code: "tool_denied", tool: "x" };
    transport.receive({ jsonrpc: "2.0", id, error: { code: -32600, message: "Denied", data } });
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof McpError);
      assert.equal(error.code, -32600);
      assert.equal(error.message, new McpError(-32600, "Denied").message);
      assert.deepEqual(error.data, data);
      return true;
    });
    assert.deepEqual(delivered, []);
  },
);

Deno.test(
  "An error response without a numeric code or a message still rejects with McpError (InternalError)",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    const call = raw.request("tools/call", { name: "x" }, {
      signal: new AbortController().signal,
      ...LONG,
    });
    transport.receive({ jsonrpc: "2.0", id: sentRequest(transport).id, error: { code: "bad" } });
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof McpError);
      assert.equal(error.code, ErrorCode.InternalError);
      assert.match(error.message, /without a message/);
      return true;
    });
  },
);

Deno.test(
  "A response without a result object rejects with McpError InternalError",
  SANITIZED,
  async () => {
    for (const body of [{ result: "text" }, { result: [1] }, { result: null }, {}]) {
      const { transport, raw, delivered } = connected();
      const call = raw.request("tools/call", { name: "x" }, {
        signal: new AbortController().signal,
        ...LONG,
      });
      transport.receive({ jsonrpc: "2.0", id: sentRequest(transport).id, ...body });
      await assert.rejects(call, (error: unknown) => {
        assert.ok(error instanceof McpError, JSON.stringify(body));
        assert.equal(error.code, ErrorCode.InternalError);
        assert.match(error.message, /without a result object/);
        return true;
      });
      assert.deepEqual(delivered, []);
      assert.equal(raw.size, 0);
    }
  },
);

Deno.test(
  "A timeout rejects with McpError RequestTimeout and sends notifications/cancelled for that id",
  SANITIZED,
  async () => {
    const clock = new ManualClock();
    const { transport, raw } = connected(clock);
    const call = raw.request("tools/call", { name: "slow" }, {
      signal: new AbortController().signal,
      timeout: 1000,
    });
    const { id } = sentRequest(transport);
    clock.advance(999);
    assert.equal(await settled(call), false, "not before the timeout");
    clock.advance(1);
    await assert.rejects(call, (error: unknown) => {
      assert.ok(error instanceof McpError);
      assert.equal(error.code, ErrorCode.RequestTimeout);
      assert.deepEqual(error.data, { timeout: 1000 });
      return true;
    });
    assert.equal(transport.sent.length, 2);
    const cancelled = transport.sent[1] as { method: string; params: Record<string, unknown> };
    assert.equal(cancelled.method, "notifications/cancelled");
    assert.equal(cancelled.params.requestId, id);
    assert.equal(typeof cancelled.params.reason, "string");
    assert.equal(raw.size, 0);
    assert.equal(clock.pendingTimers, 0, "no timer left behind");
  },
);

Deno.test(
  "Aborting the signal sends notifications/cancelled and rejects with the signal's reason",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    const controller = new AbortController();
    const call = raw.request("tools/call", { name: "slow" }, {
      signal: controller.signal,
      ...LONG,
    });
    const { id } = sentRequest(transport);
    const reason = new Error("the caller went away");
    controller.abort(reason);
    await assert.rejects(call, (error: unknown) => error === reason);
    assert.equal(transport.sent.length, 2);
    const cancelled = transport.sent[1] as { method: string; params: Record<string, unknown> };
    assert.equal(cancelled.method, "notifications/cancelled");
    assert.equal(cancelled.params.requestId, id);
    assert.equal(cancelled.params.reason, String(reason));
    assert.equal(raw.size, 0);
  },
);

Deno.test("Aborting after the request settled sends nothing more", SANITIZED, async () => {
  const { transport, raw } = connected();
  const controller = new AbortController();
  const call = raw.request("tools/call", { name: "x" }, { signal: controller.signal, ...LONG });
  transport.receive({ jsonrpc: "2.0", id: sentRequest(transport).id, result: {} });
  await call;
  controller.abort("late");
  assert.equal(transport.sent.length, 1, "no notifications/cancelled for a finished request");
});

Deno.test(
  "An already-aborted signal rejects with its reason without sending anything",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    const signal = AbortSignal.abort("too late");
    await assert.rejects(
      raw.request("tools/call", { name: "x" }, { signal, ...LONG }),
      (error: unknown) => error === "too late",
    );
    assert.deepEqual(transport.sent, []);
    assert.equal(raw.size, 0);
  },
);

Deno.test(
  "With onprogress the request carries _meta.progressToken = its id, keeping the caller's _meta and params",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    const params = { name: "slow", arguments: {}, _meta: { trace: "t-1" } };
    const call = raw.request("tools/call", params, {
      signal: new AbortController().signal,
      ...LONG,
      onprogress: () => {},
    });
    const sent = sentRequest(transport);
    assert.deepEqual(sent.params, {
      name: "slow",
      arguments: {},
      _meta: { trace: "t-1", progressToken: sent.id },
    });
    assert.deepEqual(params._meta, { trace: "t-1" }, "the caller's params are not modified");
    transport.receive({ jsonrpc: "2.0", id: sent.id, result: {} });
    await call;
  },
);

Deno.test(
  "Without onprogress the request asks for no progress and is sent with the params as given",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    const params = { name: "x", _meta: { trace: "t-2" } };
    const call = raw.request("tools/call", params, {
      signal: new AbortController().signal,
      ...LONG,
    });
    assert.equal(sentRequest(transport).params, params);
    transport.receive({ jsonrpc: "2.0", id: sentRequest(transport).id, result: {} });
    await call;
  },
);

Deno.test(
  "Progress notifications for a request reach its onprogress without the token and are not passed on",
  SANITIZED,
  async () => {
    const { transport, raw, delivered } = connected();
    const seen: Progress[] = [];
    const call = raw.request("tools/call", { name: "slow" }, {
      signal: new AbortController().signal,
      ...LONG,
      onprogress: (progress) => seen.push(progress),
    });
    const { id } = sentRequest(transport);
    transport.receive({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: id, progress: 1, total: 3, message: "one" },
    });
    transport.receive({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: id, progress: 2 },
    });
    assert.deepEqual(seen, [{ progress: 1, total: 3, message: "one" }, { progress: 2 }]);
    assert.deepEqual(delivered, []);
    transport.receive({ jsonrpc: "2.0", id, result: {} });
    await call;
  },
);

Deno.test("A progress notification restarts the request's timeout", SANITIZED, async () => {
  const clock = new ManualClock();
  const { transport, raw } = connected(clock);
  let progressed = 0;
  const call = raw.request("tools/call", { name: "slow" }, {
    signal: new AbortController().signal,
    timeout: 1000,
    onprogress: () => progressed++,
  });
  const { id } = sentRequest(transport);
  const progress = () =>
    transport.receive({
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: id, progress: progressed + 1 },
    });
  clock.advance(900);
  progress();
  clock.advance(900);
  progress();
  clock.advance(999);
  assert.equal(await settled(call), false, "each progress restarted the timeout");
  assert.equal(progressed, 2);
  clock.advance(1);
  await assert.rejects(
    call,
    (error: unknown) => error instanceof McpError && error.code === ErrorCode.RequestTimeout,
  );
  assert.equal(clock.pendingTimers, 0);
});

Deno.test(
  "Progress for a request without onprogress is passed to the previous handler",
  SANITIZED,
  async () => {
    const { transport, raw, delivered } = connected();
    const call = raw.request("tools/call", { name: "x" }, {
      signal: new AbortController().signal,
      ...LONG,
    });
    const { id } = sentRequest(transport);
    const progress = {
      jsonrpc: "2.0",
      method: "notifications/progress",
      params: { progressToken: id, progress: 1 },
    };
    transport.receive(progress);
    assert.equal(delivered.length, 1);
    assert.equal(delivered[0]!.message, progress);
    transport.receive({ jsonrpc: "2.0", id, result: {} });
    await call;
  },
);

Deno.test(
  "Messages that are not ours reach the previous onmessage handler unchanged, with their extra",
  SANITIZED,
  async () => {
    const { transport, raw, delivered } = connected();
    const call = raw.request("tools/call", { name: "x" }, {
      signal: new AbortController().signal,
      ...LONG,
      onprogress: () => assert.fail("no progress of ours was sent"),
    });
    const { id } = sentRequest(transport);
    const foreign = [
      { jsonrpc: "2.0", id: "someone-else", result: {} }, // another string id
      { jsonrpc: "2.0", id: 0, result: { tools: [] } }, // the Client's own numeric ids
      { jsonrpc: "2.0", id: 1, error: { code: -32601, message: "Method not found" } },
      { jsonrpc: "2.0", id, method: "ping" }, // a request from the upstream, even under our id
      { jsonrpc: "2.0", id: 7, method: "sampling/createMessage", params: {} },
      {
        jsonrpc: "2.0",
        method: "notifications/progress",
        params: { progressToken: 0, progress: 1 },
      },
      {
        jsonrpc: "2.0",
        method: "notifications/progress",
        params: { progressToken: "not-ours", progress: 1 },
      },
      { jsonrpc: "2.0", method: "notifications/tools/list_changed" },
      { jsonrpc: "2.0", method: "notifications/message", params: { level: "info", data: "x" } },
    ];
    const extra = { authInfo: { token: "t", clientId: "c", scopes: [] } };
    for (const message of foreign) transport.receive(message, extra);
    assert.equal(delivered.length, foreign.length);
    delivered.forEach((d, i) => {
      assert.equal(d.message, foreign[i], `message ${i} passed on as the same object`);
      assert.equal(d.extra, extra);
    });
    assert.equal(raw.size, 1, "our request is still pending");
    transport.receive({ jsonrpc: "2.0", id, result: {} });
    await call;
  },
);

Deno.test(
  "The transport closing rejects every pending request with McpError ConnectionClosed and calls the previous onclose",
  SANITIZED,
  async () => {
    const { transport, raw, clientClosed } = connected();
    const calls = [1, 2, 3].map((n) =>
      raw.request("tools/call", { name: `t${n}` }, {
        signal: new AbortController().signal,
        ...LONG,
      })
    );
    assert.equal(raw.size, 3);
    await transport.close();
    for (const call of calls) {
      await assert.rejects(
        call,
        (error: unknown) => error instanceof McpError && error.code === ErrorCode.ConnectionClosed,
      );
    }
    assert.equal(clientClosed(), 1);
    assert.equal(raw.size, 0);
    assert.equal(transport.sent.length, 3, "no cancellations are sent on a closed connection");
  },
);

Deno.test(
  "A request after the transport closed rejects with ConnectionClosed without sending",
  SANITIZED,
  async () => {
    const { transport, raw } = connected();
    await transport.close();
    await assert.rejects(
      raw.request("tools/call", { name: "x" }, { signal: new AbortController().signal, ...LONG }),
      (error: unknown) => error instanceof McpError && error.code === ErrorCode.ConnectionClosed,
    );
    assert.deepEqual(transport.sent, []);
  },
);

Deno.test("A request whose send fails rejects with the transport's error", SANITIZED, async () => {
  const { transport, raw } = connected();
  const failure = new Error("Not connected");
  transport.sendError = failure;
  await assert.rejects(
    raw.request("tools/call", { name: "x" }, { signal: new AbortController().signal, ...LONG }),
    (error: unknown) => error === failure,
  );
  assert.equal(raw.size, 0);
});

Deno.test("size counts the requests in flight", SANITIZED, async () => {
  const { transport, raw } = connected();
  assert.equal(raw.size, 0);
  const controller = new AbortController();
  const a = raw.request("tools/call", { name: "a" }, { signal: controller.signal, ...LONG });
  const b = raw.request("tools/call", { name: "b" }, {
    signal: new AbortController().signal,
    ...LONG,
  });
  assert.equal(raw.size, 2);
  transport.receive({ jsonrpc: "2.0", id: sentRequest(transport, 1).id, result: {} });
  await b;
  assert.equal(raw.size, 1);
  controller.abort("stop");
  await assert.rejects(a);
  assert.equal(raw.size, 0);
});
