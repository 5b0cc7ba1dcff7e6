/**
 * SharedState over NATS JetStream: each bucket is a JetStream KV bucket (revisions are its
 * sequence numbers, compare-and-set is its `update`, TTL its max age), and raw subjects live under
 * `agent33.shared.` so they never mix with the event subjects.
 * @module
 */
import type { KV, KvEntry, NatsConnection, Subscription } from "nats";
import {
  assertBucketName,
  assertSharedKey,
  type Clock,
  type Logger,
  type SharedBucket,
  type SharedBucketOptions,
  type SharedChange,
  type SharedEntry,
  type SharedState,
} from "../../core/plugin_api/mod.ts";
import { openKvBucket } from "./kv_bucket.ts";

/** Where raw shared subjects live on the NATS server. */
export const SHARED_SUBJECT_PREFIX = "agent33.shared";

/** JetStream's "wrong last sequence": create found the key, or update found a newer revision. */
const JS_WRONG_LAST_SEQUENCE = 10071;
const DEFAULT_MAX_VALUE_BYTES = 1024 * 1024;
/** How long a key listing may go without an entry before it is given up as stalled. */
const LISTING_STALL_MS = 10_000;

/** Options of {@link NatsSharedState}. */
export interface NatsSharedStateOptions {
  /** JetStream replicas of each bucket this state creates (1, 3 or 5). */
  replicas?: number;
  logger: Logger;
  /** Paces the retries of a bucket's open while a fresh cluster forms. */
  clock: Clock;
}

function isWrongLastSequence(error: unknown): boolean {
  return (error as { api_error?: { err_code?: number } }).api_error?.err_code ===
    JS_WRONG_LAST_SEQUENCE;
}

function live(entry: KvEntry | null): entry is KvEntry {
  return entry !== null && entry.operation === "PUT";
}

/**
 * Whether nats-server `version` refuses every write of a compare-and-set race on a replicated
 * stream but one: before 2.9.21 the expected-revision check ran before replication only.
 */
export function serializesCompareAndSet(version: string): boolean {
  const [major = 0, minor = 0, patch = 0] = version.split(/[.-]/).map((n) => Number(n) || 0);
  return major > 2 || (major === 2 && (minor > 9 || (minor === 9 && patch >= 21)));
}

/** One JetStream KV bucket as a {@link SharedBucket}. */
class NatsBucket implements SharedBucket {
  readonly name: string;
  readonly #kv: KV;
  readonly #maxValueBytes: number;
  readonly #watches: Set<() => void>;
  readonly #clock: Clock;

  constructor(
    name: string,
    kv: KV,
    maxValueBytes: number,
    watches: Set<() => void>,
    clock: Clock,
  ) {
    this.name = name;
    this.#kv = kv;
    this.#maxValueBytes = maxValueBytes;
    this.#watches = watches;
    this.#clock = clock;
  }

  #checkValue(key: string, value: Uint8Array): void {
    assertSharedKey(key);
    if (value.byteLength > this.#maxValueBytes) {
      throw new RangeError(
        `value for "${key}" in bucket "${this.name}" is ${value.byteLength} bytes, over its ${this.#maxValueBytes}`,
      );
    }
  }

  async get(key: string): Promise<SharedEntry | null> {
    assertSharedKey(key);
    const entry = await this.#kv.get(key);
    return live(entry) ? { key, value: entry.value, revision: entry.revision } : null;
  }

  async put(key: string, value: Uint8Array): Promise<number> {
    this.#checkValue(key, value);
    return await this.#kv.put(key, value);
  }

  async create(key: string, value: Uint8Array): Promise<number | null> {
    this.#checkValue(key, value);
    try {
      return await this.#kv.create(key, value);
    } catch (error) {
      if (isWrongLastSequence(error)) return null;
      throw error;
    }
  }

  async update(key: string, value: Uint8Array, revision: number): Promise<number | null> {
    this.#checkValue(key, value);
    try {
      return await this.#kv.update(key, value, revision);
    } catch (error) {
      if (isWrongLastSequence(error)) return null;
      throw error;
    }
  }

  async delete(key: string): Promise<void> {
    assertSharedKey(key);
    await this.#kv.delete(key);
  }

  async keys(): Promise<string[]> {
    // kv.keys() ends only once its consumer has nothing pending, which another replica that keeps
    // writing (a heartbeat) can put off for ever: CI hung on it. This listing ends at the stream's
    // last sequence read after its consumer started, since every key's latest entry is at or
    // before it. A key written while it reads is delivered again, so its last operation wins.
    const iterator = await this.#kv.watch({ headers_only: true });
    const live = new Map<string, boolean>();
    let stalled = false;
    let timer = { cancel() {} };
    const arm = () => {
      timer.cancel();
      timer = this.#clock.setTimeout(() => {
        stalled = true;
        iterator.stop();
      }, LISTING_STALL_MS);
    };
    try {
      const { state } = (await this.#kv.status()).streamInfo;
      if (state.messages === 0) return [];
      arm();
      for await (const entry of iterator) {
        live.set(entry.key, entry.operation === "PUT");
        if (entry.revision >= state.last_seq || entry.delta === 0) break;
        arm();
      }
    } finally {
      timer.cancel();
      iterator.stop();
    }
    if (stalled) {
      throw new Error(
        `listing the keys of bucket "${this.name}" stalled: no entry for ${LISTING_STALL_MS} ms; ` +
          "check that the bucket's JetStream stream has a leader (nats stream info)",
      );
    }
    return [...live].filter(([, isLive]) => isLive).map(([key]) => key);
  }

  async watch(handler: (change: SharedChange) => void): Promise<() => void> {
    let initialized = false;
    const iterator = await this.#kv.watch({ initializedFn: () => initialized = true });
    const stop = () => {
      this.#watches.delete(stop);
      iterator.stop();
    };
    this.#watches.add(stop);
    void (async () => {
      for await (const entry of iterator) {
        const deleted = entry.operation !== "PUT";
        // The snapshot holds the last entry of every key, deletes included; those are history.
        if (deleted && !initialized) continue;
        handler({
          key: entry.key,
          value: deleted ? null : entry.value,
          revision: entry.revision,
        });
      }
    })();
    return stop;
  }
}

