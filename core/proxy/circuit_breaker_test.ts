import assert from "node:assert/strict";
import { ManualClock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import {
  type BreakerState,
  type BreakerTransitionInfo,
  CircuitBreaker,
  type CircuitBreakerOptions,
} from "./circuit_breaker.ts";

const SECOND = 1000;

function breaker(options: Partial<CircuitBreakerOptions> = {}) {
  const clock = new ManualClock(1_000_000);
  const b = new CircuitBreaker({ server: "github", clock, ...options });
  return { clock, b };
}

function failTimes(b: CircuitBreaker, n: number): void {
  for (let i = 0; i < n; i++) b.recordFailure();
}

const ok = () => Promise.resolve("ok");
const boom = () => Promise.reject(new Error("upstream down"));

/** Asserts a promise rejects with `circuit_open`; returns the error. */
async function rejectsOpen(promise: Promise<unknown>): Promise<GatewayError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof GatewayError);
    assert.equal(error.code, "circuit_open");
    return error;
  }
  assert.fail("expected circuit_open");
}

type Setup = "CLOSED" | "CLOSED, 4 failures" | "OPEN" | "HALF_OPEN" | "HALF_OPEN, probe out";
type Event =
  | "success"
  | "failure"
  | "acquire"
  | "wait 29.999 s"
  | "wait 30 s"
  | "reset"
  | "probe succeeds"
  | "probe fails"
  | "probe abandoned";

/** Puts a fresh breaker (threshold 5, base 30 s) into `setup`; returns the probe permit if one is out. */
function arrange(setup: Setup) {
  const { clock, b } = breaker();
  let probe: ReturnType<CircuitBreaker["tryAcquire"]> | undefined;
  if (setup === "CLOSED, 4 failures") failTimes(b, 4);
  if (setup === "OPEN" || setup.startsWith("HALF_OPEN")) failTimes(b, 5);
  if (setup.startsWith("HALF_OPEN")) clock.advance(30 * SECOND);
  if (setup === "HALF_OPEN, probe out") probe = b.tryAcquire();
  return { clock, b, probe };
}

Deno.test("CircuitBreaker follows the transition table", () => {
  const table: [Setup, Event, BreakerState, { granted?: boolean; trips?: number }?][] = [
    ["CLOSED", "success", "CLOSED", { trips: 0 }],
    ["CLOSED", "failure", "CLOSED"],
    ["CLOSED", "acquire", "CLOSED", { granted: true }],
    ["CLOSED", "reset", "CLOSED"],
    ["CLOSED, 4 failures", "failure", "OPEN", { trips: 1 }],
    ["CLOSED, 4 failures", "success", "CLOSED"],
    ["OPEN", "acquire", "OPEN", { granted: false }],
    ["OPEN", "wait 29.999 s", "OPEN"],
    ["OPEN", "wait 30 s", "HALF_OPEN"],
    ["OPEN", "failure", "OPEN", { trips: 1 }],
    ["OPEN", "success", "HALF_OPEN", { trips: 1 }],
    ["OPEN", "reset", "CLOSED", { trips: 0 }],
    ["HALF_OPEN", "acquire", "HALF_OPEN", { granted: true }],
    ["HALF_OPEN", "success", "CLOSED", { trips: 0 }],
    ["HALF_OPEN", "failure", "OPEN", { trips: 2 }],
    ["HALF_OPEN", "reset", "CLOSED", { trips: 0 }],
    ["HALF_OPEN, probe out", "acquire", "HALF_OPEN", { granted: false }],
    ["HALF_OPEN, probe out", "probe succeeds", "CLOSED", { trips: 0 }],
    ["HALF_OPEN, probe out", "probe fails", "OPEN", { trips: 2 }],
    ["HALF_OPEN, probe out", "probe abandoned", "HALF_OPEN", { trips: 1 }],
  ];
  for (const [setup, event, expected, check = {}] of table) {
    const label = `${setup} --${event}--> ${expected}`;
    const { clock, b, probe } = arrange(setup);
    let granted: boolean | undefined;
    switch (event) {
      case "success":
        b.recordSuccess();
        break;
      case "failure":
        b.recordFailure();
        break;
      case "acquire":
        granted = b.tryAcquire().ok;
        break;
      case "wait 29.999 s":
        clock.advance(30 * SECOND - 1);
        break;
      case "wait 30 s":
        clock.advance(30 * SECOND);
        break;
      case "reset":
        b.reset();
        break;
      case "probe succeeds":
      case "probe fails":
      case "probe abandoned":
        assert.ok(probe?.ok, label);
        assert.equal(probe.probe, true, label);
        if (event === "probe abandoned") probe.abandon();
        else probe.release(event === "probe succeeds");
        break;
    }
    assert.equal(b.state, expected, label);
    if (check.granted !== undefined) assert.equal(granted, check.granted, label);
    if (check.trips !== undefined) assert.equal(b.trips, check.trips, label);
  }
});

