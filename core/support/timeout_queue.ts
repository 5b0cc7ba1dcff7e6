/**
 * Many timeouts on one timer. A request's timeout almost never fires: it is set when the request
 * leaves and cancelled when its answer comes, often thousands of times a second. A runtime timer
 * for each (Deno's are Node `Timeout` objects: ~4 µs and ~900 bytes a pair) cost more than
 * anything else on the relay path, so a queue keeps the deadlines and arms one timer on its clock
 * for the earliest; a cancel only forgets its entry. Deadlines come from the clock's `now()`.
 * @module
 */
import type { Clock, TimerHandle } from "./clock.ts";

interface Entry {
  at: number;
  fn: () => void;
}

/** Timeouts on `clock` sharing one of its timers: armed for the earliest, none when empty. */
export class TimeoutQueue {
  readonly #clock: Clock;
  readonly #entries = new Set<Entry>();
  #timer: TimerHandle | undefined;
  #armedAt = Infinity;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Runs `fn` once `ms` have passed on the clock, unless cancelled first. */
  add(fn: () => void, ms: number): TimerHandle {
    const entry: Entry = { at: this.#clock.now() + Math.max(0, ms), fn };
    this.#entries.add(entry);
    if (entry.at < this.#armedAt) this.#arm(entry.at);
    return { cancel: () => this.#remove(entry) };
  }

  /** Timeouts added and neither fired nor cancelled. */
  get size(): number {
    return this.#entries.size;
  }

  #remove(entry: Entry): void {
    if (!this.#entries.delete(entry) || this.#entries.size > 0) return;
    // Nothing left to wait for: no timer may outlive the work it bounds.
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#armedAt = Infinity;
  }

  #arm(at: number): void {
    this.#timer?.cancel();
    this.#armedAt = at;
    this.#timer = this.#clock.setTimeout(() => this.#fire(), at - this.#clock.now());
  }

  #fire(): void {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = this.#clock.now();
    const due: Entry[] = [];
    let next = Infinity;
    for (const entry of this.#entries) {
      if (entry.at <= now) due.push(entry);
      else if (entry.at < next) next = entry.at;
    }
    for (const entry of due) this.#entries.delete(entry);
    if (next !== Infinity) this.#arm(next);
    due.sort((a, b) => a.at - b.at);
    for (const entry of due) entry.fn();
  }
}
