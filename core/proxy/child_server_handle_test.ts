import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { silentLogger } from "../support/logger.ts";
import { fleetServer, InMemoryUpstream, settle } from "../../tests/support/in_memory_upstream.ts";
import { ChildServerHandle, type UpstreamCallContext } from "./child_server_handle.ts";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { CreateMessageResultSchema } from "@modelcontextprotocol/sdk/types.js";
import type { FleetServer } from "./fleet_config.ts";

function setup(overrides: Partial<FleetServer> = {}) {
  const clock = new ManualClock(1_000_000);
  const bus = new InProcessEventBus();
  const events: GatewayEvent[] = [];
  bus.subscribe((e) => events.push(e));
  const upstream = new InMemoryUpstream(["echo", "add"]);
  const handle = new ChildServerHandle({
    server: fleetServer("mem", overrides),
    createTransport: () => upstream.connect(),
    clock,
    logger: silentLogger,
    bus,
  });
  const states = () =>
    events.filter((e) => e.type === "proxy.state").map((e) => (e as { to: string }).to);
  return { clock, bus, events, upstream, handle, states };
}

const ctx = (): UpstreamCallContext => ({ signal: new AbortController().signal });

/** Runs a due health check and lets it finish. */
async function tick(clock: ManualClock, ms: number): Promise<void> {
  clock.advance(ms);
  await settle();
  await settle();
}

Deno.test("ChildServerHandle goes STOPPED → STARTING → READY and loads the upstream's catalog", async () => {
  const { handle, states } = setup();
  assert.equal(handle.state, "STOPPED");
  await handle.start();
  assert.equal(handle.state, "READY");
  assert.deepEqual(states(), ["STARTING", "READY"]);
  assert.deepEqual(handle.catalog.tools.map((t) => t.name), ["echo", "add"]);
  assert.deepEqual(handle.catalog.resources.map((r) => r.uri), ["memo://readme"]);
  assert.deepEqual(handle.catalog.prompts.map((p) => p.name), ["greet"]);
  await handle.stop();
  assert.equal(handle.state, "STOPPED");
});

Deno.test("ChildServerHandle forwards tools/call by the upstream's own name", async () => {
  const { handle, upstream } = setup();
  await handle.start();
  const result = await handle.callTool("echo", { text: "hi" }, ctx());
  assert.deepEqual(result.content, [{ type: "text", text: "echo:hi" }]);
  assert.deepEqual(upstream.calls, ["echo"]);
  await handle.stop();
});

Deno.test("ChildServerHandle: one failed health check → DEGRADED, a passing one → READY", async () => {
  const { handle, upstream, clock, states } = setup({
    health: { intervalMs: 10_000, degradedAfter: 1, failedAfter: 3 },
    timeouts: { connectMs: 2_000, callMs: 5_000 },
  });
  await handle.start();
  upstream.hung = true;
  await tick(clock, 10_000); // the check starts
  await tick(clock, 2_000); // and times out
  assert.equal(handle.state, "DEGRADED");
  assert.equal(handle.snapshot().health.ok, false);
  upstream.hung = false;
  await tick(clock, 10_000);
  assert.equal(handle.state, "READY");
  assert.equal(handle.snapshot().health.ok, true);
  assert.deepEqual(states(), ["STARTING", "READY", "DEGRADED", "READY"]);
  await handle.stop();
});

Deno.test("ChildServerHandle: sustained health failures → FAILED, tools hidden, restart with backoff", async () => {
  const { handle, upstream, clock, states } = setup({
    health: { intervalMs: 10_000, degradedAfter: 1, failedAfter: 3 },
    timeouts: { connectMs: 2_000, callMs: 5_000 },
    breaker: { threshold: 5, baseMs: 30_000, maxMs: 600_000 },
  });
  await handle.start();
  upstream.hung = true;
  for (let i = 0; i < 3; i++) {
    await tick(clock, 10_000);
    await tick(clock, 2_000);
  }
  assert.equal(handle.state, "FAILED");
  assert.deepEqual(handle.catalog.tools, []);
  assert.equal(handle.serving, false);
  upstream.hung = false;
  await tick(clock, 29_999);
  assert.equal(handle.state, "FAILED", "no restart before the backoff");
  await tick(clock, 1);
  await settle();
  assert.equal(handle.state, "READY");
  assert.deepEqual(states(), ["STARTING", "READY", "DEGRADED", "FAILED", "STARTING", "READY"]);
  await handle.stop();
});

