import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { RateLimiter, rateLimitKey } from "./rate_limiter.ts";

const KEY = rateLimitKey("acme", "github__*", "github__create_issue");

Deno.test("the key joins tenant, rule and tool with NUL", () => {
  assert.equal(KEY, "acme\0github__*\0github__create_issue");
});

Deno.test("a new bucket allows a burst, then refuses with the time until the next token", () => {
  const limiter = new RateLimiter({ clock: new ManualClock(0) });
  for (let i = 0; i < 3; i++) assert.deepEqual(limiter.take(KEY, 60, 3), { ok: true }, `call ${i}`);
  assert.deepEqual(limiter.take(KEY, 60, 3), { ok: false, retryAfterMs: 1_000 });
});

Deno.test("tokens refill at perMinute: waiting retryAfterMs is always enough", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock });
  for (const perMinute of [1, 7, 60, 61, 1000]) {
    const key = `k${perMinute}`;
    assert.equal(limiter.take(key, perMinute, 1).ok, true);
    const refused = limiter.take(key, perMinute, 1);
    assert.equal(refused.ok, false);
    if (refused.ok) continue;
    clock.advance(refused.retryAfterMs - 1);
    assert.equal(limiter.take(key, perMinute, 1).ok, false, `${perMinute}/min: not yet`);
    clock.advance(1);
    assert.equal(limiter.take(key, perMinute, 1).ok, true, `${perMinute}/min: now`);
  }
});

Deno.test("refused calls do not consume tokens", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock });
  assert.equal(limiter.take(KEY, 60, 1).ok, true);
  for (let i = 0; i < 5; i++) assert.equal(limiter.take(KEY, 60, 1).ok, false);
  clock.advance(1_000);
  assert.equal(limiter.take(KEY, 60, 1).ok, true);
});

Deno.test("a bucket refills no further than its burst", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock });
  limiter.take(KEY, 60, 2);
  clock.advance(3_600_000);
  assert.equal(limiter.take(KEY, 60, 2).ok, true);
  assert.equal(limiter.take(KEY, 60, 2).ok, true);
  assert.equal(limiter.take(KEY, 60, 2).ok, false);
});

Deno.test("keys are independent", () => {
  const limiter = new RateLimiter({ clock: new ManualClock(0) });
  assert.equal(limiter.take(rateLimitKey("acme", "r", "t"), 1, 1).ok, true);
  assert.equal(limiter.take(rateLimitKey("acme", "r", "t"), 1, 1).ok, false);
  assert.equal(limiter.take(rateLimitKey("globex", "r", "t"), 1, 1).ok, true);
  assert.equal(limiter.take(rateLimitKey("acme", "r", "u"), 1, 1).ok, true);
});

Deno.test("a changed limit applies at once and keeps the bucket's tokens, capped at the new burst", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock });
  for (let i = 0; i < 5; i++) limiter.take(KEY, 60, 10);
  // 5 left; the new burst of 2 caps them.
  assert.equal(limiter.take(KEY, 60, 2).ok, true);
  assert.equal(limiter.take(KEY, 60, 2).ok, true);
  assert.equal(limiter.take(KEY, 60, 2).ok, false);
});

Deno.test("idle buckets that have refilled are dropped, so memory follows active keys", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock });
  for (let i = 0; i < 1000; i++) limiter.take(`idle-${i}`, 60, 5);
  limiter.take("slow", 1, 5);
  limiter.take("slow", 1, 5);
  assert.equal(limiter.size, 1001);
  clock.advance(60_000);
  limiter.take("active", 60, 5);
  // The idle buckets refilled (5 s of refill at 60/min); "slow" needs 2 min to refill.
  assert.equal(limiter.size, 2);
  assert.equal(limiter.take("slow", 1, 5).ok, true, "a kept bucket keeps its state");
});

Deno.test("past maxKeys the least recently used bucket is dropped", () => {
  const clock = new ManualClock(0);
  const limiter = new RateLimiter({ clock, maxKeys: 2 });
  assert.equal(limiter.take("a", 1, 1).ok, true);
  assert.equal(limiter.take("b", 1, 1).ok, true);
  assert.equal(limiter.take("a", 1, 1).ok, false, "touching a makes b the oldest");
  assert.equal(limiter.take("c", 1, 1).ok, true);
  assert.equal(limiter.size, 2);
  assert.equal(limiter.take("a", 1, 1).ok, false, "a was kept");
  assert.equal(limiter.take("b", 1, 1).ok, true, "b was dropped and starts over");
});

Deno.test("a clock that steps back never adds tokens", () => {
  let now = 10_000;
  const limiter = new RateLimiter({
    clock: { now: () => now, setTimeout: () => ({ cancel() {} }) },
  });
  assert.equal(limiter.take(KEY, 60, 1).ok, true);
  now = 0;
  assert.equal(limiter.take(KEY, 60, 1).ok, false);
});

Deno.test("invalid limits are refused with a RangeError", () => {
  const limiter = new RateLimiter({ clock: new ManualClock(0) });
  assert.throws(() => limiter.take(KEY, 0, 1), RangeError);
  assert.throws(() => limiter.take(KEY, Infinity, 1), RangeError);
  assert.throws(() => limiter.take(KEY, 60, 0.5), RangeError);
  assert.throws(() => new RateLimiter({ clock: new ManualClock(0), maxKeys: 0 }), RangeError);
});
