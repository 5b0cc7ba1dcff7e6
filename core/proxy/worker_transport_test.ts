import assert from "node:assert/strict";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import {
  LINUX,
  processAlive,
  recordingLogger,
  waitFor,
} from "../../tests/fixtures/upstreams/support.ts";
import { GatewayError } from "../support/errors.ts";
import type { UpstreamPlan } from "../plugin_api/mod.ts";
import { workerPermissions, WorkerTransport } from "./worker_transport.ts";

const fixture = (name: string) =>
  new URL(`../../tests/fixtures/upstreams/${name}`, import.meta.url).href;

function plan(command: string[] = [], permissions: UpstreamPlan["permissions"] = {}): UpstreamPlan {
  return {
    permissions,
    start: { serverId: "fx", transport: "stdio", command, maxMessageBytes: 1024 },
  };
}

function transport(
  workerUrl: string,
  upstreamPlan: UpstreamPlan = plan(),
  options: { startTimeoutMs?: number; stopGraceMs?: number } = {},
) {
  const { logger, entries } = recordingLogger();
  const t = new WorkerTransport({
    workerUrl,
    plan: upstreamPlan,
    serverId: "fx",
    logger,
    startTimeoutMs: options.startTimeoutMs ?? 10_000,
    stopGraceMs: options.stopGraceMs ?? 200,
  });
  const errors: Error[] = [];
  const messages: JSONRPCMessage[] = [];
  let closes = 0;
  t.onerror = (error) => errors.push(error);
  t.onmessage = (message) => messages.push(message);
  t.onclose = () => closes++;
  return { t, entries, errors, messages, closes: () => closes };
}

/** Raw worker messages for the scripted worker to post after `started`. */
const script = (...messages: unknown[]) => plan(messages.map((m) => JSON.stringify(m)));

Deno.test("workerPermissions sets every permission key explicitly and never inherits", () => {
  assert.deepEqual(workerPermissions({ run: ["/usr/bin/deno"], net: [], env: true }), {
    env: true,
    ffi: false,
    import: false,
    net: false,
    read: false,
    run: ["/usr/bin/deno"],
    sys: false,
    write: false,
  });
  assert.deepEqual(workerPermissions({}), {
    env: false,
    ffi: false,
    import: false,
    net: false,
    read: false,
    run: false,
    sys: false,
    write: false,
  });
});

Deno.test("WorkerTransport rejects start with upstream_error when its worker crashes, and the gateway survives", async () => {
  const { t, closes } = transport(fixture("crashing_worker.ts"));
  await assert.rejects(t.start(), (error: unknown) => {
    assert.ok(error instanceof GatewayError);
    assert.equal(error.code, "upstream_error");
    assert.match(error.message, /Upstream "fx" lost its relay worker, which crashed/);
    assert.match(error.message, /fixture worker crashed on start/);
    return true;
  });
  assert.equal(closes(), 1);
  // This process is unharmed: another upstream still starts and works.
  const healthy = transport(fixture("scripted_worker.ts"));
  await healthy.t.start();
  await healthy.t.close();
});

Deno.test("WorkerTransport rejects start with upstream_error when its worker module cannot load", async () => {
  const { t } = transport(fixture("no_such_worker.ts"));
  await assert.rejects(t.start(), {
    name: "GatewayError",
    code: "upstream_error",
    message: /Upstream "fx"/,
  });
});

Deno.test("WorkerTransport rejects start with timeout naming the server when the worker never starts", async () => {
  const { t, closes } = transport(fixture("silent_worker.ts"), plan(), {
    startTimeoutMs: 100,
    stopGraceMs: 10,
  });
  await assert.rejects(t.start(), {
    name: "GatewayError",
    code: "timeout",
    message: /Upstream "fx" did not start within 100 ms/,
  });
  assert.equal(closes(), 1);
});

Deno.test("WorkerTransport close() during start rejects the pending start and closes once", async () => {
  const { t, closes } = transport(fixture("silent_worker.ts"), plan(), { stopGraceMs: 10 });
  const starting = t.start();
  const closing = t.close();
  await assert.rejects(starting, { code: "upstream_error", message: /closed before it started/ });
  await closing;
  assert.equal(closes(), 1);
});

Deno.test("WorkerTransport delivers only JSON-RPC payloads and reports and counts the rest", async () => {
  const notification = { jsonrpc: "2.0", method: "notifications/tools/list_changed" };
  const { t, errors, messages } = transport(
    fixture("scripted_worker.ts"),
    script(
      { type: "message", message: { hello: "world" } },
      { type: "malformed", reason: "frame is not JSON", preview: "garbage" },
      { type: "surprise" },
      { type: "message", message: notification },
    ),
  );
  await t.start();
  await waitFor(() => messages.length === 1, "the valid notification");
  await t.close();
  assert.deepEqual(messages, [notification]);
  assert.deepEqual(errors.map((e) => (e as GatewayError).code), [
    "upstream_error",
    "upstream_error",
    "upstream_error",
  ]);
  assert.match(errors[0]!.message, /not JSON-RPC 2.0; it was dropped/);
  assert.match(
    errors[1]!.message,
    /malformed frame \(frame is not JSON\); it was dropped: "garbage"/,
  );
  assert.match(errors[2]!.message, /unknown worker message/);
  assert.deepEqual(t.stats, { invalidMessages: 1, malformedFrames: 1, suppressedStderrLines: 0 });
});