Deno.test("ChildServerHandle: an upstream that exits goes FAILED and is restarted automatically", async () => {
  const { handle, upstream, clock } = setup();
  await handle.start();
  await upstream.crash();
  await settle();
  assert.equal(handle.state, "FAILED");
  assert.match(handle.snapshot().lastError ?? "", /closed the connection/);
  await tick(clock, 30_000);
  await settle();
  assert.equal(handle.state, "READY");
  assert.equal(upstream.servers.length, 2);
  await handle.stop();
});

Deno.test("ChildServerHandle refuses calls while not READY with an error naming the server and state", async () => {
  const { handle } = setup();
  await assert.rejects(
    handle.callTool("echo", {}, ctx()),
    (e: GatewayError) => e.code === "upstream_error" && /"mem" is STOPPED/.test(e.message),
  );
});

Deno.test("ChildServerHandle: an OPEN breaker rejects with circuit_open and makes no upstream call", async () => {
  const { handle, upstream, events } = setup();
  await handle.start();
  for (let i = 0; i < 5; i++) handle.breaker.recordFailure();
  assert.equal(handle.breaker.state, "OPEN");
  assert.equal(handle.serving, false);
  await assert.rejects(
    handle.callTool("echo", {}, ctx()),
    (e: GatewayError) =>
      e.code === "circuit_open" && e.data.server === "mem" && e.data.retryAfterMs === 30_000,
  );
  assert.deepEqual(upstream.calls, []);
  assert.ok(events.some((e) => e.type === "proxy.breaker" && e.to === "OPEN"));
  await handle.stop();
});

Deno.test("ChildServerHandle: after the backoff one probe call closes the breaker", async () => {
  const { handle, clock } = setup({
    health: { intervalMs: 60_000, degradedAfter: 1, failedAfter: 3 },
  });
  await handle.start();
  for (let i = 0; i < 5; i++) handle.breaker.recordFailure();
  await tick(clock, 30_000);
  assert.equal(handle.breaker.state, "HALF_OPEN");
  await handle.callTool("echo", {}, ctx());
  assert.equal(handle.breaker.state, "CLOSED");
  await handle.stop();
});

Deno.test("ChildServerHandle refreshes its catalog on the upstream's tools/list_changed", async () => {
  const { handle, upstream } = setup();
  await handle.start();
  const changed = Promise.withResolvers<void>();
  handle.onChange((c) => c === "catalog" && changed.resolve());
  upstream.addTool("late");
  await changed.promise;
  assert.deepEqual(handle.catalog.tools.map((t) => t.name), ["echo", "add", "late"]);
  await handle.stop();
});

Deno.test("ChildServerHandle: restart() by request resets the breaker and reconnects", async () => {
  const { handle, upstream } = setup();
  await handle.start();
  for (let i = 0; i < 5; i++) handle.breaker.recordFailure();
  await handle.restart();
  assert.equal(handle.state, "READY");
  assert.equal(handle.breaker.state, "CLOSED");
  assert.equal(upstream.servers.length, 2);
  await handle.stop();
});

Deno.test("ChildServerHandle: a start that fails → FAILED with the reason, and a retry is scheduled", async () => {
  const clock = new ManualClock();
  let attempts = 0;
  const upstream = new InMemoryUpstream();
  const handle = new ChildServerHandle({
    server: fleetServer("flaky"),
    createTransport: () => {
      attempts++;
      if (attempts === 1) throw new Error("spawn failed: no such command");
      return upstream.connect();
    },
    clock,
    logger: silentLogger,
    bus: new InProcessEventBus(),
  });
  await handle.start();
  assert.equal(handle.state, "FAILED");
  assert.match(handle.snapshot().lastError ?? "", /no such command/);
  await tick(clock, 30_000);
  await settle();
  assert.equal(handle.state, "READY");
  await handle.stop();
});

/** An upstream whose `ask` requests sampling once `release` is called, and `wait` hangs until then. */
function samplingUpstream() {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const connect = () => {
    const [client, server] = InMemoryTransport.createLinkedPair();
    const mcp = new McpServer({ name: "sampler", version: "1" });
    mcp.registerTool("wait", { description: "hangs until released" }, async () => {
      await released;
      return { content: [] };
    });
    mcp.registerTool("ask", { description: "asks for sampling" }, async (extra) => {
      await released;
      try {
        const sampled = await extra.sendRequest(
          {
            method: "sampling/createMessage",
            params: { messages: [], maxTokens: 1 },
          },
          CreateMessageResultSchema,
        );
        return { content: [{ type: "text", text: JSON.stringify(sampled.content) }] };
      } catch (error) {
        return { content: [{ type: "text", text: (error as Error).message }], isError: true };
      }
    });
    void mcp.connect(server);
    return client;
  };
  return { connect, release: () => release() };
}

