import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import {
  creditCost,
  CreditReturn,
  RELAY_CREDIT_BATCH,
  RELAY_MESSAGE_BURST,
  RELAY_WINDOW,
  RelayCredit,
} from "./relay_credit.ts";

Deno.test("A relay's readers wait with a full window outstanding and read on once credit comes back", async () => {
  const credit = new RelayCredit();
  const big = "x".repeat(RELAY_WINDOW);
  assert.equal(credit.whenOpen(), undefined);
  credit.spend(big);
  const wait = credit.whenOpen();
  assert.ok(wait, "a full window holds the readers");
  credit.refund(creditCost(big));
  await wait;
  assert.equal(credit.whenOpen(), undefined);
});

Deno.test("The kernel returns credit from a later task, and past the burst no faster than the rate", () => {
  const clock = new ManualClock();
  const returned: number[] = [];
  const back = new CreditReturn(clock, (cost) => returned.push(cost));
  // A batch of many small frames, as a flood of log lines posts them.
  const frames = Array.from({ length: 1000 }, () => "{}").join("\n");
  const batch = () => {
    for (let cost = 0; cost < RELAY_CREDIT_BATCH; cost += creditCost(frames)) back.taken(frames);
  };
  batch();
  assert.deepEqual(returned, [], "never within the task that took the messages");
  clock.advance(0);
  assert.equal(returned.length, 1);
  // Batches at no time apart: the burst is spent, then a return waits for the rate.
  let batches = 1;
  while (returned.length === batches) {
    batch();
    batches++;
    clock.advance(0);
    assert.ok(batches < 100, "the rate never held a return");
  }
  assert.ok(batches > RELAY_MESSAGE_BURST / 5000, `held after only ${batches} batches`);
  clock.advance(1000);
  assert.equal(returned.length, batches, "the held return comes once the rate allows");
  back.close();
});

Deno.test("A message a relay holds as an object costs the size it carries, so large ones fill the window", () => {
  const message = { type: "message" as const, message: {}, size: RELAY_WINDOW };
  assert.equal(creditCost(message), creditCost("x".repeat(RELAY_WINDOW)));
  const credit = new RelayCredit();
  credit.spend(message);
  assert.ok(credit.whenOpen(), "one message of a window's size holds the readers");
});
