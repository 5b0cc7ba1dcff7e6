/**
 * Who (which tenant) had calls on an upstream lately. An upstream's stdio (or SSE) traffic does not say which
 * call it belongs to, and a tool may answer and keep working, or be timed out or cancelled and
 * carry on: its later logs and sampling requests still belong to the caller that started it. Were
 * only the calls in flight counted, such traffic would go to whichever other caller has one.
 * @module
 */
import type { Clock } from "../support/clock.ts";

/** Owners remembered at most; past it every owner counts as another (closed, not open). */
const MAX_OWNERS = 1_024;

/** The owners of calls that ended within their grace, by when it ends. */
export class RecentOwners {
  readonly #until = new Map<unknown, number>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Remembers that a call of `owner` ended: its traffic may come for `graceMs` more. */
  ended(owner: unknown, graceMs: number): void {
    const until = this.#clock.now() + graceMs;
    if ((this.#until.get(owner) ?? -Infinity) < until) this.#until.set(owner, until);
    if (this.#until.size > MAX_OWNERS) this.#forgetPast();
  }

  /** How many owners other than `owner` are still within their grace. */
  othersThan(owner: unknown): number {
    this.#forgetPast();
    if (this.#until.size > MAX_OWNERS) return this.#until.size;
    return this.#until.size - (this.#until.has(owner) ? 1 : 0);
  }

  #forgetPast(): void {
    const now = this.#clock.now();
    for (const [owner, until] of this.#until) if (until <= now) this.#until.delete(owner);
  }
}
