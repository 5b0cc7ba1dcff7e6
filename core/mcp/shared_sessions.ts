/**
 * SharedSessions: the Streamable HTTP session records of cluster mode, in the `agent33_sessions`
 * bucket, and the `session.<id>` subject that carries a session's notifications to the replica
 * holding its GET stream.
 *
 * A record's TTL is the session idle time, renewed by use — but not by a write per request: a
 * replica rewrites the record only once more than a quarter of the TTL has passed since the last
 * write it knows of (its own, or another replica's seen through the bucket watch), and on every
 * state change (log level, activations, subscriptions), which is a compare-and-set.
 *
 * Each replica remembers the records of the sessions it holds a copy of (tracked); the bucket
 * watch keeps those current (another replica's change, a DELETE) and is ignored for the rest.
 * @module
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import {
  decodeJson,
  encodeJson,
  type SharedBucket,
  sharedKey,
  type SharedState,
} from "../bus/shared_state.ts";
import {
  decodeSessionRecord,
  encodeSessionRecord,
  SESSION_RECORD_MAX_BYTES,
  type SessionRecord,
} from "./session_record.ts";

/** The bucket of session records (CLUSTER.md names its owner). */
export const SESSIONS_BUCKET = "agent33_sessions";

/** A record is rewritten by use once this fraction of its TTL has passed since the last write. */
export const TOUCH_FRACTION = 0.25;

/** The largest notification relayed between replicas, in bytes (NATS's default payload bound). */
const MAX_RELAYED_BYTES = 1024 * 1024;

/** Compare-and-set attempts of one state change before it gives up (others keep writing). */
const MAX_CAS_ATTEMPTS = 8;

/** Longest session id looked up: the gateway's are UUIDs; anything longer is not one of them. */
export const MAX_SESSION_ID_LENGTH = 128;

interface Known {
  id: string;
  record: SessionRecord;
  revision: number;
  /** When the last write this replica knows of happened (its clock). */
  writtenAt: number;
  touching?: boolean;
}

/**
 * What a message on a session's subject is for: `notify`, a notification for the replica holding
 * the GET stream; `client`, a client's message for the replica holding the request it is about
 * (the answer to a server-to-client request, or a cancellation).
 */
export type RelayKind = "notify" | "client";

/** Told when a tracked session's record changed elsewhere (`null`: deleted). */
export type SessionRecordListener = (id: string, record: SessionRecord | null) => void;

/** What {@link SharedSessions.open} needs. */
export interface SharedSessionsOptions {
  /** The session idle time: the records' TTL; 0 keeps records until DELETE. */
  ttlMs: number;
  replicaId: string;
  clock: Clock;
  logger: Logger;
}

/** The shared session records and their subjects. */
export class SharedSessions {
  readonly replicaId: string;
  readonly ttlMs: number;
  #state: SharedState;
  #bucket: SharedBucket;
  #clock: Clock;
  #logger: Logger;
  /** Tracked sessions by bucket key. */
  #known = new Map<string, Known>();
  #listener: SessionRecordListener | undefined;
  #stopWatch: (() => void) | undefined;
  #renewalFailing = false;

  private constructor(state: SharedState, bucket: SharedBucket, options: SharedSessionsOptions) {
    this.#state = state;
    this.#bucket = bucket;
    this.replicaId = options.replicaId;
    this.ttlMs = options.ttlMs;
    this.#clock = options.clock;
    this.#logger = options.logger;
  }

  /** Opens the bucket and starts watching it. */
  static async open(state: SharedState, options: SharedSessionsOptions): Promise<SharedSessions> {
    const bucket = await state.bucket(SESSIONS_BUCKET, {
      ttlMs: options.ttlMs,
      maxValueBytes: SESSION_RECORD_MAX_BYTES,
    });
    const sessions = new SharedSessions(state, bucket, options);
    sessions.#stopWatch = await bucket.watch((change) => sessions.#changed(change.key, change));
    return sessions;
  }

