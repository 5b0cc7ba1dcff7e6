import assert from "node:assert/strict";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson, sharedKey } from "../bus/shared_state.ts";
import { ManualClock } from "../support/clock.ts";
import { silentLogger } from "../support/logger.ts";
import { newSessionRecord, type SessionRecord } from "./session_record.ts";
import { SESSIONS_BUCKET, SharedSessions, subjectOf } from "./shared_sessions.ts";

const TTL = 60_000;

/** Two replicas' stores on one shared state, and a bucket spy counting writes. */
async function twoReplicas() {
  const clock = new ManualClock(1_000);
  const state = new MemorySharedState({ clock });
  const open = (replicaId: string) =>
    SharedSessions.open(state, { ttlMs: TTL, replicaId, clock, logger: silentLogger });
  const a = await open("a");
  const b = await open("b");
  const bucket = await state.bucket(SESSIONS_BUCKET);
  let writes = 0;
  await bucket.watch((change) => void (change.value && writes++));
  const record = newSessionRecord({
    params: {
      protocolVersion: "2025-06-18",
      capabilities: {},
      clientInfo: { name: "c", version: "1" },
    },
    tenant: "acme",
    subject: "alice",
    principal: '["tokens_file","alice"]',
    replica: "a",
    now: clock.now(),
  });
  return { clock, state, a, b, bucket, record, writes: () => writes };
}

Deno.test("a record stored by one replica is read by another in one read", async () => {
  const { a, b, record } = await twoReplicas();
  await a.create("s1", record);
  assert.deepEqual(await b.load("s1"), record);
  assert.equal(await b.load("unknown"), null);
  a.close();
  b.close();
});

Deno.test("use renews a record only after a quarter of its TTL, not on every request", async () => {
  const { clock, a, b, record, writes } = await twoReplicas();
  await a.create("s1", record);
  await b.load("s1");
  const before = writes();
  for (let i = 0; i < 50; i++) b.touch("s1");
  await Promise.resolve();
  assert.equal(writes(), before, "no write before a quarter of the TTL");
  clock.advance(TTL / 4);
  for (let i = 0; i < 50; i++) b.touch("s1");
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(writes(), before + 1, "one renewal for fifty uses");
  clock.advance(TTL * 0.9);
  assert.equal(a.expired("s1"), false, "replica a saw b's renewal through the watch");
  a.close();
  b.close();
});

Deno.test("an unused record expires on every replica after its TTL", async () => {
  const { clock, a, b, record } = await twoReplicas();
  await a.create("s1", record);
  await b.load("s1");
  clock.advance(TTL);
  assert.equal(a.expired("s1"), true);
  assert.equal(b.expired("s1"), true);
  assert.equal(await b.load("s1"), null);
  a.close();
  b.close();
});

Deno.test("a state change on one replica reaches the other replica's copy", async () => {
  const { a, b, record } = await twoReplicas();
  await a.create("s1", record);
  await b.load("s1");
  const seen: (SessionRecord | null)[] = [];
  b.onChange((_id, changed) => seen.push(changed));
  await a.change("s1", (r) => ({ ...r, logLevel: "error" }));
  assert.equal(seen.length, 1);
  assert.equal(seen[0]?.logLevel, "error");
  assert.equal(b.known("s1")?.logLevel, "error");
  await a.remove("s1");
  assert.deepEqual(seen.slice(1), [null], "a DELETE on one replica drops the other's copy");
  a.close();
  b.close();
});

Deno.test("concurrent state changes on two replicas both land (compare-and-set retries)", async () => {
  const { a, b, record } = await twoReplicas();
  await a.create("s1", record);
  await b.load("s1");
  await Promise.all([
    a.change("s1", (r) => ({ ...r, activations: [...r.activations, "x__one"] })),
    b.change("s1", (r) => ({ ...r, logLevel: "debug" })),
  ]);
  const stored = await a.load("s1");
  assert.deepEqual(stored?.activations, ["x__one"]);
  assert.equal(stored?.logLevel, "debug");
  a.close();
  b.close();
});

Deno.test("a change to a session that is gone resolves to null", async () => {
  const { a, record } = await twoReplicas();
  assert.equal(await a.change("nope", (r) => r), null);
  await a.create("s1", record);
  await a.remove("s1");
  assert.equal(await a.change("s1", (r) => ({ ...r, logLevel: "info" })), null);
  a.close();
});

Deno.test("a malformed stored record counts as absent", async () => {
  const { a, bucket } = await twoReplicas();
  await bucket.put(sharedKey("s1"), encodeJson({ v: 1, tenant: "acme" }));
  assert.equal(await a.load("s1"), null);
  assert.equal(await a.load("x".repeat(500)), null, "an over-long id is not looked up");
  a.close();
});

Deno.test("notifications published for a session reach its subscriber, malformed ones do not", async () => {
  const { state, a, b } = await twoReplicas();
  const heard: string[] = [];
  const stop = b.subscribe("s.1", (m) => heard.push("method" in m ? m.method : ""));
  a.publish("s.1", {
    jsonrpc: "2.0",
    method: "notifications/resources/updated",
    params: { uri: "u" },
  });
  state.publish(
    subjectOf("s.1"),
    encodeJson({ from: "a", message: { jsonrpc: "2.0", id: 1, method: "notifications/x" } }),
  );
  state.publish(subjectOf("s.1"), new TextEncoder().encode("garbage"));
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.deepEqual(heard, ["notifications/resources/updated"]);
  stop();
  a.close();
  b.close();
});

Deno.test("a copy loaded near its record's expiry learns of the expiry at its next renewal", async () => {
  const { clock, a, b, record } = await twoReplicas();
  await a.create("s1", record);
  clock.advance(TTL * 0.9);
  await b.load("s1");
  clock.advance(TTL * 0.3);
  assert.equal(b.expired("s1"), false, "b read it only 0.3 TTL ago");
  b.touch("s1");
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(b.expired("s1"), true, "the renewal found the record gone");
  a.close();
  b.close();
});