/** The replicas' shared state on one NATS connection (owned by the bus, not by this). */
export class NatsSharedState implements SharedState {
  readonly #nc: NatsConnection;
  readonly #replicas: number;
  readonly #logger: Logger;
  readonly #clock: Clock;
  readonly #buckets = new Map<string, Promise<SharedBucket>>();
  readonly #watches = new Set<() => void>();
  readonly #subscriptions = new Set<Subscription>();

  constructor(nc: NatsConnection, options: NatsSharedStateOptions) {
    this.#nc = nc;
    this.#replicas = options.replicas ?? 1;
    this.#logger = options.logger;
    this.#clock = options.clock;
    const version = nc.info?.version;
    if (this.#replicas > 1 && version !== undefined && !serializesCompareAndSet(version)) {
      this.#logger.warn(
        `nats-server ${version} does not serialize compare-and-set on replicated buckets ` +
          "(nats-io/nats-server#4320): two replicas writing one key at the same moment may both " +
          "succeed (an approval decided twice, a rate-limit token taken twice); run nats-server " +
          "2.9.21 or later",
      );
    }
  }

  bucket(name: string, options: SharedBucketOptions = {}): Promise<SharedBucket> {
    assertBucketName(name);
    let bucket = this.#buckets.get(name);
    if (!bucket) {
      bucket = this.#open(name, options);
      // A failed open is not cached: the next caller tries again (NATS may be back).
      bucket.catch(() => this.#buckets.delete(name));
      this.#buckets.set(name, bucket);
    }
    return bucket;
  }

  async #open(name: string, options: SharedBucketOptions): Promise<SharedBucket> {
    const maxValueBytes = options.maxValueBytes ?? DEFAULT_MAX_VALUE_BYTES;
    let kv: KV;
    try {
      kv = await openKvBucket(this.#nc, name, {
        history: 1,
        replicas: this.#replicas,
        maxValueSize: maxValueBytes,
        ...(options.ttlMs ? { ttl: options.ttlMs } : {}),
      }, {
        clock: this.#clock,
        logger: this.#logger,
      });
    } catch (error) {
      throw new Error(
        `Cannot open the JetStream KV bucket "${name}": ` +
          `${error instanceof Error ? error.message : String(error)}; run nats-server with ` +
          `JetStream enabled (-js), with at least ${this.#replicas} node(s) for ` +
          "MCP_CLUSTER_KV_REPLICAS",
      );
    }
    return new NatsBucket(name, kv, maxValueBytes, this.#watches, this.#clock);
  }

  publish(subject: string, data: Uint8Array): void {
    assertSharedKey(subject);
    try {
      this.#nc.publish(`${SHARED_SUBJECT_PREFIX}.${subject}`, data);
    } catch (error) {
      // At most once: a message published while the connection closes is lost, as documented.
      this.#logger.debug("shared publish dropped", { subject, error: String(error) });
    }
  }

  subscribe(subject: string, handler: (data: Uint8Array) => void): () => void {
    assertSharedKey(subject);
    const subscription = this.#nc.subscribe(`${SHARED_SUBJECT_PREFIX}.${subject}`, {
      callback: (error, msg) => {
        if (error) return;
        try {
          handler(msg.data);
        } catch (thrown) {
          this.#logger.warn("shared subscriber threw; message dropped", {
            subject,
            error: String(thrown),
          });
        }
      },
    });
    this.#subscriptions.add(subscription);
    return () => {
      this.#subscriptions.delete(subscription);
      subscription.unsubscribe();
    };
  }

  close(): Promise<void> {
    for (const stop of [...this.#watches]) stop();
    for (const subscription of this.#subscriptions) subscription.unsubscribe();
    this.#subscriptions.clear();
    return Promise.resolve();
  }
}
