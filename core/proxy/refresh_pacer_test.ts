/** RefreshPacer: list_changed refreshes are paced, coalesced, backed off and never lost. */
import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { RefreshPacer } from "./refresh_pacer.ts";

/** A pacer over a refresh that counts its runs and reports "changed" as told. */
function paced(changes = () => true) {
  const clock = new ManualClock();
  let runs = 0;
  const pacer = new RefreshPacer({
    clock,
    refresh: () => {
      runs++;
      return Promise.resolve(changes());
    },
  });
  // Lets the refresh's and the pause's promise callbacks run.
  const settle = async () => {
    for (let i = 0; i < 5; i++) await Promise.resolve();
  };
  const advance = async (ms: number) => {
    clock.advance(ms);
    await settle();
  };
  return { clock, pacer, runs: () => runs, settle, advance };
}

Deno.test("the first list_changed refreshes at once", async () => {
  const p = paced();
  p.pacer.request();
  await p.settle();
  assert.equal(p.runs(), 1);
  p.pacer.close();
});

Deno.test("list_changed during the pause are coalesced into one refresh at its end", async () => {
  const p = paced();
  p.pacer.request();
  await p.settle();
  for (let i = 0; i < 100; i++) p.pacer.request();
  await p.advance(999);
  assert.equal(p.runs(), 1, "nothing before the pause is over");
  await p.advance(1);
  assert.equal(p.runs(), 2, "one refresh for the hundred notifications");
  p.pacer.close();
});

Deno.test("no list_changed is lost: one that arrives during a refresh gets a refresh after it", async () => {
  const clock = new ManualClock();
  const fetches: PromiseWithResolvers<boolean>[] = [];
  const pacer = new RefreshPacer({
    clock,
    refresh: () => {
      fetches.push(Promise.withResolvers<boolean>());
      return fetches.at(-1)!.promise;
    },
  });
  pacer.request();
  pacer.request(); // while the first fetch is in flight: its answer may predate this change
  fetches[0]!.resolve(true);
  for (let i = 0; i < 5; i++) await Promise.resolve();
  clock.advance(1_000);
  for (let i = 0; i < 5; i++) await Promise.resolve();
  assert.equal(fetches.length, 2);
  pacer.close();
});

Deno.test("the pause doubles up to 30 s while every refresh finds the lists changed again", async () => {
  const p = paced();
  const pauses: number[] = [];
  p.pacer.request();
  await p.settle();
  for (let i = 0; i < 8; i++) {
    pauses.push(p.pacer.pauseMs);
    p.pacer.request();
    await p.advance(p.pacer.pauseMs);
  }
  assert.deepEqual(pauses, [1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
  assert.equal(p.runs(), 9);
  p.pacer.close();
});

Deno.test("the pause is back to 1 s once a pause passes with no list_changed", async () => {
  const p = paced();
  p.pacer.request();
  await p.settle();
  for (let i = 0; i < 3; i++) {
    p.pacer.request();
    await p.advance(p.pacer.pauseMs);
  }
  assert.equal(p.pacer.pauseMs, 8_000);
  await p.advance(8_000); // calm: nothing asked during the pause
  assert.equal(p.pacer.pauseMs, 1_000);
  p.pacer.request();
  await p.settle();
  assert.equal(p.runs(), 5, "a calm upstream's list_changed refreshes at once");
  assert.equal(p.pacer.pauseMs, 1_000);
  p.pacer.close();
});

Deno.test("the pause does not grow while refreshes find nothing changed", async () => {
  const p = paced(() => false);
  p.pacer.request();
  await p.settle();
  for (let i = 0; i < 4; i++) {
    p.pacer.request();
    await p.advance(1_000);
  }
  assert.equal(p.runs(), 5);
  assert.equal(p.pacer.pauseMs, 1_000);
  p.pacer.close();
});

Deno.test("a closed pacer refreshes no more and leaves no timer behind", async () => {
  const p = paced();
  p.pacer.request();
  await p.settle();
  p.pacer.request();
  p.pacer.close();
  assert.equal(p.clock.pendingTimers, 0);
  await p.advance(60_000);
  p.pacer.request();
  await p.settle();
  assert.equal(p.runs(), 1);
});
