/**
 * A circuit breaker per upstream server: after repeated failures, calls fail fast with
 * `circuit_open` instead of piling onto a server that is down, and one probe call at a time
 * finds out when it is back.
 *
 * CLOSED lets calls through and counts consecutive failures; at the threshold it opens. OPEN
 * rejects at once until its backoff window has passed, then becomes HALF_OPEN, which lets exactly
 * one probe through: success closes the circuit, failure opens it again with a doubled window.
 * All time comes from the injected {@link Clock}; nothing here sets a timer, so the OPEN →
 * HALF_OPEN step happens on the first look at the breaker after the window has passed.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";

/** The three breaker states. */
export type BreakerState = "CLOSED" | "OPEN" | "HALF_OPEN";

/** What an observer learns about a transition: trips so far, and the window when it opened. */
export interface BreakerTransitionInfo {
  /** Consecutive openings without a successful probe in between. */
  trips: number;
  /** Set when the transition is to OPEN: the backoff window in milliseconds. */
  retryAfterMs?: number;
}

/** Options for {@link CircuitBreaker}. */
export interface CircuitBreakerOptions {
  /** The upstream server's id, named in errors. */
  server: string;
  /** Source of time for backoff windows. */
  clock: Clock;
  /** Consecutive failures that open the circuit. Default 5. */
  failureThreshold?: number;
  /** First backoff window in milliseconds. Default 30 000. */
  baseMs?: number;
  /** Longest backoff window in milliseconds. Default 600 000. */
  maxMs?: number;
  /** Whether an error thrown through {@link CircuitBreaker.execute} is the upstream's fault. Default: every error is. */
  isFailure?: (error: unknown) => boolean;
  /** Called after each state change; a throwing observer is ignored and cannot corrupt state. */
  onStateChange?: (from: BreakerState, to: BreakerState, info: BreakerTransitionInfo) => void;
}

/** Permission to make one call, from {@link CircuitBreaker.tryAcquire}; settle it exactly once. */
export interface BreakerPermit {
  ok: true;
  /** True when this call is the single HALF_OPEN probe. */
  probe: boolean;
  /** Reports the call's outcome to the breaker; later calls on this permit are ignored. */
  release(success: boolean): void;
  /** Ends the call without judging the upstream (cancelled, or the caller's own error): frees the probe slot. */
  abandon(): void;
}

/** A refusal from {@link CircuitBreaker.tryAcquire}, carrying the `circuit_open` error to report. */
export interface BreakerRefusal {
  ok: false;
  error: GatewayError;
}

/** A point-in-time view of a breaker, for status tools and logs. */
export interface BreakerSnapshot {
  state: BreakerState;
  trips: number;
  consecutiveFailures: number;
  retryAfterMs: number;
  /** When the circuit last opened (clock ms); present while OPEN or HALF_OPEN. */
  openedAt?: number;
}

type Internal =
  | { name: "CLOSED" }
  | { name: "OPEN"; openedAt: number; retryAt: number; cause: string }
  | { name: "HALF_OPEN"; openedAt: number; probing: boolean };

type HalfOpen = Extract<Internal, { name: "HALF_OPEN" }>;

/** A CLOSED / OPEN / HALF_OPEN circuit breaker for one upstream server. */
export class CircuitBreaker {
  /** The upstream server's id. */
  readonly server: string;
  readonly #clock: Clock;
  readonly #threshold: number;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #isFailure: (error: unknown) => boolean;
  readonly #onStateChange: CircuitBreakerOptions["onStateChange"];
  #state: Internal = { name: "CLOSED" };
  #failures = 0;
  #trips = 0;

  /** Creates a CLOSED breaker; throws RangeError on invalid options. */
  constructor(options: CircuitBreakerOptions) {
    const { failureThreshold = 5, baseMs = 30_000, maxMs = 600_000 } = options;
    if (!Number.isInteger(failureThreshold) || failureThreshold < 1) {
      throw new RangeError(
        `CircuitBreaker failureThreshold must be an integer of at least 1, received ${failureThreshold}`,
      );
    }
    if (!Number.isFinite(baseMs) || baseMs <= 0) {
      throw new RangeError(
        `CircuitBreaker baseMs must be a finite number greater than 0, received ${baseMs}`,
      );
    }
    if (!Number.isFinite(maxMs) || maxMs < baseMs) {
      throw new RangeError(
        `CircuitBreaker maxMs must be a finite number of at least baseMs (${baseMs}), received ${maxMs}`,
      );
    }
    this.server = options.server;
    this.#clock = options.clock;
    this.#threshold = failureThreshold;
    this.#baseMs = baseMs;
    this.#maxMs = maxMs;
    this.#isFailure = options.isFailure ?? (() => true);
    this.#onStateChange = options.onStateChange;
  }

  /** The current state; reports HALF_OPEN (and notifies observers) once the window has passed. */
  get state(): BreakerState {
    return this.#current().name;
  }

  /** Consecutive openings without a successful probe; 0 while CLOSED. */
  get trips(): number {
    return this.#trips;
  }

  /** Consecutive failures since the last success. */
  get consecutiveFailures(): number {
    return this.#failures;
  }

