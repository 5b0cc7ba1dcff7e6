/**
 * The circuit breaker counts what a client would call a failure, against a real upstream process
 * (tests/fixtures/upstreams/rpc_error_server.ts under sandbox: deno) reached through the stdio
 * relay, with the breaker's time on an injected clock: JSON-RPC internal and server errors open it;
 * invalid params, unknown methods, missing resources and `isError` results do not, unless the
 * server's `breaker.count` says so.
 */
import assert from "node:assert/strict";
import { McpError } from "@modelcontextprotocol/sdk/types.js";
import { ManualClock } from "../../core/support/clock.ts";
import { GatewayError } from "../../core/support/errors.ts";
import { InProcessEventBus } from "../../core/bus/event_bus.ts";
import { silentLogger } from "../../core/support/logger.ts";
import {
  ChildServerHandle,
  type UpstreamCallContext,
} from "../../core/proxy/child_server_handle.ts";
import type { FleetServer } from "../../core/proxy/fleet_config.ts";
import type { FailureClass } from "../../core/proxy/failure_class.ts";
import { baseEnv, UpstreamTransports } from "../../core/proxy/upstream_transports.ts";
import stdio from "../../plugins/upstream-stdio/mod.ts";
import { testPluginContext } from "../fixtures/upstreams/support.ts";
import { fixture } from "../support/fleet.ts";
import { fleetServer } from "../support/in_memory_upstream.ts";

const DENO_JSON = new URL("../../deno.json", import.meta.url).pathname;
const THRESHOLD = 3;
const BASE_MS = 30_000;

/** A started handle on the fixture, its breaker opening after THRESHOLD counted failures. */
async function withUpstream(
  count: FailureClass[] | undefined,
  fn: (handle: ChildServerHandle, clock: ManualClock) => Promise<void>,
): Promise<void> {
  const clock = new ManualClock(1_000_000);
  const transports = new UpstreamTransports({
    maxMessageBytes: 1024 * 1024,
    baseEnv: baseEnv(Deno.env.toObject()),
    logger: silentLogger,
  });
  transports.add(await stdio.create(testPluginContext(silentLogger)));
  const server: FleetServer = fleetServer("backend", {
    command: ["deno", "run", "--config", DENO_JSON, fixture("upstreams/rpc_error_server.ts")],
    sandbox: "deno",
    breaker: {
      threshold: THRESHOLD,
      baseMs: BASE_MS,
      maxMs: 600_000,
      ...(count === undefined ? {} : { count }),
    },
    timeouts: { connectMs: 30_000, callMs: 30_000 },
  });
  const handle = new ChildServerHandle({
    server,
    createTransport: () => transports.create(server),
    clock,
    logger: silentLogger,
    bus: new InProcessEventBus(),
  });
  await handle.start();
  try {
    assert.equal(handle.state, "READY", handle.snapshot().lastError);
    await fn(handle, clock);
  } finally {
    await handle.stop();
  }
}

const ctx = (): UpstreamCallContext => ({ signal: new AbortController().signal });

/** Calls `fail` with `code` and checks the upstream's own error comes back unchanged. */
async function failWith(handle: ChildServerHandle, code: number): Promise<void> {
  await assert.rejects(
    handle.callTool("fail", { code }, ctx()),
    (error: unknown) => error instanceof McpError && error.code === code,
  );
}

async function upstreamCalls(handle: ChildServerHandle): Promise<number> {
  const result = await handle.callTool("calls", {}, ctx());
  return Number((result.content[0] as { text: string }).text);
}

Deno.test("An upstream answering every call with -32603 opens its breaker at the threshold, and no further call reaches it", async () => {
  await withUpstream(undefined, async (handle, clock) => {
    for (let i = 0; i < THRESHOLD; i++) await failWith(handle, -32603);
    assert.equal(handle.breaker.state, "OPEN");
    await assert.rejects(
      handle.callTool("fail", { code: -32603 }, ctx()),
      (error: unknown) => error instanceof GatewayError && error.code === "circuit_open",
    );
    // After the backoff one probe goes through; its success closes the circuit.
    clock.advance(BASE_MS);
    assert.equal(handle.breaker.state, "HALF_OPEN");
    assert.equal(await upstreamCalls(handle), THRESHOLD + 1, "the refused call never reached it");
    assert.equal(handle.breaker.state, "CLOSED");
  });
});

Deno.test("JSON-RPC server errors (-32000…-32099) from an upstream count towards its breaker", async () => {
  await withUpstream(undefined, async (handle) => {
    for (const code of [-32000, -32050, -32099]) await failWith(handle, code);
    assert.equal(handle.breaker.state, "OPEN");
  });
});

Deno.test("Invalid params, unknown method, parse errors and resource-not-found never open the breaker", async () => {
  await withUpstream(undefined, async (handle) => {
    for (const code of [-32602, -32601, -32600, -32700, -32002]) {
      for (let i = 0; i < THRESHOLD; i++) await failWith(handle, code);
    }
    assert.equal(handle.breaker.state, "CLOSED");
    assert.equal(handle.breaker.consecutiveFailures, 0);
  });
});

Deno.test("isError tool results never open the breaker by default", async () => {
  await withUpstream(undefined, async (handle) => {
    for (let i = 0; i < THRESHOLD * 2; i++) {
      const result = await handle.callTool("tool_error", {}, ctx());
      assert.equal(result.isError, true);
    }
    assert.equal(handle.breaker.state, "CLOSED");
  });
});

Deno.test("A call that succeeds resets the count: only consecutive counted failures open the breaker", async () => {
  await withUpstream(undefined, async (handle) => {
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < THRESHOLD - 1; i++) await failWith(handle, -32603);
      await handle.callTool("ok", {}, ctx());
    }
    assert.equal(handle.breaker.state, "CLOSED");
  });
});

Deno.test("breaker.count with tool_error opens the breaker on isError results", async () => {
  await withUpstream(["timeout", "crash", "tool_error"], async (handle) => {
    for (let i = 0; i < THRESHOLD; i++) await handle.callTool("tool_error", {}, ctx());
    assert.equal(handle.breaker.state, "OPEN");
  });
});

Deno.test("breaker.count without internal_error and server_error leaves the breaker closed on -32603 and -32000", async () => {
  await withUpstream(["timeout", "crash"], async (handle) => {
    for (let i = 0; i < THRESHOLD * 2; i++) {
      await failWith(handle, -32603);
      await failWith(handle, -32000);
    }
    assert.equal(handle.breaker.state, "CLOSED");
  });
});
