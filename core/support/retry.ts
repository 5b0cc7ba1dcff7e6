/**
 * Trying a step again while it fails in a way that passes on its own: the one retry loop, for
 * the cluster's start steps (a fixed number of tries) and for opening a NATS bucket while a fresh
 * cluster forms (for a while). Pauses are on the injected clock.
 * @module
 */
import { type Clock, pause } from "./clock.ts";

/** How {@link retry} tries a step again. */
export interface RetryPolicy {
  clock: Clock;
  /** Whether `error` may pass when tried again; any other is thrown at once. */
  transient(error: unknown): boolean;
  /** The pause after failed try number `attempt` (1, 2, …), in ms. */
  pauseMs(attempt: number): number;
  /** Tries at most this many times. */
  attempts?: number;
  /** Tries no more once this much time has passed since the first try. */
  withinMs?: number;
  /** Told of each failed try that will be tried again (to log it, or reset what it used). */
  retrying(error: unknown, attempt: number): void;
}

/** Runs `step`, again after a pause while it fails transiently, within the policy's bounds. */
export async function retry<T>(step: () => Promise<T>, policy: RetryPolicy): Promise<T> {
  const { clock, attempts = Infinity } = policy;
  const giveUpAt = policy.withinMs === undefined ? Infinity : clock.now() + policy.withinMs;
  for (let attempt = 1;; attempt++) {
    try {
      return await step();
    } catch (error) {
      if (!policy.transient(error) || attempt >= attempts || clock.now() >= giveUpAt) throw error;
      policy.retrying(error, attempt);
      await pause(clock, policy.pauseMs(attempt));
    }
  }
}