Deno.test("CircuitBreaker opens at the threshold of consecutive failures, not before", () => {
  const { b } = breaker({ failureThreshold: 3 });
  failTimes(b, 2);
  assert.equal(b.state, "CLOSED");
  assert.equal(b.consecutiveFailures, 2);
  b.recordFailure();
  assert.equal(b.state, "OPEN");
});

Deno.test("CircuitBreaker resets the failure count on a success", async () => {
  const { b } = breaker();
  for (let i = 0; i < 4; i++) await assert.rejects(b.execute(boom));
  assert.equal(b.consecutiveFailures, 4);
  assert.equal(await b.execute(ok), "ok");
  assert.equal(b.consecutiveFailures, 0);
  for (let i = 0; i < 4; i++) await assert.rejects(b.execute(boom));
  assert.equal(b.state, "CLOSED");
});

Deno.test("CircuitBreaker rejects with circuit_open while OPEN without calling fn", async () => {
  const { clock, b } = breaker();
  for (let i = 0; i < 5; i++) await assert.rejects(b.execute(boom), { message: "upstream down" });
  let calls = 0;
  const error = await rejectsOpen(b.execute(() => {
    calls++;
    return ok();
  }));
  assert.equal(calls, 0);
  assert.equal(
    error.message,
    'Upstream "github" is unavailable (circuit open after 5 consecutive failures); retry in 30s',
  );
  assert.deepEqual(error.data, { server: "github", retryAfterMs: 30 * SECOND });

  clock.advance(10 * SECOND + 500);
  const later = await rejectsOpen(b.execute(ok));
  assert.deepEqual(later.data, { server: "github", retryAfterMs: 19_500 });
  assert.match(later.message, /retry in 20s$/);
});

Deno.test("CircuitBreaker names a failed probe as the cause when it reopens", async () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  await assert.rejects(b.execute(boom), { message: "upstream down" });
  const error = await rejectsOpen(b.execute(ok));
  assert.equal(
    error.message,
    'Upstream "github" is unavailable (circuit open again after a failed recovery probe); retry in 1m',
  );
});

Deno.test("CircuitBreaker reports HALF_OPEN from state once the window has passed", () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  assert.equal(b.retryAfterMs(), 30 * SECOND);
  clock.advance(30 * SECOND - 1);
  assert.equal(b.state, "OPEN");
  assert.equal(b.retryAfterMs(), 1);
  clock.advance(1);
  assert.equal(b.state, "HALF_OPEN");
  assert.equal(b.retryAfterMs(), 0);
});

Deno.test("CircuitBreaker backs off 30, 60, 120, 240, 480, 600, 600 s on repeated failed probes", async () => {
  const { clock, b } = breaker();
  const windows: number[] = [];
  failTimes(b, 5);
  for (let trip = 1; trip <= 7; trip++) {
    assert.equal(b.trips, trip);
    const windowMs = b.retryAfterMs();
    windows.push(windowMs / SECOND);
    clock.advance(windowMs);
    await assert.rejects(b.execute(boom), { message: "upstream down" });
  }
  assert.deepEqual(windows, [30, 60, 120, 240, 480, 600, 600]);
});

Deno.test("CircuitBreaker uses custom threshold, base and max", () => {
  const { b } = breaker({ failureThreshold: 1, baseMs: 1000, maxMs: 2500 });
  const windows: number[] = [];
  b.recordFailure();
  for (let i = 0; i < 3; i++) {
    windows.push(b.retryAfterMs());
    b.recordSuccess(); // OPEN → HALF_OPEN
    b.recordFailure(); // HALF_OPEN → OPEN
  }
  assert.deepEqual(windows, [1000, 2000, 2500]);
});

