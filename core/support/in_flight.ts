/**
 * A count of work in flight, and its next idle moment as one promise every waiter shares: what
 * a stop waits on (the session gate's tool calls, the HTTP listener's requests). Waiters that
 * give up (a drain polls in slices) leave nothing registered behind.
 * @module
 */

/** Work begun and not yet ended, with a promise of the moment none is left. */
export class InFlight {
  #count = 0;
  #idle: PromiseWithResolvers<void> | undefined;

  /** How much is in flight now. */
  get count(): number {
    return this.#count;
  }

  /** One more begins. */
  enter(): void {
    this.#count++;
  }

  /** One ends; the last one wakes every waiter. */
  leave(): void {
    if (--this.#count > 0) return;
    this.#idle?.resolve();
    this.#idle = undefined;
  }

  /** Resolves once nothing is in flight (at once when nothing is). */
  idle(): Promise<void> {
    if (this.#count === 0) return Promise.resolve();
    this.#idle ??= Promise.withResolvers<void>();
    return this.#idle.promise;
  }
}
