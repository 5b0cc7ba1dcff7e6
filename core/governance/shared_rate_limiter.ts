/**
 * SharedRateLimiter: the policy's rate limits counted across replicas (cluster mode). Each
 * (tenant, rule, tool) is one token bucket in the shared `agent33_rate_limits` bucket, updated by
 * compare-and-set, so N calls a minute means N across every replica, exactly.
 *
 * Cost: an allowed call is one KV write (the entry as this replica last wrote or read it is
 * cached, so a replica that is alone on a key never reads first; a conflict costs a read and
 * another try). A refused call costs nothing: the cached state is an upper bound of the shared
 * one (other replicas only take tokens; refill is a function of time), so an empty cached
 * bucket is empty. Measured figures are in docs/scale-out.md.
 *
 * When the bucket cannot be reached (or answers slower than `timeoutMs`), calls are decided by
 * this replica's share of each limit — perMinute/R and ⌊burst/R⌋ (at least 1) for R live
 * replicas — for `retryMs`, then the bucket is tried again; the outage is logged once and counted
 * in {@link SharedRateLimiter.stats}. It never lets calls through unlimited.
 * @module
 */
import { z } from "zod";
import {
  decodeJson,
  encodeJson,
  type SharedBucket,
  type SharedState,
} from "../bus/shared_state.ts";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import { sha256HexSync } from "./canonical_json.ts";
import {
  checkLimit,
  EPSILON,
  RateLimiter,
  type RateLimitResult,
  type RateLimits,
  refill,
  retryAfterMs,
} from "./rate_limiter.ts";

/** The bucket the replicas count rate limits in. */
export const RATE_LIMITS_BUCKET = "agent33_rate_limits";
/**
 * A counter idle this long is forgotten, which is a full bucket again: right for every limit
 * whose bucket refills within a day (burst ≤ 1440 × perMinute).
 */
const COUNTER_TTL_MS = 24 * 60 * 60 * 1000;
/** A cached counter older than this is read again rather than trusted to still exist. */
const CACHE_TRUST_MS = COUNTER_TTL_MS / 2;
const DEFAULT_TIMEOUT_MS = 250;
const DEFAULT_RETRY_MS = 5_000;
const MAX_ATTEMPTS = 8;
const MAX_CACHED = 100_000;

const COUNTER = z.object({ tokens: z.number().min(0), updatedAt: z.number() }).strict();

interface Cached {
  tokens: number;
  updatedAt: number;
  /** 0: absent from the bucket (create, not update). */
  revision: number;
}

/** Options of {@link SharedRateLimiter}. */
export interface SharedRateLimiterOptions {
  clock: Clock;
  logger: Logger;
  /** How many replicas are live now (at least 1 is assumed): the outage share divides by it. */
  replicas: () => number;
  /** A bucket operation slower than this decides the call by the share; default 250 ms. */
  timeoutMs?: number;
  /** After a failure, how long the share decides before the bucket is tried again; default 5 s. */
  retryMs?: number;
}

/** Counters of a {@link SharedRateLimiter}. */
export interface SharedRateLimiterStats {
  /** Calls decided on the shared counters. */
  shared: number;
  /** Compare-and-set rounds lost to another replica. */
  conflicts: number;
  /** Calls decided by this replica's share because the bucket was unreachable. */
  fallbacks: number;
  /** Times the bucket became unreachable. */
  outages: number;
}

/** Rate limits over the replicas' shared bucket, with this replica's share as the fallback. */
export class SharedRateLimiter implements RateLimits {
  readonly #options: SharedRateLimiterOptions;
  readonly #timeoutMs: number;
  readonly #retryMs: number;
  readonly #fallback: RateLimiter;
  readonly #cache = new Map<string, Cached>();
  /** Calls on one key wait for each other here: only other replicas' writes can conflict. */
  readonly #queues = new Map<string, Promise<unknown>>();
  #bucket: SharedBucket | undefined;
  #degradedUntil = Number.NEGATIVE_INFINITY;
  #stats: SharedRateLimiterStats = { shared: 0, conflicts: 0, fallbacks: 0, outages: 0 };

  constructor(options: SharedRateLimiterOptions) {
    this.#options = options;
    this.#timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.#retryMs = options.retryMs ?? DEFAULT_RETRY_MS;
    this.#fallback = new RateLimiter({ clock: options.clock });
  }

  /** Opens the shared bucket (and returns it); until then calls are decided by the share. */
  async open(shared: SharedState): Promise<SharedBucket> {
    this.#bucket = await shared.bucket(RATE_LIMITS_BUCKET, { ttlMs: COUNTER_TTL_MS });
    return this.#bucket;
  }

