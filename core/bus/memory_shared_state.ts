/**
 * MemorySharedState: {@link SharedState} inside one process, with the same semantics as the
 * JetStream-backed one (revisions, compare-and-set, TTL after the last write, watches that start
 * with the current values). Two gateways given one instance behave as two replicas, which is how
 * unit tests exercise cluster code without NATS.
 * @module
 */
import { type Clock, systemClock } from "../support/clock.ts";
import {
  assertBucketName,
  assertSharedKey,
  type SharedBucket,
  type SharedBucketOptions,
  type SharedChange,
  type SharedEntry,
  type SharedState,
} from "./shared_state.ts";

const DEFAULT_MAX_VALUE_BYTES = 1024 * 1024;

interface Stored {
  value: Uint8Array;
  revision: number;
  writtenAt: number;
}

/** One bucket; expiry is checked on read, so no timer keeps a test alive. */
class MemoryBucket implements SharedBucket {
  readonly name: string;
  #entries = new Map<string, Stored>();
  #watchers = new Set<(change: SharedChange) => void>();
  #revision = 0;
  #ttlMs: number;
  #maxValueBytes: number;
  #clock: Clock;

  constructor(name: string, options: SharedBucketOptions, clock: Clock) {
    this.name = name;
    this.#ttlMs = options.ttlMs ?? 0;
    this.#maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
    this.#clock = clock;
  }

  #live(key: string): Stored | undefined {
    const stored = this.#entries.get(key);
    if (stored && this.#ttlMs > 0 && this.#clock.now() - stored.writtenAt >= this.#ttlMs) {
      this.#entries.delete(key);
      this.#emit({ key, value: null, revision: ++this.#revision });
      return undefined;
    }
    return stored;
  }

  #emit(change: SharedChange): void {
    for (const watcher of [...this.#watchers]) watcher(change);
  }

  #write(key: string, value: Uint8Array): number {
    assertSharedKey(key);
    if (value.byteLength > this.#maxValueBytes) {
      throw new RangeError(
        `value for "${key}" in bucket "${this.name}" is ${value.byteLength} bytes, over its ${this.#maxValueBytes}`,
      );
    }
    const revision = ++this.#revision;
    const copy = value.slice();
    this.#entries.set(key, { value: copy, revision, writtenAt: this.#clock.now() });
    this.#emit({ key, value: copy.slice(), revision });
    return revision;
  }

  get(key: string): Promise<SharedEntry | null> {
    assertSharedKey(key);
    const stored = this.#live(key);
    return Promise.resolve(
      stored ? { key, value: stored.value.slice(), revision: stored.revision } : null,
    );
  }

  put(key: string, value: Uint8Array): Promise<number> {
    return Promise.resolve().then(() => this.#write(key, value));
  }

  create(key: string, value: Uint8Array): Promise<number | null> {
    return Promise.resolve().then(() => {
      assertSharedKey(key);
      return this.#live(key) ? null : this.#write(key, value);
    });
  }

  update(key: string, value: Uint8Array, revision: number): Promise<number | null> {
    return Promise.resolve().then(() => {
      assertSharedKey(key);
      return this.#live(key)?.revision === revision ? this.#write(key, value) : null;
    });
  }

  delete(key: string): Promise<void> {
    return Promise.resolve().then(() => {
      assertSharedKey(key);
      if (this.#entries.delete(key)) this.#emit({ key, value: null, revision: ++this.#revision });
    });
  }

  keys(): Promise<string[]> {
    return Promise.resolve([...this.#entries.keys()].filter((key) => this.#live(key)));
  }

  watch(handler: (change: SharedChange) => void): Promise<() => void> {
    for (const key of [...this.#entries.keys()]) {
      const stored = this.#live(key);
      if (stored) handler({ key, value: stored.value.slice(), revision: stored.revision });
    }
    this.#watchers.add(handler);
    return Promise.resolve(() => void this.#watchers.delete(handler));
  }
}

/** Shared state within one process; pass one instance to several gateways to make replicas. */
export class MemorySharedState implements SharedState {
  #buckets = new Map<string, MemoryBucket>();
  #subjects = new Map<string, Set<(data: Uint8Array) => void>>();
  #clock: Clock;

  constructor(options: { clock?: Clock } = {}) {
    this.#clock = options.clock ?? systemClock;
  }

  bucket(name: string, options: SharedBucketOptions = {}): Promise<SharedBucket> {
    assertBucketName(name);
    let bucket = this.#buckets.get(name);
    if (!bucket) {
      bucket = new MemoryBucket(name, options, this.#clock);
      this.#buckets.set(name, bucket);
    }
    return Promise.resolve(bucket);
  }

  publish(subject: string, data: Uint8Array): void {
    assertSharedKey(subject);
    for (const handler of [...(this.#subjects.get(subject) ?? [])]) {
      // Delivered later, as over the network: a publisher never runs its subscribers' code.
      queueMicrotask(() => handler(data.slice()));
    }
  }

  subscribe(subject: string, handler: (data: Uint8Array) => void): () => void {
    assertSharedKey(subject);
    let handlers = this.#subjects.get(subject);
    if (!handlers) this.#subjects.set(subject, handlers = new Set());
    handlers.add(handler);
    return () => {
      handlers.delete(handler);
      if (handlers.size === 0) this.#subjects.delete(subject);
    };
  }

  close(): Promise<void> {
    this.#subjects.clear();
    return Promise.resolve();
  }
}
