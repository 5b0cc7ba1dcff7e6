/**
 * Many timeouts on one timer. A request's timeout almost never fires: it is set when the request
 * leaves and cancelled when its answer comes, often thousands of times a second, and Deno's
 * timers are Node `Timeout` objects (~4 µs and ~900 bytes a set and clear). The queue keeps the
 * deadlines itself and arms one timer of its base for the earliest; a cancel only forgets its
 * entry, and the base timer goes once nothing is left. The system clock's timers all run on one.
 *
 * Deadlines are kept in one first-in-first-out set per duration: deadlines of equal duration
 * come in the order they were set (time never runs backwards on the base), so each set's first
 * entry is its earliest and adding, cancelling and firing never sort or scan the rest.
 * @module
 */

/** What the queue runs on: a time in ms that never runs backwards, and a timer. */
export interface TimerBase {
  now(): number;
  setTimeout: (fn: () => void, ms: number) => { cancel(): void };
}

interface Entry {
  at: number;
  fn: () => void;
  bucket: Set<Entry>;
  ms: number;
}

/** Timeouts sharing one timer of their base: armed for the earliest, none when empty. */
export class TimeoutQueue {
  readonly #base: TimerBase;
  readonly #buckets = new Map<number, Set<Entry>>();
  #size = 0;
  #timer: { cancel(): void } | undefined;
  #armedAt = Infinity;

  constructor(base: TimerBase) {
    this.#base = base;
  }

  /** Runs `fn` once `ms` have passed, unless cancelled first. */
  add(fn: () => void, ms: number): { cancel(): void } {
    // As setTimeout: a negative or non-number delay means "as soon as possible".
    const delay = ms > 0 ? ms : 0;
    let bucket = this.#buckets.get(delay);
    if (bucket === undefined) this.#buckets.set(delay, bucket = new Set());
    const entry: Entry = { at: this.#base.now() + delay, fn, bucket, ms: delay };
    bucket.add(entry);
    this.#size++;
    if (entry.at < this.#armedAt) this.#arm(entry.at);
    return { cancel: () => this.#remove(entry) };
  }

  /** Timeouts added and neither fired nor cancelled. */
  get size(): number {
    return this.#size;
  }

  #remove(entry: Entry): void {
    if (!entry.bucket.delete(entry)) return;
    if (entry.bucket.size === 0) this.#buckets.delete(entry.ms);
    if (--this.#size > 0) return;
    // Nothing left to wait for: no timer may outlive the work it bounds.
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#armedAt = Infinity;
  }

  #arm(at: number): void {
    this.#timer?.cancel();
    this.#armedAt = at;
    // Whole milliseconds, rounded up: a runtime timer cut to fewer would fire before the deadline,
    // find nothing due and be armed again.
    this.#timer = this.#base.setTimeout(() => this.#fire(), Math.ceil(at - this.#base.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    this.#armedAt = Infinity;
    const now = this.#base.now();
    const due: Entry[] = [];
    let next = Infinity;
    for (const [ms, bucket] of this.#buckets) {
      for (const entry of bucket) {
        if (entry.at > now) {
          if (entry.at < next) next = entry.at;
          break;
        }
        bucket.delete(entry);
        due.push(entry);
      }
      if (bucket.size === 0) this.#buckets.delete(ms);
    }
    this.#size -= due.length;
    if (next !== Infinity) this.#arm(next);
    if (due.length > 1) due.sort((a, b) => a.at - b.at);
    for (const entry of due) {
      try {
        entry.fn();
      } catch (error) {
        // As a throwing timer callback would: reported as uncaught, the other timeouts still run.
        queueMicrotask(() => {
          throw error;
        });
      }
    }
  }
}
