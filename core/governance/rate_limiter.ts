/**
 * Token-bucket rate limiting per tenant, rule and tool.
 *
 * Each key has a bucket of `burst` tokens refilled at `perMinute` per minute; a call takes one.
 * A bucket that has refilled completely is indistinguishable from a new one, so idle full
 * buckets are dropped: memory follows the keys in active use, not every key ever seen.
 * @module
 */
import type { Clock } from "../support/clock.ts";

/** Options for {@link RateLimiter}. */
export interface RateLimiterOptions {
  clock: Clock;
  /**
   * Most buckets held; past it the least recently used bucket is dropped (that key starts
   * over with a full burst). Default 100 000.
   */
  maxKeys?: number;
}

/** The outcome of {@link RateLimiter.take}. */
export type RateLimitResult = { ok: true } | { ok: false; retryAfterMs: number };

/** What governance takes tokens from: this process's buckets, or the replicas' shared ones. */
export interface RateLimits {
  /** Takes one token from `key`'s bucket (see {@link RateLimiter.take}). */
  take(key: string, perMinute: number, burst: number): RateLimitResult | Promise<RateLimitResult>;
}

interface Bucket {
  tokens: number;
  /** Clock ms when `tokens` was last brought up to date. */
  updatedAt: number;
}

const MINUTE_MS = 60_000;
const DEFAULT_MAX_KEYS = 100_000;
/** Idle full buckets are swept at most this often (clock ms). */
const SWEEP_INTERVAL_MS = MINUTE_MS;
/** Float rounding allowance: waiting exactly retryAfterMs must yield a token. */
export const EPSILON = 1e-9;

/** Tokens regained over `elapsedMs` (never negative, should the clock step back). */
export function refill(elapsedMs: number, perMinute: number): number {
  return (Math.max(0, elapsedMs) * perMinute) / MINUTE_MS;
}

/** How long until an empty bucket holding `tokens` has one again. */
export function retryAfterMs(tokens: number, perMinute: number): number {
  return Math.max(1, Math.ceil(((1 - tokens) * MINUTE_MS) / perMinute));
}

/** Throws a RangeError naming a limit that is not one. */
export function checkLimit(perMinute: number, burst: number): void {
  if (!(Number.isFinite(perMinute) && perMinute > 0)) {
    throw new RangeError(`perMinute must be a positive number, got ${perMinute}`);
  }
  if (!(Number.isFinite(burst) && burst >= 1)) {
    throw new RangeError(`burst must be at least 1, got ${burst}`);
  }
}

/** The bucket key for a tenant, a rate-limit rule (its glob) and a tool. */
export function rateLimitKey(tenant: string, rule: string, tool: string): string {
  // NUL separates the parts: tenant ids, policy globs and tool names have no use for it.
  return `${tenant}\0${rule}\0${tool}`;
}

/** Token buckets keyed by {@link rateLimitKey}. */
export class RateLimiter implements RateLimits {
  readonly #clock: Clock;
  readonly #maxKeys: number;
  /** Map order is least recently used first: take() re-inserts the key it touches. */
  readonly #buckets = new Map<string, Bucket & { perMinute: number; burst: number }>();
  #sweptAt: number;

  constructor(options: RateLimiterOptions) {
    const maxKeys = options.maxKeys ?? DEFAULT_MAX_KEYS;
    if (!Number.isSafeInteger(maxKeys) || maxKeys <= 0) {
      throw new RangeError(`maxKeys must be a positive integer, got ${maxKeys}`);
    }
    this.#clock = options.clock;
    this.#maxKeys = maxKeys;
    this.#sweptAt = options.clock.now();
  }

  /** How many buckets are held (for tests and stats). */
  get size(): number {
    return this.#buckets.size;
  }

  /**
   * Takes one token from `key`'s bucket (capacity `burst`, refilled at `perMinute` per minute).
   * When empty, says how long until a token is back. Limits may change between calls (a policy
   * reload): the bucket keeps its tokens, capped at the new burst.
   */
  take(key: string, perMinute: number, burst: number): RateLimitResult {
    checkLimit(perMinute, burst);
    const now = this.#clock.now();
    if (now - this.#sweptAt >= SWEEP_INTERVAL_MS) this.#sweep(now);

    const previous = this.#buckets.get(key);
    const tokens = previous
      ? Math.min(burst, previous.tokens + refill(now - previous.updatedAt, perMinute))
      : burst;
    this.#buckets.delete(key);
    // The epsilon absorbs float rounding: waiting exactly retryAfterMs must yield a token.
    const ok = tokens >= 1 - EPSILON;
    this.#buckets.set(key, {
      tokens: ok ? Math.max(0, tokens - 1) : tokens,
      updatedAt: now,
      perMinute,
      burst,
    });
    if (this.#buckets.size > this.#maxKeys) this.#evictOldest();
    if (ok) return { ok: true };
    return { ok: false, retryAfterMs: retryAfterMs(tokens, perMinute) };
  }

  /** Drops buckets that have refilled to their burst: a fresh bucket would behave the same. */
  #sweep(now: number): void {
    this.#sweptAt = now;
    for (const [key, bucket] of this.#buckets) {
      const refilled = bucket.tokens + refill(now - bucket.updatedAt, bucket.perMinute);
      if (refilled >= bucket.burst - EPSILON) this.#buckets.delete(key);
    }
  }

  #evictOldest(): void {
    const oldest = this.#buckets.keys().next();
    if (!oldest.done) this.#buckets.delete(oldest.value);
  }
}
