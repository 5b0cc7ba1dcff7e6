import assert from "node:assert/strict";
import { ManualClock } from "./clock.ts";

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