  /** Sets who hears of tracked records changed or deleted by another replica. */
  onChange(listener: SessionRecordListener): void {
    this.#listener = listener;
  }

  /** Stores a new session's record; throws when the bucket refuses it (unreachable, too large). */
  async create(id: string, record: SessionRecord): Promise<void> {
    const key = sharedKey(id);
    const revision = await this.#bucket.create(key, encodeSessionRecord(record));
    if (revision === null) throw new Error(`a session record for this id already exists`);
    this.#remember(key, id, record, revision);
  }

  /**
   * The record of a session this replica has not seen: one read, validated. Null when absent,
   * expired or unusable (logged: someone wrote a bad record). Tracks it when found.
   */
  async load(id: string): Promise<SessionRecord | null> {
    if (id.length === 0 || id.length > MAX_SESSION_ID_LENGTH) return null;
    const key = sharedKey(id);
    const entry = await this.#bucket.get(key);
    if (!entry) return null;
    const decoded = decodeSessionRecord(entry.value);
    if ("error" in decoded) {
      this.#logger.warn("ignored an unusable shared session record", { error: decoded.error });
      return null;
    }
    this.#remember(key, id, decoded.record, entry.revision);
    return decoded.record;
  }

  /** The record of a tracked session as this replica knows it. */
  known(id: string): SessionRecord | undefined {
    return this.#known.get(sharedKey(id))?.record;
  }

  /** Whether a tracked session's record has outlived its TTL with no write this replica knows of. */
  expired(id: string): boolean {
    const known = this.#known.get(sharedKey(id));
    return known === undefined ||
      (this.ttlMs > 0 && this.#clock.now() - known.writtenAt >= this.ttlMs);
  }

  /**
   * Renews a tracked session's record when more than a quarter of its TTL passed since its last
   * write; in the background, at most one rewrite at a time per session. A failure is logged:
   * the next use tries again before the record expires.
   */
  touch(id: string): void {
    const known = this.#known.get(sharedKey(id));
    if (!known || known.touching || this.ttlMs <= 0) return;
    if (this.#clock.now() - known.writtenAt < this.ttlMs * TOUCH_FRACTION) return;
    known.touching = true;
    void this.change(id, (record) => record, { force: true }).then(() => {
      this.#renewalFailing = false;
    }, (error) => {
      // Once per outage: every use past a quarter of the TTL tries again.
      if (!this.#renewalFailing) {
        this.#logger.warn("could not renew a shared session record (logged once until one works)", {
          error: String(error),
        });
      }
      this.#renewalFailing = true;
    }).finally(() => known.touching = false);
  }