Deno.test("CircuitBreaker lets exactly one probe through while HALF_OPEN", async () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  const { promise, resolve } = Promise.withResolvers<string>();
  let calls = 0;
  const first = b.execute(() => {
    calls++;
    return promise;
  });
  const second = b.execute(() => {
    calls++;
    return ok();
  });
  const error = await rejectsOpen(second);
  assert.equal(calls, 1);
  assert.equal(
    error.message,
    'Upstream "github" is unavailable (circuit half-open, a recovery probe is in flight); retry shortly',
  );
  assert.deepEqual(error.data, { server: "github", retryAfterMs: 0 });
  assert.equal(b.state, "HALF_OPEN");

  resolve("probed");
  assert.equal(await first, "probed");
  assert.equal(b.state, "CLOSED");
  assert.equal(b.trips, 0);
  assert.equal(await b.execute(ok), "ok");
});

Deno.test("CircuitBreaker reopens with the next backoff when the probe fails", async () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  await assert.rejects(b.execute(boom), { message: "upstream down" });
  assert.equal(b.state, "OPEN");
  assert.equal(b.trips, 2);
  assert.equal(b.retryAfterMs(), 60 * SECOND);
});

Deno.test("CircuitBreaker does not extend the window on failures recorded while OPEN", () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(20 * SECOND);
  failTimes(b, 3);
  assert.equal(b.retryAfterMs(), 10 * SECOND);
  assert.equal(b.trips, 1);
  assert.equal(b.consecutiveFailures, 8);
  clock.advance(10 * SECOND);
  assert.equal(b.state, "HALF_OPEN");
});

Deno.test("CircuitBreaker does not count errors that isFailure excludes", async () => {
  const notUpstream = new Error("caller cancelled");
  const { b } = breaker({ failureThreshold: 1, isFailure: (e) => e !== notUpstream });
  await assert.rejects(b.execute(() => Promise.reject(notUpstream)), notUpstream);
  assert.equal(b.state, "CLOSED");
  assert.equal(b.consecutiveFailures, 0);
});

Deno.test("CircuitBreaker frees the probe slot when isFailure excludes the probe's error", async () => {
  const notUpstream = new Error("caller cancelled");
  const { clock, b } = breaker({ isFailure: (e) => e !== notUpstream });
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  await assert.rejects(b.execute(() => Promise.reject(notUpstream)), notUpstream);
  assert.equal(b.state, "HALF_OPEN");
  assert.equal(await b.execute(ok), "ok");
  assert.equal(b.state, "CLOSED");
});

Deno.test("CircuitBreaker counts the error when isFailure itself throws", async () => {
  const { b } = breaker({
    failureThreshold: 1,
    isFailure: () => {
      throw new Error("classifier bug");
    },
  });
  await assert.rejects(b.execute(boom), { message: "upstream down" });
  assert.equal(b.state, "OPEN");
});

Deno.test("CircuitBreaker counts a synchronous throw from fn as a failure", async () => {
  const { b } = breaker({ failureThreshold: 1 });
  await assert.rejects(
    b.execute(() => {
      throw new Error("sync");
    }),
    { message: "sync" },
  );
  assert.equal(b.state, "OPEN");
});

Deno.test("CircuitBreaker ignores a permit settled twice", () => {
  const { b } = breaker({ failureThreshold: 2 });
  const permit = b.tryAcquire();
  assert.ok(permit.ok);
  assert.equal(permit.probe, false);
  permit.release(false);
  permit.release(false);
  assert.equal(b.consecutiveFailures, 1);
  assert.equal(b.state, "CLOSED");
});

Deno.test("CircuitBreaker ignores a stale probe's slot after a reset", () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  const stale = b.tryAcquire();
  assert.ok(stale.ok);
  b.reset();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  const probe = b.tryAcquire();
  assert.ok(probe.ok && probe.probe);
  stale.abandon();
  assert.equal(b.tryAcquire().ok, false, "the new probe is still out");
});

