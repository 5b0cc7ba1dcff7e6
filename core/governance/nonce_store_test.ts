import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { MemoryNonceStore } from "./nonce_store.ts";

Deno.test("a nonce is consumed the first time only", async () => {
  const store = new MemoryNonceStore({ clock: new ManualClock(1_000) });
  assert.equal(await store.consume("n1", 60_000), true);
  assert.equal(await store.consume("n1", 60_000), false);
  assert.equal(await store.consume("n2", 60_000), true, "other nonces are independent");
});

Deno.test("a nonce stays consumed until its token expires", async () => {
  const clock = new ManualClock(0);
  const store = new MemoryNonceStore({ clock });
  assert.equal(await store.consume("n", 10_000), true);
  clock.advance(9_999);
  assert.equal(await store.consume("n", 10_000), false);
});

Deno.test("a nonce whose token already expired is refused", async () => {
  const clock = new ManualClock(10_000);
  const store = new MemoryNonceStore({ clock });
  assert.equal(await store.consume("late", 10_000), false);
  assert.equal(await store.consume("late", 9_000), false);
  assert.equal(store.size, 0, "nothing is remembered for it");
});

Deno.test("concurrent consumes of one nonce: exactly one wins", async () => {
  const store = new MemoryNonceStore({ clock: new ManualClock(0) });
  const results = await Promise.all(Array.from({ length: 10 }, () => store.consume("n", 1_000)));
  assert.equal(results.filter(Boolean).length, 1);
});

Deno.test("expired nonces are pruned so memory stays bounded by the live ones", async () => {
  const clock = new ManualClock(0);
  const store = new MemoryNonceStore({ clock });
  for (let round = 0; round < 20; round++) {
    for (let i = 0; i < 500; i++) {
      assert.equal(await store.consume(`r${round}-${i}`, clock.now() + 1_000), true);
    }
    clock.advance(1_000);
  }
  // 10 000 nonces consumed; only a bounded number of expired ones may linger.
  assert.ok(store.size <= 2 * 1024 + 500, `size ${store.size}`);
});

Deno.test("nonces handed over from an earlier process stay consumed; expired ones are forgotten", async () => {
  const clock = new ManualClock(5_000);
  const store = new MemoryNonceStore({
    clock,
    initial: [{ nonce: "used", expiresAt: 60_000 }, { nonce: "old", expiresAt: 4_000 }],
  });
  assert.deepEqual(store.entries(), [{ nonce: "used", expiresAt: 60_000 }]);
  assert.equal(await store.consume("used", 60_000), false, "a replay after restart is refused");
  assert.equal(await store.consume("fresh", 60_000), true);
  clock.advance(60_000);
  assert.deepEqual(store.entries(), [], "nothing outlives its token");
});
