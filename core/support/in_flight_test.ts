import assert from "node:assert/strict";
import { InFlight } from "./in_flight.ts";

Deno.test("idle resolves at once when nothing is in flight", async () => {
  await new InFlight().idle();
});

Deno.test("idle resolves for every waiter once the last piece of work ends, not before", async () => {
  const work = new InFlight();
  work.enter();
  work.enter();
  let woken = 0;
  const waiters = [work.idle(), work.idle()].map((p) => p.then(() => woken++));
  work.leave();
  await Promise.resolve();
  assert.equal(woken, 0);
  assert.equal(work.count, 1);
  work.leave();
  await Promise.all(waiters);
  assert.equal(woken, 2);
});

Deno.test("work that begins after an idle moment is waited for afresh", async () => {
  const work = new InFlight();
  work.enter();
  const first = work.idle();
  work.leave();
  await first;
  work.enter();
  let done = false;
  const second = work.idle().then(() => done = true);
  await Promise.resolve();
  assert.equal(done, false);
  work.leave();
  await second;
});
