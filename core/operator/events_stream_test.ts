import assert from "node:assert/strict";
import { principalOf, type TokenPayload } from "../auth/token_payload.ts";
import { ManualClock } from "../support/clock.ts";
import { type EventHandler, InProcessEventBus } from "../bus/event_bus.ts";
import { eventsStreamRoute } from "./events_stream.ts";

const OPERATOR: TokenPayload = {
  tenant: "default",
  scopes: ["operator", "all_tenants"],
  subject: "ops",
  principal: principalOf("tokens_file", "ops"),
};

/** An in-process bus that counts its subscribers. */
class CountingBus extends InProcessEventBus {
  subscribers = 0;
  override subscribe(handler: EventHandler): () => void {
    this.subscribers++;
    const off = super.subscribe(handler);
    return () => {
      this.subscribers--;
      off();
    };
  }
}

function setup(options: { maxQueue?: number } = {}) {
  const bus = new CountingBus();
  const clock = new ManualClock();
  const route = eventsStreamRoute({ bus, clock, ...options });
  return { bus, clock, route };
}

/** Reads SSE frames (blank-line separated) as they arrive. */
function frames(response: Response) {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    async next(): Promise<string | undefined> {
      for (;;) {
        const end = buffer.indexOf("\n\n");
        if (end >= 0) {
          const frame = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          return frame;
        }
        const { done, value } = await reader.read();
        if (done) return undefined;
        buffer += value;
      }
    },
    cancel: () => reader.cancel(),
  };
}

Deno.test("The events stream needs scope admin or operator", async () => {
  const { route, bus } = setup();
  const response = await route.handle(
    new Request("http://127.0.0.1/v1/events"),
    {
      tenant: "default",
      scopes: ["mcp"],
      subject: "agent",
      principal: principalOf("tokens_file", "agent"),
    },
  );
  assert.equal(response.status, 403);
  assert.match((await response.json()).error.message, /admin or operator/);
  assert.equal(bus.subscribers, 0);
});

Deno.test("The events stream opens with a retry hint and forwards each bus event as an SSE frame", async () => {
  const { route, bus } = setup();
  const response = await route.handle(new Request("http://127.0.0.1/v1/events"), OPERATOR);
  assert.equal(response.headers.get("content-type"), "text/event-stream; charset=utf-8");
  const stream = frames(response);
  const open = await stream.next();
  assert.match(open!, /^retry: 3000\nevent: stream\.open\ndata: \{/);
  bus.publish({ type: "proxy.state", server: "a", from: "READY", to: "FAILED", reason: "x\ny" });
  assert.equal(
    await stream.next(),
    'event: proxy.state\ndata: {"type":"proxy.state","server":"a","from":"READY","to":"FAILED","reason":"x\\ny"}',
  );
  await stream.cancel();
});

Deno.test("An operator of one tenant gets only the events of its tenant, and gateway.stopping", async () => {
  const { route, bus } = setup();
  const acme: TokenPayload = { ...OPERATOR, tenant: "acme", scopes: ["operator"] };
  const stream = frames(await route.handle(new Request("http://127.0.0.1/v1/events"), acme));
  await stream.next();
  const opened = (tenant: string) =>
    ({ type: "session.opened", sessionId: tenant, transport: "sse", tenant }) as const;
  bus.publish(opened("globex"));
  bus.publish({ type: "proxy.state", server: "a", from: "READY", to: "FAILED" });
  bus.publish({ type: "tools.changed", count: 3 });
  bus.publish(opened("acme"));
  assert.match((await stream.next())!, /^event: session\.opened\ndata: .*"tenant":"acme"/);
  bus.publish({ type: "gateway.stopping" });
  assert.match((await stream.next())!, /^event: gateway\.stopping\n/);
  assert.equal(await stream.next(), undefined);
});

Deno.test("The events stream sends a keep-alive comment every 15 s", async () => {
  const { route, clock } = setup();
  const stream = frames(
    await route.handle(new Request("http://127.0.0.1/v1/events"), OPERATOR),
  );
  await stream.next();
  clock.advance(15_000);
  assert.equal(await stream.next(), ": keep-alive");
  clock.advance(15_000);
  assert.equal(await stream.next(), ": keep-alive");
  await stream.cancel();
});

Deno.test("The events stream unsubscribes from the bus when the client disconnects", async () => {
  const { route, bus } = setup();
  // Deno.serve cancels a response body when its client disconnects.
  const open = async () =>
    (await route.handle(new Request("http://127.0.0.1/v1/events"), OPERATOR)).body!.getReader();
  const first = await open();
  const second = await open();
  assert.equal(bus.subscribers, 2);
  await first.cancel();
  assert.equal(bus.subscribers, 1);
  await second.cancel();
  assert.equal(bus.subscribers, 0);
  bus.publish({ type: "tools.changed", count: 1 }); // reaches no one, throws nowhere
});

Deno.test("A slow reader holds at most maxQueue frames: the oldest are dropped and an overflow frame counts them", async () => {
  const { route, bus } = setup({ maxQueue: 5 });
  const stream = frames(
    await route.handle(new Request("http://127.0.0.1/v1/events"), OPERATOR),
  );
  for (let i = 0; i < 100; i++) bus.publish({ type: "tools.changed", count: i });
  await stream.next(); // the open frame
  const delivered: number[] = [];
  let dropped = 0;
  while (!delivered.includes(99)) {
    const frame = (await stream.next())!;
    const data = JSON.parse(frame.slice(frame.indexOf("data: ") + 6));
    if (frame.startsWith("event: stream.overflow")) dropped += data.dropped;
    else delivered.push(data.count);
  }
  assert.ok(delivered.length <= 5 + 8, `at most the queue and the stream's buffer were kept`);
  assert.equal(delivered.length + dropped, 100);
  assert.deepEqual(delivered.slice(-5), [95, 96, 97, 98, 99], "the newest events survive");
  await stream.cancel();
});

Deno.test("The events stream forwards gateway.stopping and ends, so shutdown never waits on it", async () => {
  const { route, bus } = setup();
  const stream = frames(
    await route.handle(new Request("http://127.0.0.1/v1/events"), OPERATOR),
  );
  await stream.next();
  bus.publish({ type: "gateway.stopping" });
  assert.match((await stream.next())!, /^event: gateway\.stopping\n/);
  assert.equal(await stream.next(), undefined);
  assert.equal(bus.subscribers, 0);
});
