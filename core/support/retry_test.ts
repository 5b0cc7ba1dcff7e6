import assert from "node:assert/strict";
import { ManualClock } from "./clock.ts";
import { retry, type RetryPolicy } from "./retry.ts";

function policy(clock: ManualClock, told: string[], extra: Partial<RetryPolicy> = {}): RetryPolicy {
  return {
    clock,
    transient: (error) => String(error).includes("transient"),
    pauseMs: (attempt) => 100 * attempt,
    retrying: (error, attempt) => void told.push(`${attempt}: ${error}`),
    ...extra,
  };
}

/** Runs `work` on `clock`, advancing it while `work` pauses, until it settles. */
async function settle<T>(clock: ManualClock, work: Promise<T>): Promise<T> {
  let done = false;
  work.then(() => done = true, () => done = true);
  while (!done) {
    await new Promise((resolve) => queueMicrotask(() => resolve(undefined)));
    clock.advance(100);
  }
  return await work;
}

Deno.test("a step that fails transiently is tried again after its pause, until it succeeds", async () => {
  const clock = new ManualClock();
  const told: string[] = [];
  let tries = 0;
  const result = await settle(
    clock,
    retry(
      () => ++tries < 3 ? Promise.reject(new Error("transient")) : Promise.resolve("ok"),
      policy(clock, told),
    ),
  );
  assert.equal(result, "ok");
  assert.deepEqual(told, ["1: Error: transient", "2: Error: transient"]);
  assert.equal(clock.now() >= 300, true, "paused 100 then 200 ms");
});

Deno.test("an error that is not transient is thrown at once", async () => {
  const clock = new ManualClock();
  const told: string[] = [];
  await assert.rejects(
    retry(() => Promise.reject(new Error("final")), policy(clock, told)),
    /final/,
  );
  assert.deepEqual(told, []);
});

Deno.test("a step is tried at most `attempts` times, and no more once `withinMs` has passed", async () => {
  const clock = new ManualClock();
  let tries = 0;
  const fail = () => (tries++, Promise.reject(new Error("transient")));
  await assert.rejects(settle(clock, retry(fail, policy(clock, [], { attempts: 3 }))), /transient/);
  assert.equal(tries, 3);
  tries = 0;
  await assert.rejects(
    settle(clock, retry(fail, policy(clock, [], { withinMs: 250 }))),
    /transient/,
  );
  assert.equal(tries, 3, "tried at 0, 100 and 300 ms: past 250 after the third");
});