Deno.test("A call from no session shares with no one: an agent's call in flight makes a session's sampling ambiguous", async () => {
  const upstream = samplingUpstream();
  const clock = new ManualClock(0);
  const handle = new ChildServerHandle({
    server: fleetServer("sampler"),
    createTransport: upstream.connect,
    clock,
    logger: silentLogger,
    bus: new InProcessEventBus(),
  });
  await handle.start();
  const relayed: string[] = [];
  const session: UpstreamCallContext = {
    signal: new AbortController().signal,
    sessionId: "s1",
    tenant: "acme",
    relay: (request) => {
      relayed.push(request.method);
      return Promise.resolve({
        role: "assistant",
        model: "m",
        content: { type: "text", text: "x" },
      });
    },
  };
  const agent: UpstreamCallContext = { signal: new AbortController().signal, tenant: "acme" };
  const asked = handle.callTool("ask", {}, session);
  const waited = handle.callTool("wait", {}, agent);
  await settle();
  upstream.release();
  const result = await asked;
  await waited;
  assert.equal(result.isError, true);
  assert.match(JSON.stringify(result.content), /ambiguous/);
  assert.deepEqual(relayed, []);
  // Alone, once the agent's call is past its grace, the same session's call is relayed exactly.
  clock.advance(handle.server.timeouts.callMs);
  const alone = await handle.callTool("ask", {}, session);
  assert.equal(alone.isError, undefined);
  assert.deepEqual(relayed, ["sampling/createMessage"]);
  await handle.stop();
});

/** An upstream whose `work` answers at once, then asks for sampling when `late` is called. */
function lateUpstream() {
  let late!: () => Promise<string>;
  let release!: () => void;
  const released = new Promise<void>((resolve) => release = resolve);
  const connect = () => {
    const [client, server] = InMemoryTransport.createLinkedPair();
    const mcp = new McpServer({ name: "late", version: "1" });
    mcp.registerTool("work", { description: "answers, then works on" }, (extra) => {
      late = () =>
        extra.sendRequest(
          { method: "sampling/createMessage", params: { messages: [], maxTokens: 1 } },
          CreateMessageResultSchema,
        ).then(() => "relayed", (error: Error) => error.message);
      return { content: [] };
    });
    mcp.registerTool("hold", { description: "answers when released" }, async () => {
      await released;
      return { content: [] };
    });
    void mcp.connect(server);
    return client;
  };
  return { connect, late: () => late(), release: () => release() };
}

Deno.test("A call that answered and works on: its late sampling reaches no other session's call within its grace", async () => {
  const upstream = lateUpstream();
  const clock = new ManualClock(0);
  const handle = new ChildServerHandle({
    server: fleetServer("late"),
    createTransport: upstream.connect,
    clock,
    logger: silentLogger,
    bus: new InProcessEventBus(),
  });
  await handle.start();
  const relayed: string[] = [];
  const session = (sessionId: string, tenant: string): UpstreamCallContext => ({
    signal: new AbortController().signal,
    sessionId,
    tenant,
    relay: (request) => {
      relayed.push(`${sessionId}:${request.method}`);
      return Promise.resolve({
        role: "assistant",
        model: "m",
        content: { type: "text", text: "" },
      });
    },
  });
  const victim = session("victim", "acme");
  const attacker = session("attacker", "globex");
  await handle.callTool("work", {}, victim);
  // The attacker keeps a call in flight while the victim's tool asks for sampling after answering.
  const holding = handle.callTool("hold", {}, attacker);
  await settle();
  assert.match(await upstream.late(), /ambiguous/);
  upstream.release();
  await holding;
  assert.deepEqual(relayed, [], "the victim's late prompt went to no one");
  await handle.stop();
});

Deno.test("ChildServerHandle: a call to a server not serving names where to look as the inbound transport allows", async () => {
  const ctx = { signal: new AbortController().signal } as UpstreamCallContext;
  const failing = (statusHint?: (id: string) => string) =>
    new ChildServerHandle({
      server: fleetServer("gone"),
      createTransport: () => {
        throw new Error("spawn failed: no such command");
      },
      clock: new ManualClock(),
      logger: silentLogger,
      bus: new InProcessEventBus(),
      ...(statusHint ? { statusHint } : {}),
    });
  const plain = failing();
  await plain.start();
  await assert.rejects(plain.callTool("echo", {}, ctx), (error: GatewayError) => {
    assert.match(error.message, /is FAILED.*no such command.*the gateway's log says why/);
    assert.doesNotMatch(error.message, /\/v1\//, "no HTTP route by default (stdio has none)");
    return true;
  });
  await plain.stop();
  const http = failing((id) => `check GET /v1/operator/status for ${id}`);
  await http.start();
  await assert.rejects(http.callTool("echo", {}, ctx), /check GET \/v1\/operator\/status for gone/);
  await http.stop();
});
