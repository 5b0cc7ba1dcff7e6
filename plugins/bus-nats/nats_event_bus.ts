/**
 * An {@link EventBus} backed by NATS core pub/sub, so gateway replicas see each other's events.
 *
 * Each event is delivered to local subscribers synchronously (as with the in-process bus) and
 * published as JSON on `subjectOf(event)`, tagged with this bus's `origin` id. Each bus
 * subscribes to `<SUBJECT_PREFIX>.>` and hands other replicas' events to its local subscribers,
 * skipping its own echo. Delivery over the wire is at-most-once (NATS core): while disconnected,
 * events wait in a bounded buffer (oldest dropped first) that is flushed on reconnect.
 * @module
 */
import { connect, Events, type KV, type Msg, type NatsConnection, type NatsError } from "nats";
import {
  type Clock,
  type EventBus,
  type EventHandler,
  type GatewayEvent,
  type Logger,
  type NonceStore,
  settlesWithin,
  type SharedState,
  SUBJECT_PREFIX,
  subjectOf,
  systemClock,
} from "../../core/plugin_api/mod.ts";
import { openKvBucket } from "./kv_bucket.ts";

/** Options for {@link NatsEventBus.connect}. */
export interface NatsEventBusOptions {
  /** Server URL, e.g. `nats://127.0.0.1:4222` (NATS_URL); a NATS cluster's servers comma-separated. */
  url: string;
  logger: Logger;
  /** Most events held while disconnected; older ones are dropped past it. Default 1000. */
  bufferLimit?: number;
  /** Connection name shown in the server's monitoring. */
  name?: string;
  /** Milliseconds between reconnect attempts. Default 250. */
  reconnectTimeWait?: number;
  /** Bounds the drain on close; the real clock by default. */
  clock?: Clock;
}

/** Counters and state of a {@link NatsEventBus}. */
export interface NatsEventBusStats {
  /** Events handed to the NATS connection (including flushed buffered ones). */
  published: number;
  /** Events waiting for a reconnect. */
  buffered: number;
  /** Events lost: dropped from a full buffer, or rejected by the client. */
  dropped: number;
  /** Whether the bus currently believes it is connected. */
  connected: boolean;
  /** Completed reconnects since connect. */
  reconnects: number;
  /** Remote events dispatched to local subscribers. */
  received: number;
  /** Inbound messages dropped as malformed (bad JSON, unknown type, wrong subject). */
  malformed: number;
}

/** Options for {@link NatsEventBus.nonceStore}. */
export interface NatsNonceStoreOptions {
  /** JetStream KV bucket shared by the replicas; default {@link DEFAULT_NONCE_BUCKET}. */
  bucket?: string;
  /**
   * The longest approval-token lifetime the store must guard, in ms; default 10 minutes. The
   * bucket keeps each nonce this long plus a clock-skew allowance.
   */
  ttlMs?: number;
  /** For "is this token's expiry within what the bucket remembers"; default the system clock. */
  clock?: Clock;
  /** JetStream nodes keeping the bucket when this creates it (MCP_CLUSTER_KV_REPLICAS); default 1. */
  replicas?: number;
}

/** Default KV bucket of consumed approval nonces. */
export const DEFAULT_NONCE_BUCKET = "agent33_approval_nonces";
const DEFAULT_NONCE_TTL_MS = 10 * 60 * 1000;
/** Replicas' clocks may differ this much; nonces are kept this much longer than tokens live. */
const NONCE_CLOCK_SKEW_MS = 60 * 1000;
/** Valid KV keys that approval tokens produce (hex); anything else is refused, not escaped. */
const NONCE_KEY = /^[A-Za-z0-9_-]{1,128}$/;
/** JetStream's "wrong last sequence": the key already exists, so kv.create lost the race. */
const JS_WRONG_LAST_SEQUENCE = 10071;

/**
 * The subject a decoded message must arrive on, or undefined if its `type` is not a known event.
 * `subjectOf` is the one list of event types and subjects; for an unknown type its exhaustive
 * switch matches nothing and it returns undefined at run time.
 */
function expectedSubject(
  candidate: Record<string, unknown> & { type: string },
): string | undefined {
  try {
    const subject: unknown = subjectOf(candidate as GatewayEvent);
    return typeof subject === "string" ? subject : undefined;
  } catch {
    return undefined;
  }
}

/** The servers of a NATS_URL: one URL, or several of one cluster separated by commas. */
export function natsServers(url: string): string[] {
  return url.split(",").map((part) => part.trim()).filter((part) => part !== "");
}

