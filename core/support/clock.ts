/**
 * The injected clock: all time in core comes from here, so tests never sleep.
 * @module
 */

/** A cancel handle returned by {@link Clock.setTimeout}. */
export type TimerHandle = { cancel(): void };

/** Time and timers, injectable. */
export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** Runs `fn` after `ms` milliseconds unless cancelled. */
  setTimeout(fn: () => void, ms: number): TimerHandle;
}

/** The real clock. */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    const id = setTimeout(fn, ms);
    return { cancel: () => clearTimeout(id) };
  },
};

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
