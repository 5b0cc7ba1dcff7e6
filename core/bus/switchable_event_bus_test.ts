import assert from "node:assert/strict";
import { type EventBus, type EventHandler, InProcessEventBus } from "./event_bus.ts";
import type { GatewayEvent } from "./events.ts";
import { SwitchableEventBus } from "./switchable_event_bus.ts";

const event: GatewayEvent = { type: "tools.changed", count: 1 };

Deno.test("SwitchableEventBus moves subscribers to the new backend", async () => {
  const bus = new SwitchableEventBus(new InProcessEventBus());
  const seen: GatewayEvent[] = [];
  bus.subscribe((e) => seen.push(e));
  await bus.use(new InProcessEventBus());
  bus.publish(event);
  assert.deepEqual(seen, [event]);
});

Deno.test("SwitchableEventBus.subscribeLocal sees this process's events, not a backend's remote ones", async () => {
  let remote: EventHandler | undefined;
  const backend: EventBus = {
    publish: () => {},
    subscribe: (handler) => {
      remote = handler;
      return () => {};
    },
    close: () => Promise.resolve(),
  };
  const bus = new SwitchableEventBus(new InProcessEventBus());
  await bus.use(backend);
  const local: GatewayEvent[] = [];
  const all: GatewayEvent[] = [];
  bus.subscribeLocal((e) => local.push(e));
  bus.subscribe((e) => all.push(e));
  bus.publish(event);
  remote?.({ type: "tools.changed", count: 2 });
  assert.deepEqual(local, [event]);
  assert.deepEqual(all, [{ type: "tools.changed", count: 2 }]);
});