const DEFAULT_BUFFER_LIMIT = 1000;
const DEFAULT_RECONNECT_TIME_WAIT_MS = 250;
const CONNECT_TIMEOUT_MS = 5000;
const DRAIN_TIMEOUT_MS = 5000;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The EventBus over NATS. Create it with {@link NatsEventBus.connect}. */
export class NatsEventBus implements EventBus {
  /** Tags every message this bus publishes, so its own echo can be skipped. */
  readonly origin: string = crypto.randomUUID();

  readonly #nc: NatsConnection;
  readonly #logger: Logger;
  readonly #bufferLimit: number;
  readonly #clock: Clock;
  readonly #handlers = new Set<EventHandler>();
  #buffer: { subject: string; data: Uint8Array }[] = [];
  #connected = true;
  #closed = false;
  #closing: Promise<void> | undefined;
  #statusLoop: Promise<void> = Promise.resolve();
  #warnedDropThisOutage = false;
  #droppedThisOutage = 0;
  #published = 0;
  #dropped = 0;
  #reconnects = 0;
  #received = 0;
  #malformed = 0;

  private constructor(nc: NatsConnection, logger: Logger, bufferLimit: number, clock: Clock) {
    this.#nc = nc;
    this.#logger = logger;
    this.#bufferLimit = bufferLimit;
    this.#clock = clock;
  }

  /**
   * Connects to NATS and subscribes to every gateway subject. Fails fast with a clear error if
   * the server cannot be reached now; after that, it reconnects forever.
   */
  static async connect(options: NatsEventBusOptions): Promise<NatsEventBus> {
    const bufferLimit = options.bufferLimit ?? DEFAULT_BUFFER_LIMIT;
    if (!Number.isInteger(bufferLimit) || bufferLimit < 0) {
      throw new RangeError(`bufferLimit must be a non-negative integer, got ${bufferLimit}`);
    }
    let nc: NatsConnection;
    try {
      nc = await connect({
        servers: natsServers(options.url),
        name: options.name,
        reconnect: true,
        maxReconnectAttempts: -1,
        reconnectTimeWait: options.reconnectTimeWait ?? DEFAULT_RECONNECT_TIME_WAIT_MS,
        // Fail the first connect fast; retrying only starts once we have been connected.
        waitOnFirstConnect: false,
        timeout: CONNECT_TIMEOUT_MS,
      });
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      throw new Error(
        `Cannot connect to NATS at ${options.url}: ${reason}; ` +
          "start nats-server or unset NATS_URL to use the in-process bus",
      );
    }
    const bus = new NatsEventBus(nc, options.logger, bufferLimit, options.clock ?? systemClock);
    bus.#start();
    try {
      // Round-trip so the subscription is registered before anyone publishes to us.
      await nc.flush();
    } catch (error) {
      await bus.close();
      throw new Error(
        `Cannot connect to NATS at ${options.url}: ${String(error)}; ` +
          "start nats-server or unset NATS_URL to use the in-process bus",
      );
    }
    options.logger.info("connected to NATS", { url: options.url, origin: bus.origin });
    return bus;
  }

