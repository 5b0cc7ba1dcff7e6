import assert from "node:assert/strict";
import { ManualClock } from "../../core/support/clock.ts";
import { type SseOverflow, SseSessionTransport } from "./sse_session_transport.ts";

const ping = (id: number) => ({ jsonrpc: "2.0" as const, id, result: {} });
const decoder = new TextDecoder();
const NO_KEEP_ALIVE = { keepAliveMs: 0 };

Deno.test("Unread messages wait in the queue, counted in bytes and messages", async () => {
  const transport = new SseSessionTransport(
    "/messages",
    { maxBytes: 1 << 20, maxMessages: 10 },
    NO_KEEP_ALIVE,
  );
  await transport.send(ping(1));
  assert.equal(transport.queued.messages, 2, "the endpoint event and the message");
  assert.ok(transport.queued.bytes > 0);
  const reader = transport.stream.getReader();
  assert.match(decoder.decode((await reader.read()).value), /event: endpoint/);
  assert.match(decoder.decode((await reader.read()).value), /"id":1/);
  assert.deepEqual(transport.queued, { bytes: 0, messages: 0 });
  await transport.close();
  assert.equal((await reader.read()).done, true);
});

Deno.test("A reader past the message bound is cut off: onoverflow, then the session closes", async () => {
  const transport = new SseSessionTransport(
    "/messages",
    { maxBytes: 1 << 20, maxMessages: 3 },
    NO_KEEP_ALIVE,
  );
  const overflows: SseOverflow[] = [];
  let closed = false;
  transport.onoverflow = (o) => overflows.push(o);
  transport.onclose = () => closed = true;
  await transport.send(ping(1));
  await transport.send(ping(2));
  await transport.send(ping(3)).catch(() => {});
  assert.equal(overflows.length, 1);
  assert.equal(overflows[0]!.limit, "messages");
  assert.equal(closed, true);
  await assert.rejects(transport.send(ping(4)), /closed/);
  await assert.rejects(transport.stream.getReader().read(), /fell behind/);
});

Deno.test("A reader past the byte bound is cut off; one message larger than the bound still goes out alone", async () => {
  const transport = new SseSessionTransport(
    "/messages",
    { maxBytes: 200, maxMessages: 100 },
    NO_KEEP_ALIVE,
  );
  const reader = transport.stream.getReader();
  await reader.read(); // the endpoint event: the queue is empty
  const big = { jsonrpc: "2.0" as const, id: 1, result: { pad: "x".repeat(500) } };
  await transport.send(big);
  assert.equal(transport.queued.messages, 1, "alone in an empty queue, it is kept");
  let overflow: SseOverflow | undefined;
  transport.onoverflow = (o) => overflow = o;
  await transport.send(ping(2));
  assert.equal(overflow?.limit, "bytes");
  assert.ok(overflow!.queuedBytes > 200);
  await assert.rejects(reader.read(), /fell behind/);
});

Deno.test("A closed session's queued answers still go out before the stream ends", async () => {
  const transport = new SseSessionTransport(
    "/messages",
    { maxBytes: 1 << 20, maxMessages: 10 },
    NO_KEEP_ALIVE,
  );
  await transport.send(ping(7));
  await transport.close();
  const text = decoder.decode(await new Response(transport.stream).arrayBuffer());
  assert.match(text, /"id":7/);
});

Deno.test("An idle session sends a keep-alive comment every keepAliveMs on the clock, none after close", async () => {
  const clock = new ManualClock();
  const limits = { maxBytes: 1 << 20, maxMessages: 10 };
  const transport = new SseSessionTransport("/messages", limits, { keepAliveMs: 1_000, clock });
  clock.advance(999);
  assert.equal(transport.queued.messages, 1, "only the endpoint event before the first period");
  clock.advance(1);
  clock.advance(1_000);
  assert.equal(transport.queued.messages, 3, "one comment per period");
  const reader = transport.stream.getReader();
  assert.match(decoder.decode((await reader.read()).value), /event: endpoint/);
  assert.equal(decoder.decode((await reader.read()).value), ": keep-alive\n\n");
  await transport.close();
  assert.equal(clock.pendingTimers, 0, "closing stops the keep-alive");
  reader.releaseLock();
});
