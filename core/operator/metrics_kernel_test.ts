import assert from "node:assert/strict";
import { natsStatsOf } from "./metrics_kernel.ts";

Deno.test("NATS stats are read from a bus plugin that has a stats() of the right shape", () => {
  const bus = {
    stats: () => ({ published: 1, buffered: 0, dropped: 3, connected: true, reconnects: 2 }),
  };
  assert.deepEqual(natsStatsOf(bus), { connected: true, dropped: 3, reconnects: 2 });
});

Deno.test("No NATS stats without a bus plugin, without stats(), or with another shape", () => {
  assert.equal(natsStatsOf(undefined), undefined);
  assert.equal(natsStatsOf({ publish() {} }), undefined);
  assert.equal(natsStatsOf({ stats: () => ({ connected: "yes" }) }), undefined);
});
