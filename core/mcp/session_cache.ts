/**
 * SessionCache: a replica's copies of shared sessions, least recently used first, bounded by
 * count. A copy can always be rebuilt from its record, so making room drops the least recently
 * used one — unless it is pinned (a client listens on its GET stream, a request is in flight,
 * its upstream holds a subscription), which is never dropped to make room.
 * @module
 */

/** Copies by session id, in least-recently-used order. */
export class SessionCache<V> {
  #entries = new Map<string, V>();
  #pinned: (value: V) => boolean;
  #max: number;

  /** `max`: copies held at most (pinned ones may exceed it); `pinned`: never dropped for room. */
  constructor(max: number, pinned: (value: V) => boolean) {
    this.#max = max;
    this.#pinned = pinned;
  }

  /** The copy, now the most recently used. */
  get(id: string): V | undefined {
    const value = this.#entries.get(id);
    if (value !== undefined) {
      this.#entries.delete(id);
      this.#entries.set(id, value);
    }
    return value;
  }

  /** The copy, without counting as a use. */
  peek(id: string): V | undefined {
    return this.#entries.get(id);
  }

  /**
   * Adds (or replaces) a copy as the most recently used; returns the copies dropped to stay
   * within the bound, for the caller to close.
   */
  set(id: string, value: V): [string, V][] {
    this.#entries.delete(id);
    this.#entries.set(id, value);
    const dropped: [string, V][] = [];
    while (this.#entries.size > this.#max) {
      const old = this.evictOne((candidate) => candidate !== value);
      if (!old) break;
      dropped.push(old);
    }
    return dropped;
  }

  /** Removes a copy; whether it was there. */
  delete(id: string): boolean {
    return this.#entries.delete(id);
  }

  /**
   * The least recently used copy that is not pinned (and passes `filter`), removed from the
   * cache for the caller to close; undefined when every copy is pinned.
   */
  evictOne(filter: (value: V) => boolean = () => true): [string, V] | undefined {
    for (const [id, value] of this.#entries) {
      if (this.#pinned(value) || !filter(value)) continue;
      this.#entries.delete(id);
      return [id, value];
    }
    return undefined;
  }

  /** Copies held. */
  get size(): number {
    return this.#entries.size;
  }

  /** Every copy, least recently used first. */
  entries(): IterableIterator<[string, V]> {
    return this.#entries.entries();
  }

  /** Drops every copy. */
  clear(): void {
    this.#entries.clear();
  }
}
