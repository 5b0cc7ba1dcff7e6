import assert from "node:assert/strict";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { systemClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { createLogger } from "../support/logger.ts";
import { principalOf, type SessionInfo } from "../plugin_api/mod.ts";
import type { GatedSession, SessionGateLimits } from "./session_gate.ts";
import { SessionGate } from "./session_gate.ts";
import { compose } from "../plugin_api/stage_pipeline.ts";

const LIMITS: SessionGateLimits = {
  maxSessions: 2,
  maxSessionsPerTenant: 2,
  maxInFlightPerSession: 2,
  shutdownGraceMs: 1_000,
};

const INFO: SessionInfo = {
  transport: "test",
  auth: {
    tenant: "acme",
    subject: "alice",
    principal: principalOf("tokens_file", "alice"),
    scopes: ["mcp"],
  },
};

type Message = JSONRPCMessage & { id?: unknown; method?: unknown; error?: { data?: unknown } };

/**
 * A gate and one admitted session composed over a real in-memory transport, with what passes
 * the gate inward (`delivered`) and what the client receives (`received`).
 */
async function gated(limits = LIMITS) {
  const logs: string[] = [];
  const gate = new SessionGate(
    limits,
    createLogger({ sink: (l) => void logs.push(l) }),
    systemClock,
  );
  const [client, server] = InMemoryTransport.createLinkedPair();
  const received: Message[] = [];
  client.onmessage = (m) => void received.push(m as Message);
  await client.start();
  const session = gate.admit(INFO, server);
  const delivered: Message[] = [];
  const consumer = compose(server, [session]);
  consumer.onmessage = (m) => void delivered.push(m as Message);
  await consumer.start();
  const request = (id: number, method = "tools/call") =>
    client.send({ jsonrpc: "2.0", id, method, params: { name: "t" } });
  const answer = (id: number) => consumer.send({ jsonrpc: "2.0", id, result: {} });
  return { gate, session, client, consumer, received, delivered, logs, request, answer };
}

Deno.test("a session past MCP_MAX_SESSIONS is refused with session_limit, and a closed one frees its place", () => {
  const gate = new SessionGate(
    { ...LIMITS, maxSessions: 1 },
    createLogger({ sink: () => {} }),
    systemClock,
  );
  const [, first] = InMemoryTransport.createLinkedPair();
  const admitted: GatedSession = gate.admit(INFO, first);
  const [, second] = InMemoryTransport.createLinkedPair();
  assert.throws(
    () => gate.admit(INFO, second),
    (e) => e instanceof GatewayError && e.code === "session_limit",
  );
  admitted.closed();
  gate.admit(INFO, second).release();
});

Deno.test("tool calls count as in flight from their arrival until their answer leaves", async () => {
  const s = await gated();
  try {
    await s.request(1);
    await s.request(2, "prompts/get");
    assert.equal(s.gate.inFlightCalls, 1, "only tools/call counts");
    await s.answer(1);
    assert.equal(s.gate.inFlightCalls, 0);
    assert.equal(s.delivered.length, 2, "both requests reached the Server");
  } finally {
    await s.client.close();
  }
});

Deno.test("a cancelled call and a closed session no longer count as in flight", async () => {
  const s = await gated();
  await s.request(1);
  await s.client.send({
    jsonrpc: "2.0",
    method: "notifications/cancelled",
    params: { requestId: 1 },
  });
  assert.equal(s.gate.inFlightCalls, 0, "a cancelled request gets no answer to wait for");
  await s.request(2);
  assert.equal(s.gate.inFlightCalls, 1);
  await s.client.close();
  assert.equal(s.gate.inFlightCalls, 0, "the session closed");
});

Deno.test("a request past MCP_MAX_IN_FLIGHT_PER_SESSION is answered too_many_requests and goes no further", async () => {
  const s = await gated();
  try {
    await s.request(1);
    await s.request(2);
    await s.request(3);
    assert.deepEqual(s.delivered.map((m) => m.id), [1, 2]);
    const refused = s.received.find((m) => m.id === 3);
    assert.equal((refused?.error?.data as { code?: string })?.code, "too_many_requests");
    assert.equal(s.logs.filter((l) => l.includes("MCP_MAX_IN_FLIGHT_PER_SESSION")).length, 1);
  } finally {
    await s.client.close();
  }
});

Deno.test("once a stop begins, new requests are refused with shutting_down", async () => {
  const s = await gated();
  try {
    s.gate.refuseNew();
    await s.request(1);
    assert.equal(s.delivered.length, 0);
    const refused = s.received.find((m) => m.id === 1);
    assert.equal((refused?.error?.data as { code?: string })?.code, "shutting_down");
  } finally {
    await s.client.close();
  }
});

Deno.test("a drain with no tool call in flight answers the other waiting requests with shutting_down", async () => {
  const s = await gated();
  try {
    await s.request(1, "prompts/get");
    s.gate.refuseNew();
    await s.gate.drain();
    const cut = s.received.find((m) => m.id === 1);
    assert.equal((cut?.error?.data as { code?: string })?.code, "shutting_down");
    assert.ok(s.logs.some((l) => l.includes("1 other request(s) answered with shutting_down")));
  } finally {
    await s.client.close();
  }
});

Deno.test("a drain waits for the tool calls in flight to be answered", async () => {
  const s = await gated();
  try {
    await s.request(1);
    s.gate.refuseNew();
    const drained = s.gate.drain();
    await s.answer(1);
    await drained;
    assert.deepEqual(s.received.map((m) => m.error === undefined), [true], "answered, not cut");
    assert.ok(s.logs.some((l) => l.includes("all 1 tool call(s) in flight finished")));
  } finally {
    await s.client.close();
  }
});

/** A listener's door as the gate sees it: requests taken before the stop, settled by hand. */
function door() {
  let taken = 0;
  let settled = Promise.withResolvers<void>();
  return {
    get requestsInFlight() {
      return taken;
    },
    requestsSettled: () => taken === 0 ? Promise.resolve() : settled.promise,
    take: () => void taken++,
    finish: () => {
      if (--taken > 0) return;
      settled.resolve();
      settled = Promise.withResolvers<void>();
    },
  };
}

Deno.test("behind a listener, a request it took before the stop is served even when it reaches the session during the drain", async () => {
  const s = await gated();
  const listener = door();
  try {
    listener.take();
    const drained = s.gate.drain(listener);
    // Its body arrived only now: the gate lets it in, the drain waits for its answer.
    await s.request(1);
    assert.deepEqual(s.delivered.map((m) => m.id), [1]);
    await s.answer(1);
    listener.finish();
    await drained;
    assert.deepEqual(s.received.map((m) => m.error === undefined), [true], "answered, not refused");
    assert.ok(s.logs.some((l) => l.includes("1 HTTP request(s) taken before the stop")));
  } finally {
    await s.client.close();
  }
});

Deno.test("behind a listener, once the drain is over every new request is refused with shutting_down", async () => {
  const s = await gated();
  try {
    await s.gate.drain(door());
    await s.request(1);
    assert.equal(s.delivered.length, 0);
    const refused = s.received.find((m) => m.id === 1);
    assert.equal((refused?.error?.data as { code?: string })?.code, "shutting_down");
  } finally {
    await s.client.close();
  }
});
