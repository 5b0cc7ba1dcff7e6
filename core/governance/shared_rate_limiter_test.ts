/**
 * Rate limits across replicas: limiters on ONE MemorySharedState are replicas sharing counters.
 */
import assert from "node:assert/strict";
import { MemorySharedState } from "../bus/memory_shared_state.ts";
import { encodeJson, type SharedBucket, type SharedState } from "../bus/shared_state.ts";
import { ManualClock } from "../support/clock.ts";
import { type Logger, silentLogger } from "../support/logger.ts";
import { rateLimitKey } from "./rate_limiter.ts";
import { RATE_LIMITS_BUCKET, SharedRateLimiter } from "./shared_rate_limiter.ts";

const KEY = rateLimitKey("acme", "fs__*", "fs__write");

/** A shared state whose buckets fail on demand, as an unreachable JetStream does. */
function flaky(state: SharedState): { shared: SharedState; down: (on: boolean) => void } {
  let down = false;
  return {
    down: (on) => void (down = on),
    shared: {
      async bucket(name, options) {
        const bucket = await state.bucket(name, options);
        const guard =
          <A extends unknown[], R>(fn: (...args: A) => Promise<R>) => (...args: A): Promise<R> =>
            down ? Promise.reject(new Error("TIMEOUT")) : fn.apply(bucket, args);
        const wrapped: SharedBucket = {
          name: bucket.name,
          get: guard(bucket.get),
          put: guard(bucket.put),
          create: guard(bucket.create),
          update: guard(bucket.update),
          delete: guard(bucket.delete),
          keys: guard(bucket.keys),
          watch: guard(bucket.watch),
        };
        return wrapped;
      },
      publish: (subject, data) => state.publish(subject, data),
      subscribe: (subject, handler) => state.subscribe(subject, handler),
      close: () => state.close(),
    },
  };
}

function recordingLogger(lines: string[]): Logger {
  const logger: Logger = {
    ...silentLogger,
    warn: (message: string) => void lines.push(message),
    child: () => logger,
  };
  return logger;
}

async function replicas(
  count: number,
  shared?: SharedState,
  logger: Logger = silentLogger,
  clock = new ManualClock(1_700_000_000_000),
) {
  const state = shared ?? new MemorySharedState({ clock });
  const limiters: SharedRateLimiter[] = [];
  for (let i = 0; i < count; i++) {
    const limiter = new SharedRateLimiter({ clock, logger, replicas: () => count });
    await limiter.open(state);
    limiters.push(limiter);
  }
  return { clock, state, limiters: limiters as [SharedRateLimiter, SharedRateLimiter] };
}

Deno.test("N calls a minute means N across every replica, whichever replica takes them", async () => {
  const { limiters } = await replicas(3);
  const outcomes = [];
  for (let i = 0; i < 12; i++) outcomes.push((await limiters[i % 3]!.take(KEY, 6, 6)).ok);
  assert.deepEqual(outcomes, [...Array(6).fill(true), ...Array(6).fill(false)]);
});

Deno.test("the shared counter refills with time for every replica", async () => {
  const { clock, limiters: [a, b] } = await replicas(2);
  for (let i = 0; i < 2; i++) assert.equal((await a.take(KEY, 2, 2)).ok, true);
  const refused = await b.take(KEY, 2, 2);
  assert.deepEqual(refused, { ok: false, retryAfterMs: 30_000 });
  clock.advance(30_000);
  assert.equal((await b.take(KEY, 2, 2)).ok, true);
  assert.equal((await a.take(KEY, 2, 2)).ok, false);
});

Deno.test("replicas racing on one counter never admit more than the limit", async () => {
  const { limiters: [a, b] } = await replicas(2);
  const outcomes = await Promise.all(
    Array.from({ length: 20 }, (_, i) => (i % 2 ? a : b).take(KEY, 10, 10)),
  );
  assert.equal(outcomes.filter((o) => o.ok).length, 10);
  assert.ok(a.stats().conflicts + b.stats().conflicts > 0, "the race happened");
});

Deno.test("with the bucket unreachable each replica enforces its share, logged once", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const { shared, down } = flaky(new MemorySharedState({ clock }));
  const lines: string[] = [];
  const { limiters: [a, b] } = await replicas(2, shared, recordingLogger(lines));
  down(true);
  const taken = [];
  for (let i = 0; i < 10; i++) taken.push((await (i % 2 ? a : b).take(KEY, 6, 6)).ok);
  // Each replica's share of 6 is 3: never more than the limit across both.
  assert.equal(taken.filter(Boolean).length, 6);
  assert.equal(a.stats().outages, 1);
  assert.equal(lines.filter((l) => /each replica enforces its share \(1\/2/.test(l)).length, 2);
});

Deno.test("after an outage the shared counters decide again once the retry interval passed", async () => {
  const clock = new ManualClock(1_700_000_000_000);
  const { shared, down } = flaky(new MemorySharedState({ clock }));
  const { limiters: [a] } = await replicas(1, shared, silentLogger, clock);
  down(true);
  await a.take(KEY, 60, 60);
  down(false);
  await a.take(KEY, 60, 60);
  assert.equal(a.stats().shared, 0, "still on the share within the retry interval");
  clock.advance(5_000);
  await a.take(KEY, 60, 60);
  assert.equal(a.stats().shared, 1);
});

Deno.test("a malformed counter in the bucket starts empty rather than opening the limit", async () => {
  const { state, limiters: [a] } = await replicas(1);
  const bucket = await state.bucket(RATE_LIMITS_BUCKET);
  const { createHash } = await import("node:crypto");
  const key = "limit." + createHash("sha256").update(KEY).digest("hex");
  await bucket.put(key, encodeJson({ tokens: "lots" }));
  assert.equal((await a.take(KEY, 1, 5)).ok, false);
});
