import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { silentLogger } from "../support/logger.ts";
import { retryStart, START_ATTEMPTS, START_BUDGET_MS } from "./start_retry.ts";

/** Advances the clock until `promise` settles (each retry waits on it). */
async function driven<T>(clock: ManualClock, promise: Promise<T>): Promise<T> {
  let settled = false;
  promise.then(() => settled = true, () => settled = true);
  for (let i = 0; i < 100 && !settled; i++) {
    await Promise.resolve();
    clock.advance(500);
  }
  return await promise;
}

Deno.test("a start step that fails while the shared state times out is tried again on the clock", async () => {
  const clock = new ManualClock();
  let tries = 0;
  const value = await driven(
    clock,
    retryStart("fleet", () => {
      tries++;
      return tries < 3 ? Promise.reject(new Error("TIMEOUT")) : Promise.resolve("read");
    }, { clock, logger: silentLogger }),
  );
  assert.equal(value, "read");
  assert.equal(tries, 3);
});

Deno.test("an invalid document is not read again, and an outage gives up after the last attempt", async () => {
  const clock = new ManualClock();
  let tries = 0;
  await assert.rejects(
    () =>
      retryStart("fleet", () => {
        tries++;
        return Promise.reject(new GatewayError("config_invalid", "bad fleet"));
      }, { clock, logger: silentLogger }),
    /bad fleet/,
  );
  assert.equal(tries, 1);
  tries = 0;
  await assert.rejects(
    () =>
      driven(
        clock,
        retryStart("fleet", () => {
          tries++;
          return Promise.reject(new Error("TIMEOUT"));
        }, { clock, logger: silentLogger }),
      ),
    /TIMEOUT/,
  );
  assert.equal(tries, START_ATTEMPTS);
});

Deno.test("a GatewayError saying the shared state is unreachable (internal) is tried again", async () => {
  const clock = new ManualClock();
  let tries = 0;
  const value = await driven(
    clock,
    retryStart("governance state", () => {
      tries++;
      return tries < 2
        ? Promise.reject(new GatewayError("internal", 'bucket "agent33_approvals": TIMEOUT'))
        : Promise.resolve("open");
    }, { clock, logger: silentLogger }),
  );
  assert.equal(value, "open");
  assert.equal(tries, 2);
});

Deno.test("a start step whose own tries took the whole start budget is not tried again", async () => {
  const clock = new ManualClock();
  let tries = 0;
  await assert.rejects(
    () =>
      driven(
        clock,
        retryStart("fleet", () => {
          tries++;
          // A bucket open that kept trying for as long as a forming cluster may take.
          clock.advance(START_BUDGET_MS);
          return Promise.reject(new Error("TIMEOUT"));
        }, { clock, logger: silentLogger }),
      ),
    /TIMEOUT/,
  );
  assert.equal(tries, 1);
});