  /**
   * Changes a session's record by compare-and-set (retried when another replica wrote first).
   * Resolves to the new record, or null when the session is gone. `force` writes an unchanged
   * record too (a renewal).
   */
  async change(
    id: string,
    mutate: (record: SessionRecord) => SessionRecord,
    options: { force?: boolean } = {},
  ): Promise<SessionRecord | null> {
    const key = sharedKey(id);
    for (let attempt = 0; attempt < MAX_CAS_ATTEMPTS; attempt++) {
      const known = this.#known.get(key) ?? await this.#reload(key, id);
      if (!known) return null;
      const next = mutate(known.record);
      const bytes = encodeSessionRecord(next);
      if (!options.force && JSON.stringify(next) === JSON.stringify(known.record)) return next;
      const revision = await this.#bucket.update(key, bytes, known.revision);
      if (revision !== null) {
        this.#remember(key, id, next, revision);
        return next;
      }
      // Another replica wrote (or the record expired): start again from what is stored now.
      if (!await this.#reload(key, id)) return null;
    }
    throw new Error(`gave up changing a shared session record after ${MAX_CAS_ATTEMPTS} conflicts`);
  }

  /** Deletes a session's record (DELETE /mcp): every replica drops its copy. */
  async remove(id: string): Promise<void> {
    const key = sharedKey(id);
    this.#known.delete(key);
    await this.#bucket.delete(key);
  }

  /** Stops tracking a session (its copy here is gone; the record stays). */
  forget(id: string): void {
    this.#known.delete(sharedKey(id));
  }

  /** Sessions tracked here. */
  get tracked(): number {
    return this.#known.size;
  }

  /** Sends a message to the other replicas' copies of a session (see {@link RelayKind}). */
  publish(id: string, message: JSONRPCMessage, kind: RelayKind = "notify"): void {
    const bytes = encodeJson({ from: this.replicaId, kind, message });
    if (bytes.byteLength > MAX_RELAYED_BYTES) {
      this.#logger.warn("dropped a session message too large to relay to another replica", {
        bytes: bytes.byteLength,
      });
      return;
    }
    this.#state.publish(subjectOf(id), bytes);
  }

  /** Receives what other replicas publish for a session, checked, until the returned call. */
  subscribe(id: string, handler: (message: JSONRPCMessage, kind: RelayKind) => void): () => void {
    return this.#state.subscribe(subjectOf(id), (data) => {
      const relayed = relayedMessage(data, this.replicaId);
      if (relayed) handler(relayed.message, relayed.kind);
      else this.#logger.debug("ignored a malformed relayed session message");
    });
  }

  /** Stops the watch. */
  close(): void {
    this.#stopWatch?.();
    this.#known.clear();
  }

  async #reload(key: string, id: string): Promise<Known | undefined> {
    this.#known.delete(key);
    return await this.load(id) ? this.#known.get(key) : undefined;
  }

  #remember(key: string, id: string, record: SessionRecord, revision: number): void {
    const known = this.#known.get(key);
    if (known && known.revision >= revision) return;
    this.#known.set(key, {
      id,
      record,
      revision,
      writtenAt: this.#clock.now(),
      ...(known?.touching ? { touching: true } : {}),
    });
  }

  #changed(key: string, change: { value: Uint8Array | null; revision: number }): void {
    const known = this.#known.get(key);
    if (!known || change.revision <= known.revision) return;
    if (change.value === null) {
      this.#known.delete(key);
      this.#listener?.(known.id, null);
      return;
    }
    const decoded = decodeSessionRecord(change.value);
    if ("error" in decoded) {
      this.#logger.warn("ignored an unusable shared session record", { error: decoded.error });
      return;
    }
    const renewalOnly = JSON.stringify(decoded.record) === JSON.stringify(known.record);
    this.#remember(key, known.id, decoded.record, change.revision);
    if (!renewalOnly) this.#listener?.(known.id, decoded.record);
  }
}

/** The subject of one session's notifications. */
export function subjectOf(id: string): string {
  return `session.${sharedKey(id)}`;
}

/** A relayed message from another replica, or undefined when malformed or our own. */
function relayedMessage(
  data: Uint8Array,
  self: string,
): { message: JSONRPCMessage; kind: RelayKind } | undefined {
  if (data.byteLength > MAX_RELAYED_BYTES) return undefined;
  let value: unknown;
  try {
    value = decodeJson(data);
  } catch {
    return undefined;
  }
  const envelope = value as { from?: unknown; kind?: unknown; message?: unknown } | null;
  const m = envelope?.message as Record<string, unknown> | undefined;
  if (
    typeof envelope?.from !== "string" || envelope.from === self || !m || typeof m !== "object" ||
    m.jsonrpc !== "2.0" ||
    (m.params !== undefined && (typeof m.params !== "object" || m.params === null))
  ) return undefined;
  const method = typeof m.method === "string" ? m.method : undefined;
  if (envelope.kind === "notify" && !("id" in m) && method?.startsWith("notifications/")) {
    return { message: m as unknown as JSONRPCMessage, kind: "notify" };
  }
  const answer = typeof m.id === "string" && !("method" in m) && ("result" in m || "error" in m);
  if (envelope.kind === "client" && (answer || m.method === "notifications/cancelled")) {
    return { message: m as unknown as JSONRPCMessage, kind: "client" };
  }
  return undefined;
}