  #start(): void {
    this.#nc.subscribe(`${SUBJECT_PREFIX}.>`, {
      callback: (error, msg) => this.#onMessage(error, msg),
    });
    this.#statusLoop = this.#watchStatus().catch((error) => {
      this.#logger.error("NATS status monitor failed", { error: String(error) });
    });
  }

  /**
   * Follows disconnects and reconnects until the connection closes. nats.js never ends the
   * iterators of `nc.status()` on close, so each step races `nc.closed()`; otherwise the loop
   * (and close()) would wait forever.
   */
  async #watchStatus(): Promise<void> {
    const status = this.#nc.status();
    const iterator = status[Symbol.asyncIterator]();
    const closed = this.#nc.closed().then((reason) => ({ closed: true as const, reason }));
    try {
      for (;;) {
        const step = await Promise.race([iterator.next(), closed]);
        if ("closed" in step) {
          // By close(), or by the client giving up (it never does with unlimited reconnects).
          if (!this.#closed) {
            this.#connected = false;
            this.#logger.error("NATS connection closed unexpectedly; events will be dropped", {
              error: String(step.reason),
            });
          }
          return;
        }
        if (step.done) return;
        const s = step.value;
        switch (s.type) {
          case Events.Disconnect:
            this.#onDisconnect(String(s.data));
            break;
          case Events.Reconnect:
            this.#onReconnect(String(s.data));
            break;
          case Events.Error:
            this.#logger.warn("NATS async error", { error: String(s.data) });
            break;
          case Events.LDM:
            this.#logger.info("NATS server entering lame duck mode", { server: String(s.data) });
            break;
        }
      }
    } finally {
      // Unregisters the iterator from the connection where the client supports it.
      (status as Partial<{ stop(): void }>).stop?.();
    }
  }

  publish(event: GatewayEvent): void {
    for (const handler of [...this.#handlers]) this.#deliver(handler, event);
    if (this.#closed) return;
    let subject: string;
    let data: Uint8Array;
    try {
      subject = subjectOf(event);
      data = encoder.encode(JSON.stringify({ ...event, origin: this.origin }));
    } catch (error) {
      this.#dropped++;
      this.#logger.warn("event not serializable; not published to NATS", {
        event: event.type,
        error: String(error),
      });
      return;
    }
    if (this.#connected) {
      this.#send(subject, data);
      return;
    }
    this.#enqueue(subject, data);
  }

  subscribe(handler: EventHandler): () => void {
    this.#handlers.add(handler);
    return () => void this.#handlers.delete(handler);
  }

  /**
   * A {@link NonceStore} shared by every replica on this NATS server: a JetStream KV bucket
   * where consuming a nonce is an atomic create, so of two replicas presented the same token
   * exactly one wins. Nonces expire with the bucket's TTL (max age), after the tokens they
   * guard. Rejects if JetStream is unavailable, or if an existing bucket forgets nonces sooner
   * than tokens expire; consume() rejects when NATS cannot answer, so callers fail closed.
   */
  async nonceStore(options: NatsNonceStoreOptions = {}): Promise<NonceStore> {
    const bucket = options.bucket ?? DEFAULT_NONCE_BUCKET;
    const ttlMs = options.ttlMs ?? DEFAULT_NONCE_TTL_MS;
    if (!Number.isSafeInteger(ttlMs) || ttlMs <= 0) {
      throw new RangeError(`ttlMs must be a positive integer of milliseconds, got ${ttlMs}`);
    }
    if (this.#closed) throw new Error("The NATS bus is closed; no nonce store can be opened");
    const clock = options.clock ?? systemClock;
    const retentionMs = ttlMs + NONCE_CLOCK_SKEW_MS;
    let kv: KV;
    let keptMs: number;
    const replicas = options.replicas ?? 1;
    try {
      kv = await openKvBucket(this.#nc, bucket, { history: 1, ttl: retentionMs, replicas }, {
        clock: this.#clock,
        logger: this.#logger,
      });
      keptMs = (await kv.status()).ttl;
    } catch (error) {
      throw new Error(
        `Cannot open the JetStream KV bucket "${bucket}" for approval nonces: ` +
          `${error instanceof Error ? error.message : String(error)}; ` +
          "run nats-server with JetStream enabled (-js)",
      );
    }
    // An existing bucket keeps its own max age; a shorter one would let tokens be replayed.
    if (keptMs > 0 && keptMs < retentionMs) {
      throw new Error(
        `The KV bucket "${bucket}" forgets nonces after ${keptMs} ms, but approval tokens need ` +
          `${retentionMs} ms; delete the bucket (nats kv del ${bucket}) so it is recreated`,
      );
    }
    return {
      consume: async (nonce: string, expiresAt: number): Promise<boolean> => {
        if (!NONCE_KEY.test(nonce)) {
          throw new TypeError("An approval nonce must be 1-128 characters of [A-Za-z0-9_-]");
        }
        const remaining = expiresAt - clock.now();
        if (!(remaining > 0)) return false;
        if (remaining > retentionMs) {
          // Fail closed: the bucket would forget the nonce while the token is still valid.
          throw new RangeError(
            `An approval token valid for ${remaining} ms more outlives the ${retentionMs} ms the ` +
              `nonce bucket "${bucket}" remembers; raise the nonce store's ttlMs`,
          );
        }
        try {
          await kv.create(nonce, encoder.encode(String(expiresAt)));
          return true;
        } catch (error) {
          const code = (error as { api_error?: { err_code?: number } }).api_error?.err_code;
          if (code === JS_WRONG_LAST_SEQUENCE) return false;
          throw error;
        }
      },
    };
  }

  /**
   * The replicas' {@link SharedState} on this connection (JetStream KV buckets and raw subjects),
   * for cluster mode; `replicas` is how many JetStream nodes keep each bucket it creates.
   */
  async sharedState(options: { replicas?: number } = {}): Promise<SharedState> {
    if (this.#closed) throw new Error("The NATS bus is closed; no shared state can be opened");
    const { NatsSharedState } = await import("./nats_shared_state.ts");
    return new NatsSharedState(this.#nc, { logger: this.#logger, clock: this.#clock, ...options });
  }

  /** Counters and connection state. */
  stats(): NatsEventBusStats {
    return {
      published: this.#published,
      buffered: this.#buffer.length,
      dropped: this.#dropped,
      connected: this.#connected && !this.#closed,
      reconnects: this.#reconnects,
      received: this.#received,
      malformed: this.#malformed,
    };
  }

  /** Drains (when connected) or closes the connection; idempotent. */
  close(): Promise<void> {
    this.#closing ??= this.#close();
    return this.#closing;
  }

  async #close(): Promise<void> {
    this.#closed = true;
    this.#handlers.clear();
    if (this.#buffer.length > 0) {
      this.#logger.warn("closing NATS bus while disconnected; buffered events are lost", {
        lost: this.#buffer.length,
      });
      this.#dropped += this.#buffer.length;
      this.#buffer = [];
    }
    if (this.#connected && !this.#nc.isClosed()) {
      // Drain flushes what was published; bound it in case the server silently went away.
      const drained = this.#nc.drain().catch((error) =>
        this.#logger.debug("NATS drain failed; closing", { error: String(error) })
      );
      await settlesWithin(this.#clock, DRAIN_TIMEOUT_MS, drained);
    }
    try {
      await this.#nc.close();
    } catch (error) {
      this.#logger.debug("NATS close failed", { error: String(error) });
    }
    await this.#statusLoop;
  }

  #deliver(handler: EventHandler, event: GatewayEvent): void {
    try {
      handler(event);
    } catch (error) {
      this.#logger.warn("event subscriber threw; event delivered to the others", {
        event: event.type,
        error: String(error),
      });
    }
  }

  #send(subject: string, data: Uint8Array): void {
    try {
      this.#nc.publish(subject, data);
      this.#published++;
    } catch (error) {
      this.#dropped++;
      this.#logger.warn("NATS publish failed; event dropped", { subject, error: String(error) });
    }
  }

  #enqueue(subject: string, data: Uint8Array): void {
    this.#buffer.push({ subject, data });
    if (this.#buffer.length <= this.#bufferLimit) return;
    this.#buffer.shift();
    this.#dropped++;
    this.#droppedThisOutage++;
    if (!this.#warnedDropThisOutage) {
      this.#warnedDropThisOutage = true;
      this.#logger.warn("NATS event buffer full; dropping oldest events until reconnect", {
        limit: this.#bufferLimit,
      });
    }
  }

  #onDisconnect(server: string): void {
    if (this.#closed || !this.#connected) return;
    this.#connected = false;
    this.#warnedDropThisOutage = false;
    this.#droppedThisOutage = 0;
    this.#logger.warn("disconnected from NATS; buffering events until reconnect", {
      server,
      limit: this.#bufferLimit,
    });
  }

  #onReconnect(server: string): void {
    if (this.#closed) return;
    this.#reconnects++;
    this.#connected = true;
    const pending = this.#buffer;
    this.#buffer = [];
    for (const { subject, data } of pending) this.#send(subject, data);
    this.#logger.info("reconnected to NATS", {
      server,
      flushed: pending.length,
      dropped: this.#droppedThisOutage,
    });
  }

  #onMessage(error: NatsError | null, msg: Msg): void {
    if (error) {
      this.#logger.warn("NATS subscription error", { error: error.message });
      return;
    }
    if (this.#closed) return;
    const event = this.#decode(msg);
    if (!event) return;
    this.#received++;
    for (const handler of [...this.#handlers]) this.#deliver(handler, event);
  }

  /** Returns the remote event, or undefined for our own echo and for malformed messages. */
  #decode(msg: Msg): GatewayEvent | undefined {
    let value: unknown;
    try {
      value = JSON.parse(decoder.decode(msg.data));
    } catch {
      return this.#reject(msg, "not JSON");
    }
    if (typeof value !== "object" || value === null || Array.isArray(value)) {
      return this.#reject(msg, "not a JSON object");
    }
    const { origin, ...rest } = value as Record<string, unknown>;
    if (origin !== undefined && typeof origin !== "string") {
      return this.#reject(msg, "origin is not a string");
    }
    if (origin === this.origin) return undefined;
    const type = rest.type;
    if (typeof type !== "string") return this.#reject(msg, "type is not a string");
    const expected = expectedSubject({ ...rest, type });
    if (expected === undefined) return this.#reject(msg, `unknown event type ${type}`);
    if (expected !== msg.subject) {
      return this.#reject(msg, `a ${type} event belongs on ${expected}`);
    }
    return rest as GatewayEvent;
  }

  #reject(msg: Msg, reason: string): undefined {
    this.#malformed++;
    this.#logger.debug("dropped malformed NATS message", { subject: msg.subject, reason });
    return undefined;
  }
}
