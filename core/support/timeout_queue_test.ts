import assert from "node:assert/strict";
import { ManualClock } from "./clock.ts";
import { TimeoutQueue } from "./timeout_queue.ts";

Deno.test("a timeout fires once its time has come, not before", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  const fired: number[] = [];
  queue.add(() => fired.push(clock.now()), 100);
  clock.advance(99);
  assert.deepEqual(fired, []);
  clock.advance(1);
  assert.deepEqual(fired, [100]);
});

Deno.test("a cancelled timeout never fires", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  let fired = false;
  const handle = queue.add(() => fired = true, 100);
  queue.add(() => {}, 200);
  handle.cancel();
  handle.cancel();
  clock.advance(300);
  assert.equal(fired, false);
});

Deno.test("many timeouts share one timer of the clock", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  for (let i = 0; i < 100; i++) queue.add(() => {}, 1_000 + i);
  assert.equal(clock.pendingTimers, 1);
  assert.equal(queue.size, 100);
});

Deno.test("an earlier timeout added after a later one still fires on time", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  const fired: string[] = [];
  queue.add(() => fired.push(`late at ${clock.now()}`), 1_000);
  queue.add(() => fired.push(`early at ${clock.now()}`), 10);
  clock.advance(2_000);
  assert.deepEqual(fired, ["early at 10", "late at 1000"]);
});

Deno.test("no timer is left once every timeout has fired or been cancelled", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  queue.add(() => {}, 10);
  const other = queue.add(() => {}, 50);
  clock.advance(10);
  assert.equal(clock.pendingTimers, 1, "armed for the one left");
  other.cancel();
  assert.equal(clock.pendingTimers, 0);
  assert.equal(queue.size, 0);
});

Deno.test("a timeout added while another fires is kept", () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  const fired: number[] = [];
  queue.add(() => queue.add(() => fired.push(clock.now()), 5), 10);
  clock.advance(20);
  assert.deepEqual(fired, [15]);
  assert.equal(clock.pendingTimers, 0);
});

Deno.test("a timeout that throws does not keep the others from running", async () => {
  const clock = new ManualClock();
  const queue = new TimeoutQueue(clock);
  const fired: string[] = [];
  const uncaught = Promise.withResolvers<unknown>();
  const onError = (event: ErrorEvent) => {
    event.preventDefault();
    uncaught.resolve(event.error);
  };
  globalThis.addEventListener("error", onError);
  try {
    queue.add(() => {
      throw new Error("boom");
    }, 10);
    queue.add(() => fired.push("after"), 10);
    clock.advance(10);
    assert.deepEqual(fired, ["after"]);
    assert.match(
      String(await uncaught.promise),
      /boom/,
      "reported as uncaught, as a timer's would be",
    );
  } finally {
    globalThis.removeEventListener("error", onError);
  }
});
