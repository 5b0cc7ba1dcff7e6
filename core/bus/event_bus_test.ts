import assert from "node:assert/strict";
import { InProcessEventBus } from "./event_bus.ts";
import type { GatewayEvent } from "./events.ts";
import { createLogger } from "../support/logger.ts";

const EVENT: GatewayEvent = { type: "tools.changed", count: 3 };

Deno.test("InProcessEventBus delivers each event to every subscriber in subscription order", () => {
  const bus = new InProcessEventBus();
  const seen: string[] = [];
  bus.subscribe((event) => seen.push(`first:${event.type}`));
  bus.subscribe((event) => seen.push(`second:${event.type}`));
  bus.publish(EVENT);
  bus.publish({ type: "gateway.stopping" });
  assert.deepEqual(seen, [
    "first:tools.changed",
    "second:tools.changed",
    "first:gateway.stopping",
    "second:gateway.stopping",
  ]);
});

Deno.test("InProcessEventBus.subscribe returns a function that stops delivery to that subscriber", () => {
  const bus = new InProcessEventBus();
  const kept: GatewayEvent[] = [];
  const dropped: GatewayEvent[] = [];
  bus.subscribe((event) => kept.push(event));
  const unsubscribe = bus.subscribe((event) => dropped.push(event));
  unsubscribe();
  bus.publish(EVENT);
  assert.deepEqual(kept, [EVENT]);
  assert.deepEqual(dropped, []);
});

Deno.test("InProcessEventBus keeps delivering to the others when a subscriber throws, and logs it", () => {
  const lines: string[] = [];
  const bus = new InProcessEventBus(createLogger({ format: "json", sink: (l) => lines.push(l) }));
  const seen: GatewayEvent[] = [];
  bus.subscribe(() => {
    throw new Error("subscriber broke");
  });
  bus.subscribe((event) => seen.push(event));
  assert.doesNotThrow(() => bus.publish(EVENT));
  assert.deepEqual(seen, [EVENT]);
  assert.equal(lines.length, 1);
  const line = JSON.parse(lines[0]!);
  assert.equal(line.level, "warn");
  assert.equal(line.event, "tools.changed");
  assert.match(line.error, /subscriber broke/);
});

Deno.test("InProcessEventBus.close removes every subscriber", async () => {
  const bus = new InProcessEventBus();
  const seen: GatewayEvent[] = [];
  bus.subscribe((event) => seen.push(event));
  await bus.close();
  bus.publish(EVENT);
  assert.deepEqual(seen, []);
});