  /** Counters (for metrics and tests). */
  stats(): SharedRateLimiterStats {
    return { ...this.#stats };
  }

  async take(key: string, perMinute: number, burst: number): Promise<RateLimitResult> {
    checkLimit(perMinute, burst);
    const now = this.#options.clock.now();
    const bucket = this.#bucket;
    if (!bucket || now < this.#degradedUntil) return this.#share(key, perMinute, burst);
    // Hashed: a key of any length (tenant, glob, tool name) is one short, safe token.
    const counter = "limit." + sha256HexSync(key);
    const previous = this.#queues.get(counter) ?? Promise.resolve();
    const turn = previous.then(() => this.#decide(bucket, counter, key, perMinute, burst));
    const settled = turn.catch(() => {});
    this.#queues.set(counter, settled);
    try {
      return await turn;
    } finally {
      if (this.#queues.get(counter) === settled) this.#queues.delete(counter);
    }
  }

  async #decide(
    bucket: SharedBucket,
    counter: string,
    key: string,
    perMinute: number,
    burst: number,
  ): Promise<RateLimitResult> {
    const now = this.#options.clock.now();
    if (now < this.#degradedUntil) return this.#share(key, perMinute, burst);
    let timer: { cancel(): void } | undefined;
    try {
      const result = await Promise.race([
        this.#takeShared(bucket, counter, perMinute, burst, now),
        new Promise<never>((_, reject) => {
          timer = this.#options.clock.setTimeout(
            () => reject(new Error(`no answer within ${this.#timeoutMs} ms`)),
            this.#timeoutMs,
          );
        }),
      ]);
      if (this.#degradedUntil > Number.NEGATIVE_INFINITY) {
        this.#degradedUntil = Number.NEGATIVE_INFINITY;
        this.#options.logger.info(`rate limits are counted across replicas again`);
      }
      this.#stats.shared++;
      return result;
    } catch (error) {
      this.#degrade(now, error);
    } finally {
      timer?.cancel();
    }
    return this.#share(key, perMinute, burst);
  }

  /** One call on the shared counter. */
  async #takeShared(
    bucket: SharedBucket,
    key: string,
    perMinute: number,
    burst: number,
    now: number,
  ): Promise<RateLimitResult> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      let cached = this.#cache.get(key);
      if (!cached || now - cached.updatedAt > CACHE_TRUST_MS) {
        cached = await this.#read(bucket, key, burst, now);
      }
      const tokens = Math.min(burst, cached.tokens + refill(now - cached.updatedAt, perMinute));
      if (tokens < 1 - EPSILON) return { ok: false, retryAfterMs: retryAfterMs(tokens, perMinute) };
      const next = { tokens: Math.max(0, tokens - 1), updatedAt: now };
      const revision = cached.revision === 0
        ? await bucket.create(key, encodeJson(next))
        : await bucket.update(key, encodeJson(next), cached.revision);
      if (revision !== null) {
        this.#remember(key, { ...next, revision });
        return { ok: true };
      }
      this.#stats.conflicts++;
      this.#cache.delete(key);
    }
    // Other replicas kept winning: refused (the safe side), to be retried in a moment.
    return { ok: false, retryAfterMs: 1_000 };
  }

  async #read(bucket: SharedBucket, key: string, burst: number, now: number): Promise<Cached> {
    const entry = await bucket.get(key);
    if (!entry) return { tokens: burst, updatedAt: now, revision: 0 };
    let parsed: ReturnType<typeof COUNTER.safeParse> | undefined;
    try {
      parsed = COUNTER.safeParse(decodeJson(entry.value));
    } catch {
      // Not JSON: handled below.
    }
    if (parsed?.success) return { ...parsed.data, revision: entry.revision };
    // A malformed counter is overwritten as empty: a bad entry must not open the limit.
    this.#options.logger.warn(`rate limits: counter ${key} is malformed; it starts empty`);
    return { tokens: 0, updatedAt: now, revision: entry.revision };
  }

  #remember(key: string, cached: Cached): void {
    this.#cache.delete(key);
    this.#cache.set(key, cached);
    if (this.#cache.size > MAX_CACHED) this.#cache.delete(this.#cache.keys().next().value!);
  }

  /** This replica's share of the limit: what decides while the shared counters cannot. */
  #share(key: string, perMinute: number, burst: number): RateLimitResult {
    this.#stats.fallbacks++;
    const replicas = Math.max(1, Math.floor(this.#options.replicas()));
    return this.#fallback.take(
      key,
      perMinute / replicas,
      Math.max(1, Math.floor(burst / replicas)),
    );
  }

  #degrade(now: number, error: unknown): void {
    if (this.#degradedUntil === Number.NEGATIVE_INFINITY) {
      this.#stats.outages++;
      this.#options.logger.warn(
        `rate limits cannot be counted across replicas (bucket ${RATE_LIMITS_BUCKET}: ${
          (error as Error).message
        }); each replica enforces its share (1/${
          Math.max(1, Math.floor(this.#options.replicas()))
        } of every limit) until NATS JetStream answers again`,
      );
    }
    this.#degradedUntil = now + this.#retryMs;
    this.#cache.clear();
  }
}