  /** ms until a probe is allowed (0 unless OPEN). */
  retryAfterMs(): number {
    const state = this.#current();
    return state.name === "OPEN" ? Math.max(0, state.retryAt - this.#clock.now()) : 0;
  }

  /** Runs fn through the breaker; throws circuit_open without calling fn when open. */
  async execute<T>(fn: () => Promise<T>): Promise<T> {
    const permit = this.tryAcquire();
    if (!permit.ok) throw permit.error;
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      if (this.#countsAsFailure(error)) permit.release(false);
      else permit.abandon();
      throw error;
    }
    permit.release(true);
    return result;
  }

  /** For callers that do the call themselves: a permit to settle when done, or the refusal. */
  tryAcquire(): BreakerPermit | BreakerRefusal {
    const state = this.#current();
    if (state.name === "OPEN" || (state.name === "HALF_OPEN" && state.probing)) {
      return { ok: false, error: this.#openError(state) };
    }
    if (state.name === "HALF_OPEN") {
      state.probing = true;
      return this.#permit(state);
    }
    return this.#permit(undefined);
  }

  /**
   * Records a successful call made outside the breaker (e.g. a health check).
   *
   * CLOSED: resets the failure count. HALF_OPEN: closes the circuit. OPEN: ends the wait early by
   * moving to HALF_OPEN, so the next real call is the probe; a cheap health check is evidence of
   * recovery but not proof that real calls work.
   */
  recordSuccess(): void {
    const state = this.#current();
    this.#failures = 0;
    if (state.name === "OPEN") {
      this.#transition({ name: "HALF_OPEN", openedAt: state.openedAt, probing: false });
    } else if (state.name === "HALF_OPEN") {
      this.#trips = 0;
      this.#transition({ name: "CLOSED" });
    }
  }

  /**
   * Records a failed call made outside the breaker (e.g. a health check).
   *
   * CLOSED: counts towards the threshold. HALF_OPEN: opens again with the next backoff. OPEN: only
   * counts; the window is neither extended nor restarted, so a periodic health check cannot keep
   * a server locked out longer than its backoff.
   */
  recordFailure(): void {
    const state = this.#current();
    this.#failures++;
    if (state.name === "HALF_OPEN") {
      this.#open("circuit open again after a failed recovery probe");
    } else if (state.name === "CLOSED" && this.#failures >= this.#threshold) {
      const plural = this.#failures === 1 ? "failure" : "failures";
      this.#open(`circuit open after ${this.#failures} consecutive ${plural}`);
    }
  }

  /** Manual restart by an operator: CLOSED, with no failures and no trips. */
  reset(): void {
    this.#failures = 0;
    this.#trips = 0;
    this.#transition({ name: "CLOSED" });
  }

  /** The state, counters and remaining window at this instant. */
  snapshot(): BreakerSnapshot {
    const state = this.#current();
    return {
      state: state.name,
      trips: this.#trips,
      consecutiveFailures: this.#failures,
      retryAfterMs: this.retryAfterMs(),
      ...(state.name === "CLOSED" ? {} : { openedAt: state.openedAt }),
    };
  }

  /** The state after applying the time-driven OPEN → HALF_OPEN step, if due. */
  #current(): Internal {
    const state = this.#state;
    if (state.name === "OPEN" && this.#clock.now() >= state.retryAt) {
      this.#transition({ name: "HALF_OPEN", openedAt: state.openedAt, probing: false });
    }
    return this.#state;
  }

  #open(cause: string): void {
    this.#trips++;
    const now = this.#clock.now();
    // 2 ** large overflows to Infinity, which min() turns into maxMs: no trip count is too big.
    const windowMs = Math.min(this.#baseMs * 2 ** (this.#trips - 1), this.#maxMs);
    this.#transition({ name: "OPEN", openedAt: now, retryAt: now + windowMs, cause }, windowMs);
  }

  /** Commits the new state first, then notifies, so a re-entrant observer sees a consistent breaker. */
  #transition(next: Internal, retryAfterMs?: number): void {
    const from = this.#state.name;
    this.#state = next;
    if (from === next.name || !this.#onStateChange) return;
    const info: BreakerTransitionInfo = retryAfterMs === undefined
      ? { trips: this.#trips }
      : { trips: this.#trips, retryAfterMs };
    try {
      this.#onStateChange(from, next.name, info);
    } catch {
      // Observers log and publish events; their bugs must not change whether upstream calls flow.
    }
  }

  #permit(probeOf: HalfOpen | undefined): BreakerPermit {
    let settled = false;
    const settle = (outcome: "success" | "failure" | "neutral") => {
      if (settled) return;
      settled = true;
      // Free the slot only if it is still this HALF_OPEN: a reset or a reopening since then
      // started a new period whose probe slot is not ours.
      if (probeOf && this.#state === probeOf) probeOf.probing = false;
      if (outcome === "success") this.recordSuccess();
      else if (outcome === "failure") this.recordFailure();
    };
    return {
      ok: true,
      probe: probeOf !== undefined,
      release: (success) => settle(success ? "success" : "failure"),
      abandon: () => settle("neutral"),
    };
  }

  #countsAsFailure(error: unknown): boolean {
    try {
      return this.#isFailure(error);
    } catch {
      // A classifier that cannot decide must not hide a failing upstream.
      return true;
    }
  }

  #openError(state: Exclude<Internal, { name: "CLOSED" }>): GatewayError {
    const retryAfterMs = state.name === "OPEN" ? Math.max(0, state.retryAt - this.#clock.now()) : 0;
    const detail = state.name === "OPEN"
      ? `${state.cause}); retry in ${formatDuration(retryAfterMs)}`
      : "circuit half-open, a recovery probe is in flight); retry shortly";
    return new GatewayError(
      "circuit_open",
      `Upstream "${this.server}" is unavailable (${detail}`,
      { server: this.server, retryAfterMs },
    );
  }
}

/** Whole seconds, rounded up so "retry in" is never too early: 30s, 2m, 4m 5s. */
function formatDuration(ms: number): string {
  const seconds = Math.ceil(ms / 1000);
  if (seconds < 60) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  const rest = seconds % 60;
  return rest === 0 ? `${minutes}m` : `${minutes}m ${rest}s`;
}
