/**
 * The injected clock: all time in core and plugins comes from here, so tests never sleep. Timeouts
 * are {@link deadline}s on it, waits are {@link settlesWithin} or {@link pause}, repeats are
 * {@link every}; only {@link systemClock} touches the runtime's timers (tests/architecture_test.ts).
 * @module
 */
import { TimeoutQueue, type TimerBase } from "./timeout_queue.ts";

/** A cancel handle returned by {@link Clock.setTimeout}. */
export type TimerHandle = { cancel(): void };

/** Time and timers, injectable. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` after `ms` milliseconds unless cancelled. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
}

/** The runtime's own timer, on its monotonic time. */
const runtimeTimer: TimerBase = {
  now: () => performance.now(),
  setTimeout(fn, ms) {
    const id = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(id) };
  },
};

/**
 * Every timer of the real clock, on one runtime timer at a time: a relayed call sets and clears
 * several (its timeouts, a body's deadline), and a runtime timer each cost ~4 µs of the call.
 */
const systemTimers = new TimeoutQueue(runtimeTimer);

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => systemTimers.add(fn, ms),
};

/** A time limit on a clock, from {@link deadline}. */
export interface Deadline {
  /** Resolves once the time is up; never, if cancelled first. */
  readonly expired: Promise<void>;
  /** Aborts once the time is up, with the deadline's reason (by default a `TimeoutError`). */
  readonly signal: AbortSignal;
  /** Whether the time is up. */
  readonly passed: boolean;
  /** Stops the timer (safe to repeat): call it once the limited work is over. */
  cancel(): void;
}

/**
 * A time limit `ms` from now on `clock`: the one way core and plugins time out. Its signal aborts
 * with `reason`, by default a `TimeoutError` DOMException as `AbortSignal.timeout`'s does.
 */
export function deadline(clock: Clock, ms: number, reason?: unknown): Deadline {
  let expire!: () => void;
  const expired = new Promise<void>((resolve) => expire = resolve);
  let controller: AbortController | undefined;
  let passed = false;
  const timer = clock.setTimeout(() => {
    passed = true;
    controller?.abort(reason ?? timeoutReason(ms));
    expire();
  }, ms);
  return {
    expired,
    get signal() {
      // Made on first use: most deadlines are only raced, and a controller is not free.
      if (!controller) {
        controller = new AbortController();
        if (passed) controller.abort(reason ?? timeoutReason(ms));
      }
      return controller.signal;
    },
    get passed() {
      return passed;
    },
    cancel: () => timer.cancel(),
  };
}

const timeoutReason = (ms: number) => new DOMException(`timed out after ${ms} ms`, "TimeoutError");

/**
 * Waits for `work` to settle, at most `ms` on `clock`: true when it settled (fulfilled or
 * rejected) in time, false when the time ran out first (the work is left running).
 */
export async function settlesWithin(
  clock: Clock,
  ms: number,
  work: Promise<unknown>,
): Promise<boolean> {
  const limit = deadline(clock, ms);
  try {
    return await Promise.race([work.then(() => true, () => true), limit.expired.then(() => false)]);
  } finally {
    limit.cancel();
  }
}

/** Waits `ms` on `clock`, or less once `signal` aborts (it never rejects). */
export function pause(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      timer.cancel();
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = clock.setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}

/** Runs `fn` every `ms` on `clock` (first after `ms`) until the handle is cancelled. */
export function every(clock: Clock, ms: number, fn: () => void): TimerHandle {
  let timer = clock.setTimeout(tick, ms);
  function tick() {
    // Armed again before fn runs, so a cancel from inside fn stops the repeat.
    timer = clock.setTimeout(tick, ms);
    fn();
  }
  return { cancel: () => timer.cancel() };
}

/** A clock that moves only when told to: for tests. */
export class ManualClock implements Clock {
  #now: number;
  #timers: { at: number; fn: () => void; id: number }[] = [];
  #nextId = 0;

  constructor(start = 0) {
    this.#now = start;
  }

  now(): number {
    return this.#now;
  }

  setTimeout(fn: () => void, ms: number): TimerHandle {
    const id = this.#nextId++;
    // Like the real setTimeout, a negative delay means "now": time never runs backwards.
    this.#timers.push({ at: this.#now + Math.max(0, ms), fn, id });
    return { cancel: () => void (this.#timers = this.#timers.filter((t) => t.id !== id)) };
  }

  /** Timers set and neither fired nor cancelled: a test's check that nothing is left behind. */
  get pendingTimers(): number {
    return this.#timers.length;
  }

  /** Moves time forward, firing due timers in order. */
  advance(ms: number): void {
    const target = this.#now + ms;
    for (;;) {
      const due = this.#timers.filter((t) => t.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.#timers = this.#timers.filter((t) => t.id !== due.id);
      this.#now = due.at;
      due.fn();
    }
    this.#now = target;
  }
}
