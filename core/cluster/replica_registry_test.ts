import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { silentLogger } from "../support/logger.ts";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson } from "../bus/shared_state.ts";
import { ReplicaRegistry, REPLICAS_BUCKET, type ReplicaState } from "./replica_registry.ts";

const INTERVAL = 1_000;

function registry(
  state: MemorySharedState,
  clock: ManualClock,
  id: string,
  snapshot: () => ReplicaState,
) {
  return new ReplicaRegistry({
    state,
    replicaId: id,
    clock,
    logger: silentLogger,
    intervalMs: INTERVAL,
    snapshot,
  });
}

function healthy(fleetRevision: number): ReplicaState {
  return { fleetRevision, policyRevision: 1, fleet: { servers: 2, ready: 2, failed: 0 } };
}

/** Lets the beats a timer started finish. */
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

Deno.test("replicas on one shared state list each other with the revisions and fleet state they report", async () => {
  const clock = new ManualClock(50_000);
  const state = new MemorySharedState({ clock });
  const a = registry(state, clock, "gw-a", () => healthy(7));
  const b = registry(
    state,
    clock,
    "gw-b",
    () => ({ ...healthy(6), fleet: { servers: 2, ready: 1, failed: 1 } }),
  );
  await a.start("http://127.0.0.1:8001");
  await b.start();
  const listed = await a.list();
  assert.deepEqual(listed.map((r) => [r.id, r.fleetRevision, r.fleet.failed, r.draining]), [
    ["gw-a", 7, 0, false],
    ["gw-b", 6, 1, false],
  ]);
  assert.equal(listed[0]!.url, "http://127.0.0.1:8001");
  assert.equal(listed[0]!.startedAt, 50_000);
  assert.deepEqual(await b.list(), listed, "every replica sees the same cluster");
  await a.stop();
  await b.stop();
});

Deno.test("a heartbeat renews the record every interval, and a replica that stops beating drops out after three", async () => {
  const clock = new ManualClock(0);
  const state = new MemorySharedState({ clock });
  let revision = 1;
  const a = registry(state, clock, "gw-a", () => healthy(revision));
  const b = registry(state, clock, "gw-b", () => healthy(1));
  await a.start();
  await b.start();
  revision = 2;
  for (let beat = 0; beat < 5; beat++) {
    clock.advance(INTERVAL);
    await settle();
  }
  const [first] = await b.list();
  assert.equal(first!.fleetRevision, 2, "each beat reports the state of the moment");
  assert.equal(first!.heartbeatAt, 5 * INTERVAL);
  // gw-c beats once and dies without a word (a SIGKILL): its record stays until it ages out.
  const killed = registry(state, clock, "gw-c", () => healthy(1));
  await killed.beat();
  assert.deepEqual((await a.list()).map((r) => r.id), ["gw-a", "gw-b", "gw-c"]);
  for (let beat = 0; beat < 3; beat++) {
    clock.advance(INTERVAL);
    await settle();
  }
  assert.deepEqual((await a.list()).map((r) => r.id), ["gw-a", "gw-b"], "gw-c never beat again");
  await a.stop();
  await b.stop();
});

Deno.test("draining shows in the record at once, and a clean stop removes it at once", async () => {
  const clock = new ManualClock(0);
  const state = new MemorySharedState({ clock });
  const a = registry(state, clock, "gw-a", () => healthy(1));
  const b = registry(state, clock, "gw-b", () => healthy(1));
  await a.start();
  await b.start();
  await b.drain();
  assert.deepEqual((await a.list()).map((r) => [r.id, r.draining]), [["gw-a", false], [
    "gw-b",
    true,
  ]]);
  await b.stop();
  assert.deepEqual((await a.list()).map((r) => r.id), ["gw-a"]);
  clock.advance(INTERVAL * 2);
  await settle();
  assert.deepEqual(
    (await a.list()).map((r) => r.id),
    ["gw-a"],
    "a stopped replica never beats again",
  );
  await a.stop();
});

Deno.test("a record that is not a heartbeat is skipped, never trusted", async () => {
  const clock = new ManualClock(0);
  const state = new MemorySharedState({ clock });
  const a = registry(state, clock, "gw-a", () => healthy(1));
  await a.start();
  const bucket = await state.bucket(REPLICAS_BUCKET);
  await bucket.put("forged", encodeJson({ id: "forged", draining: "no" }));
  await bucket.put("garbage", new TextEncoder().encode("not json"));
  assert.deepEqual((await a.list()).map((r) => r.id), ["gw-a"]);
  await a.stop();
});
