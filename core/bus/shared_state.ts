/**
 * Shared state: what replicas of one gateway keep in common (sessions, approvals, rate limits,
 * pins, the fleet), as key-value buckets with revisions and watches, plus raw subjects for
 * messages addressed to one replica or session. In cluster mode the `bus-nats` plugin provides it
 * over JetStream KV; {@link MemorySharedState} serves one process and the tests.
 *
 * Keys are checked, never escaped: a key is dot-separated tokens of letters, digits, `-`, `_` and
 * `=` (what JetStream KV accepts), so a value from a client must go through {@link sharedKey}.
 * @module
 */

/** One stored entry of a bucket. */
export interface SharedEntry {
  key: string;
  value: Uint8Array;
  /** Increases with every write to the bucket; what {@link SharedBucket.update} compares. */
  revision: number;
}

/** A change a watcher sees: a write (`value`) or a delete or expiry (`value: null`). */
export interface SharedChange {
  key: string;
  value: Uint8Array | null;
  revision: number;
}

/** How a bucket keeps its entries. */
export interface SharedBucketOptions {
  /** An entry is forgotten this long after its last write; 0 or unset keeps entries forever. */
  ttlMs?: number;
  /** The largest value accepted, in bytes; default 1 MiB. */
  maxValueBytes?: number;
}

/** A key-value bucket every replica sees. All methods reject when the backend is unreachable. */
export interface SharedBucket {
  readonly name: string;
  /** The entry, or null when absent, deleted or expired. */
  get(key: string): Promise<SharedEntry | null>;
  /** Writes unconditionally; resolves to the new revision. */
  put(key: string, value: Uint8Array): Promise<number>;
  /** Writes only if the key is absent; the new revision, or null when another write was first. */
  create(key: string, value: Uint8Array): Promise<number | null>;
  /** Compare-and-set: writes only if the key is still at `revision`; null when it moved on. */
  update(key: string, value: Uint8Array, revision: number): Promise<number | null>;
  /** Deletes the key (watchers see `value: null`). */
  delete(key: string): Promise<void>;
  /** The live keys, each named once. */
  keys(): Promise<string[]>;
  /**
   * Calls `handler` with the current value of every key, then with every later change, until
   * the returned function is called. Delivery is in revision order per bucket.
   */
  watch(handler: (change: SharedChange) => void): Promise<() => void>;
}

/** The replicas' shared state. */
export interface SharedState {
  /** Opens (creating when absent) a bucket; the same name gives the same bucket on every replica. */
  bucket(name: string, options?: SharedBucketOptions): Promise<SharedBucket>;
  /** Sends bytes to whoever subscribes to `subject` (at most once, not stored). */
  publish(subject: string, data: Uint8Array): void;
  /** Receives what is published on `subject` (a key-shaped name) until the returned function runs. */
  subscribe(subject: string, handler: (data: Uint8Array) => void): () => void;
  /** Stops watches and subscriptions (the backend connection belongs to its owner). */
  close(): Promise<void>;
}

const TOKEN = /^[A-Za-z0-9_=-]+$/;

/** Whether `key` is a valid bucket key or subject: dot-separated tokens, at most 1,024 bytes. */
export function isSharedKey(key: string): boolean {
  return key.length > 0 && key.length <= 1024 && key.split(".").every((t) => TOKEN.test(t));
}

/** Throws when `key` is not a valid key, naming it: keys are built by code, never taken raw. */
export function assertSharedKey(key: string): void {
  if (!isSharedKey(key)) {
    throw new TypeError(
      `"${
        key.slice(0, 80)
      }" is not a shared-state key (dot-separated letters, digits, "-", "_", "="); build keys with sharedKey()`,
    );
  }
}

const BUCKET_NAME = /^[A-Za-z0-9_-]{1,64}$/;

/** Throws unless `name` is a bucket name: 1-64 letters, digits, "-" or "_" (no dots). */
export function assertBucketName(name: string): void {
  if (!BUCKET_NAME.test(name)) {
    throw new TypeError(
      `"${name.slice(0, 80)}" is not a shared bucket name (1-64 letters, digits, "-" or "_")`,
    );
  }
}

const encoder = new TextEncoder();

/** A key from parts of any text: each part base64url-encoded, so no part can add a dot or escape. */
export function sharedKey(...parts: string[]): string {
  return parts.map((part) => {
    if (part !== "" && TOKEN.test(part) && !part.includes("=")) return part;
    // "=" marks an encoded part, so an encoded part never equals a plain one.
    let binary = "";
    for (const byte of encoder.encode(part)) binary += String.fromCharCode(byte);
    return "=" + btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replaceAll("=", "");
  }).join(".");
}

const decoder = new TextDecoder();

/** JSON of a value as bytes, for buckets. */
export function encodeJson(value: unknown): Uint8Array {
  return encoder.encode(JSON.stringify(value));
}

/** A bucket value parsed as JSON; throws a SyntaxError on bytes that are not. */
export function decodeJson(value: Uint8Array): unknown {
  return JSON.parse(decoder.decode(value));
}
