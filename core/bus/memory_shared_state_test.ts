import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { MemorySharedState } from "./memory_shared_state.ts";
import { encodeJson, isSharedKey, sharedKey } from "./shared_state.ts";
import { sharedStateContract } from "../../tests/support/shared_state_contract.ts";

sharedStateContract("in-process", () => {
  const state = new MemorySharedState();
  return Promise.resolve({ a: state, b: state, stop: () => state.close() });
});

Deno.test("an entry expires its bucket's TTL after its last write, and a write renews it", async () => {
  const clock = new ManualClock();
  const bucket = await new MemorySharedState({ clock }).bucket("sessions", { ttlMs: 1000 });
  await bucket.put("s1", encodeJson(1));
  clock.advance(900);
  await bucket.put("s1", encodeJson(2));
  clock.advance(900);
  assert.notEqual(await bucket.get("s1"), null, "renewed by the second write");
  clock.advance(100);
  assert.equal(await bucket.get("s1"), null);
});

Deno.test("a value over the bucket's size bound is refused", async () => {
  const bucket = await new MemorySharedState().bucket("small", { maxValueBytes: 4 });
  await assert.rejects(() => bucket.put("k", new Uint8Array(5)), /over its 4/);
});

Deno.test("sharedKey turns any text into one safe token per part, and distinct parts stay distinct", () => {
  const keys = ["a", "a.b", "a b", "=a", "ü", "", "tenant/x", "*", ">"].map((p) =>
    sharedKey("t", p)
  );
  for (const key of keys) assert.ok(isSharedKey(key), key);
  assert.equal(new Set(keys).size, keys.length);
  assert.equal(sharedKey("plain", "id-1"), "plain.id-1");
});