Deno.test("CircuitBreaker reset() closes the circuit and clears trips and failures", () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  b.recordFailure();
  assert.equal(b.trips, 2);
  b.reset();
  assert.deepEqual(b.snapshot(), {
    state: "CLOSED",
    trips: 0,
    consecutiveFailures: 0,
    retryAfterMs: 0,
  });
  assert.equal(b.tryAcquire().ok, true);
});

Deno.test("CircuitBreaker snapshot() reports openedAt and the remaining window", () => {
  const { clock, b } = breaker();
  failTimes(b, 5);
  clock.advance(5 * SECOND);
  assert.deepEqual(b.snapshot(), {
    state: "OPEN",
    trips: 1,
    consecutiveFailures: 5,
    retryAfterMs: 25 * SECOND,
    openedAt: 1_000_000,
  });
});

Deno.test("CircuitBreaker calls onStateChange with from, to, trips and the window", () => {
  const seen: [BreakerState, BreakerState, BreakerTransitionInfo][] = [];
  const { clock, b } = breaker({ onStateChange: (from, to, info) => seen.push([from, to, info]) });
  failTimes(b, 5);
  clock.advance(30 * SECOND);
  assert.equal(b.state, "HALF_OPEN");
  b.recordFailure();
  clock.advance(60 * SECOND);
  b.recordSuccess();
  b.recordSuccess();
  b.reset(); // already CLOSED: no transition, no call
  assert.deepEqual(seen, [
    ["CLOSED", "OPEN", { trips: 1, retryAfterMs: 30 * SECOND }],
    ["OPEN", "HALF_OPEN", { trips: 1 }],
    ["HALF_OPEN", "OPEN", { trips: 2, retryAfterMs: 60 * SECOND }],
    ["OPEN", "HALF_OPEN", { trips: 2 }],
    ["HALF_OPEN", "CLOSED", { trips: 0 }],
  ]);
});

Deno.test("CircuitBreaker keeps working when onStateChange throws", async () => {
  let calls = 0;
  const { clock, b } = breaker({
    failureThreshold: 1,
    onStateChange: () => {
      calls++;
      throw new Error("observer bug");
    },
  });
  await assert.rejects(b.execute(boom), { message: "upstream down" });
  assert.equal(b.state, "OPEN");
  await rejectsOpen(b.execute(ok));
  clock.advance(30 * SECOND);
  assert.equal(await b.execute(ok), "ok");
  assert.equal(b.state, "CLOSED");
  assert.equal(calls, 3);
});

Deno.test("CircuitBreaker stays consistent when onStateChange re-enters it", () => {
  const seen: BreakerState[] = [];
  const clock = new ManualClock();
  const b: CircuitBreaker = new CircuitBreaker({
    server: "github",
    clock,
    failureThreshold: 1,
    onStateChange: (_from, to) => {
      seen.push(to);
      if (to === "OPEN") seen.push(b.state); // reads during the callback see the new state
    },
  });
  b.recordFailure();
  assert.deepEqual(seen, ["OPEN", "OPEN"]);
});

Deno.test("CircuitBreaker rejects invalid options with RangeError", () => {
  const clock = new ManualClock();
  const cases: [Partial<CircuitBreakerOptions>, RegExp][] = [
    [{ failureThreshold: 0 }, /failureThreshold must be an integer of at least 1, received 0/],
    [{ failureThreshold: 1.5 }, /failureThreshold must be an integer of at least 1, received 1.5/],
    [{ baseMs: 0 }, /baseMs must be a finite number greater than 0, received 0/],
    [{ baseMs: -1 }, /baseMs must be a finite number greater than 0, received -1/],
    [{ baseMs: NaN }, /baseMs must be a finite number greater than 0, received NaN/],
    [{ baseMs: 1000, maxMs: 999 }, /maxMs must be a finite number of at least baseMs \(1000\)/],
  ];
  for (const [options, message] of cases) {
    assert.throws(
      () => new CircuitBreaker({ server: "s", clock, ...options }),
      (error: unknown) => {
        assert.ok(error instanceof RangeError, String(message));
        assert.match(error.message, message);
        return true;
      },
    );
  }
  new CircuitBreaker({ server: "s", clock, failureThreshold: 1, baseMs: 1, maxMs: 1 });
});