Deno.test("WorkerTransport relays requests and forwards setProtocolVersion to its worker", async () => {
  const { t, entries, messages } = transport(fixture("scripted_worker.ts"));
  await t.start();
  t.setProtocolVersion("2025-06-18");
  await t.send({ jsonrpc: "2.0", id: 1, method: "ping" });
  await waitFor(() => messages.length === 1, "the reply");
  await t.close();
  assert.deepEqual(messages, [{ jsonrpc: "2.0", id: 1, result: { echoed: "ping" } }]);
  assert.ok(
    entries.some((e) => e.fields.line === "protocol 2025-06-18" && e.fields.server === "fx"),
  );
});

Deno.test("WorkerTransport sends the frames of one turn to its worker as one message, in order", async () => {
  const { t, messages } = transport(fixture("scripted_worker.ts"));
  await t.start();
  for (let id = 1; id <= 3; id++) void t.send({ jsonrpc: "2.0", id, method: `m${id}` });
  await waitFor(() => messages.length === 3, "three replies");
  await t.send({ jsonrpc: "2.0", id: 4, method: "alone" });
  await waitFor(() => messages.length === 4, "the fourth reply");
  await t.close();
  assert.deepEqual(messages.map((m) => (m as { result: unknown }).result), [
    { echoed: "m1", batch: 3 },
    { echoed: "m2", batch: 3 },
    { echoed: "m3", batch: 3 },
    { echoed: "alone" },
  ]);
});

Deno.test("WorkerTransport logs upstream stderr at debug with the server id, at most 20 lines a second", async () => {
  const lines = Array.from({ length: 50 }, (_, i) => ({ type: "stderr", line: `line ${i}` }));
  const { t, entries } = transport(
    fixture("scripted_worker.ts"),
    script(...lines, { type: "message", message: { jsonrpc: "2.0", method: "done" } }),
  );
  const done = Promise.withResolvers<void>();
  t.onmessage = () => done.resolve();
  await t.start();
  await done.promise;
  await t.close();
  const logged = entries.filter((e) => e.message === "upstream stderr");
  assert.equal(logged.length, 20);
  assert.deepEqual(logged[0], {
    level: "debug",
    message: "upstream stderr",
    fields: { server: "fx", line: "line 0" },
  });
  assert.equal(t.stats.suppressedStderrLines, 30);
});

Deno.test("WorkerTransport fires onclose exactly once when the upstream exits on its own", async () => {
  const { t, closes } = transport(fixture("scripted_worker.ts"));
  const closed = Promise.withResolvers<void>();
  const count = t.onclose!;
  t.onclose = () => {
    count();
    closed.resolve();
  };
  await t.start();
  await t.send({ jsonrpc: "2.0", id: 1, method: "exit" });
  await closed.promise;
  await t.close();
  await t.close();
  assert.equal(closes(), 1);
  assert.deepEqual(t.closeInfo, { reason: "process exited with code 3", code: 3, signal: null });
});

Deno.test("WorkerTransport reports a worker crash after start as an error and closes once", async () => {
  const { t, errors, closes } = transport(fixture("scripted_worker.ts"));
  const closed = Promise.withResolvers<void>();
  const count = t.onclose!;
  t.onclose = () => {
    count();
    closed.resolve();
  };
  await t.start();
  await t.send({ jsonrpc: "2.0", id: 1, method: "crash" });
  await closed.promise;
  await t.close();
  assert.equal(closes(), 1);
  assert.equal((errors[0] as GatewayError).code, "upstream_error");
  assert.match(errors[0]!.message, /lost its relay worker, which crashed \(.*scripted crash/);
});

Deno.test("WorkerTransport send before start and after close rejects with upstream_error", async () => {
  const { t } = transport(fixture("scripted_worker.ts"));
  await assert.rejects(t.send({ jsonrpc: "2.0", id: 1, method: "ping" }), {
    code: "upstream_error",
    message: /Upstream "fx" is not connected \(new\)/,
  });
  await t.start();
  await t.close();
  await assert.rejects(t.send({ jsonrpc: "2.0", id: 2, method: "ping" }), {
    code: "upstream_error",
    message: /is not connected \(closed\)/,
  });
  await assert.rejects(t.start(), /already started/);
});

Deno.test({
  name: "WorkerTransport kills the child process from the kernel when the worker does not stop it",
  ignore: !LINUX,
  async fn() {
    // The worker ignores `stop` and its child is in its own process group, so terminating the
    // worker alone would leave it running.
    const { t } = transport(
      fixture("orphaning_worker.ts"),
      plan(["sleep", "60"], { run: ["sleep"] }),
      { stopGraceMs: 50 },
    );
    await t.start();
    const pid = t.pid!;
    assert.ok(processAlive(pid));
    await t.close();
    await waitFor(() => !processAlive(pid), `pid ${pid} to be gone`, 2000);
  },
});

Deno.test("WorkerTransport diagnostics name why a relay without a process closed", async () => {
  const reason = "request to http://127.0.0.1:9/mcp failed: TypeError: connection refused";
  const { t } = transport(fixture("scripted_worker.ts"), script({ type: "closed", reason }));
  const closed = Promise.withResolvers<void>();
  t.onclose = () => closed.resolve();
  await t.start();
  await closed.promise;
  assert.equal(t.diagnostics(), reason);
  await t.close();
});
