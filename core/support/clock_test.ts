import assert from "node:assert/strict";
import { deadline, every, ManualClock, pause, settlesWithin, systemClock } from "./clock.ts";

Deno.test("ManualClock starts at the given time, or 0", () => {
  assert.equal(new ManualClock().now(), 0);
  assert.equal(new ManualClock(1_700_000_000_000).now(), 1_700_000_000_000);
});

Deno.test("ManualClock.advance moves now forward by the given milliseconds", () => {
  const clock = new ManualClock(100);
  clock.advance(250);
  assert.equal(clock.now(), 350);
  clock.advance(0);
  assert.equal(clock.now(), 350);
});

Deno.test("ManualClock fires a timer only once its delay has fully passed", () => {
  const clock = new ManualClock();
  let fired = 0;
  clock.setTimeout(() => fired++, 100);
  clock.advance(99);
  assert.equal(fired, 0);
  clock.advance(1);
  assert.equal(fired, 1);
  clock.advance(1000);
  assert.equal(fired, 1);
});

Deno.test("ManualClock fires due timers in time order, each at its own time", () => {
  const clock = new ManualClock();
  const fired: [string, number][] = [];
  clock.setTimeout(() => fired.push(["late", clock.now()]), 30);
  clock.setTimeout(() => fired.push(["early", clock.now()]), 10);
  clock.setTimeout(() => fired.push(["middle", clock.now()]), 20);
  clock.advance(50);
  assert.deepEqual(fired, [["early", 10], ["middle", 20], ["late", 30]]);
  assert.equal(clock.now(), 50);
});

Deno.test("ManualClock fires timers due at the same time in the order they were set", () => {
  const clock = new ManualClock();
  const fired: number[] = [];
  for (const n of [1, 2, 3]) clock.setTimeout(() => fired.push(n), 5);
  clock.advance(5);
  assert.deepEqual(fired, [1, 2, 3]);
});

Deno.test("ManualClock fires a timer set by a timer when it falls within the same advance", () => {
  const clock = new ManualClock();
  const fired: number[] = [];
  clock.setTimeout(() => {
    fired.push(clock.now());
    clock.setTimeout(() => fired.push(clock.now()), 10);
  }, 10);
  clock.advance(25);
  assert.deepEqual(fired, [10, 20]);
});

Deno.test("ManualClock timer cancel stops the timer from firing", () => {
  const clock = new ManualClock();
  const fired: string[] = [];
  const cancelled = clock.setTimeout(() => fired.push("cancelled"), 10);
  clock.setTimeout(() => fired.push("kept"), 10);
  cancelled.cancel();
  clock.advance(10);
  assert.deepEqual(fired, ["kept"]);
  assert.doesNotThrow(() => cancelled.cancel());
});

Deno.test("ManualClock treats a negative delay as zero, so time never runs backwards", () => {
  const clock = new ManualClock(1000);
  const at: number[] = [];
  clock.setTimeout(() => at.push(clock.now()), -500);
  clock.advance(0);
  assert.deepEqual(at, [1000]);
  assert.equal(clock.now(), 1000);
});

Deno.test("deadline expires once its time has passed on the clock, not before", async () => {
  const clock = new ManualClock();
  const limit = deadline(clock, 100);
  let expired = false;
  limit.expired.then(() => expired = true);
  clock.advance(99);
  await Promise.resolve();
  assert.equal(expired, false);
  assert.equal(limit.passed, false);
  assert.equal(limit.signal.aborted, false);
  clock.advance(1);
  await Promise.resolve();
  assert.equal(expired, true);
  assert.equal(limit.passed, true);
});

Deno.test("deadline's signal aborts at expiry with a TimeoutError, as AbortSignal.timeout does", () => {
  const clock = new ManualClock();
  const limit = deadline(clock, 50);
  const signal = limit.signal;
  clock.advance(50);
  assert.equal(signal.aborted, true);
  assert.equal((signal.reason as DOMException).name, "TimeoutError");
  assert.match((signal.reason as DOMException).message, /50 ms/);
});

Deno.test("deadline's signal taken after expiry is already aborted", () => {
  const clock = new ManualClock();
  const limit = deadline(clock, 10);
  clock.advance(10);
  assert.equal(limit.signal.aborted, true);
});

Deno.test("a cancelled deadline never expires and leaves no timer behind", async () => {
  const clock = new ManualClock();
  const limit = deadline(clock, 10);
  let expired = false;
  limit.expired.then(() => expired = true);
  limit.cancel();
  limit.cancel();
  clock.advance(1_000);
  await Promise.resolve();
  assert.equal(expired, false);
  assert.equal(limit.signal.aborted, false);
});

Deno.test("settlesWithin is true when the work settles in time, fulfilled or rejected", async () => {
  const clock = new ManualClock();
  assert.equal(await settlesWithin(clock, 100, Promise.resolve("done")), true);
  assert.equal(await settlesWithin(clock, 100, Promise.reject(new Error("failed"))), true);
});

Deno.test("settlesWithin is false when the time runs out before the work settles", async () => {
  const clock = new ManualClock();
  const waiting = settlesWithin(clock, 100, new Promise(() => {}));
  clock.advance(100);
  assert.equal(await waiting, false);
});

Deno.test("pause resolves after its time on the clock", async () => {
  const clock = new ManualClock();
  let done = false;
  const paused = pause(clock, 30).then(() => done = true);
  clock.advance(29);
  await Promise.resolve();
  assert.equal(done, false);
  clock.advance(1);
  await paused;
  assert.equal(done, true);
});

Deno.test("pause ends early when its signal aborts, and at once when it already has", async () => {
  const clock = new ManualClock();
  const controller = new AbortController();
  const paused = pause(clock, 1_000, controller.signal);
  controller.abort();
  await paused;
  await pause(clock, 1_000, controller.signal);
  clock.advance(1_000);
});

Deno.test("every runs its function each period until cancelled, even from inside it", () => {
  const clock = new ManualClock();
  const at: number[] = [];
  const repeat = every(clock, 10, () => {
    at.push(clock.now());
    if (at.length === 3) repeat.cancel();
  });
  clock.advance(9);
  assert.deepEqual(at, []);
  clock.advance(100);
  assert.deepEqual(at, [10, 20, 30]);
});

Deno.test("a cancelled every never runs again", () => {
  const clock = new ManualClock();
  let runs = 0;
  const repeat = every(clock, 10, () => runs++);
  clock.advance(25);
  repeat.cancel();
  clock.advance(100);
  assert.equal(runs, 2);
});

Deno.test("the real clock's timers fire no earlier than asked, in the order of their deadlines, and a cancelled one never", async () => {
  const started = performance.now();
  const fired: string[] = [];
  const done = Promise.withResolvers<void>();
  systemClock.setTimeout(() => fired.push("never"), 5).cancel();
  systemClock.setTimeout(() => {
    fired.push(`30 after ${Math.floor(performance.now() - started)}`);
    done.resolve();
  }, 30);
  systemClock.setTimeout(
    () => fired.push(`10 after ${Math.floor(performance.now() - started)}`),
    10,
  );
  await done.promise;
  assert.equal(fired.length, 2, fired.join(", "));
  const [first, second] = fired.map((f) => f.split(" after "));
  assert.equal(first![0], "10");
  assert.ok(Number(first![1]) >= 10, fired[0]);
  assert.equal(second![0], "30");
  assert.ok(Number(second![1]) >= 30, fired[1]);
});
