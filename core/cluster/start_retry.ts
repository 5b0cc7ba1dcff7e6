/**
 * Start steps that read or open the shared state, tried again when it fails: on a fresh NATS
 * cluster, replicas starting together create the same buckets at once, and the first reads can
 * time out while a bucket's stream elects its leader. A `GatewayError` is retried only when it
 * says the shared state is unreachable (`internal`); any other (an invalid document, a missing
 * secret) is not: trying again changes nothing.
 * @module
 */
import { type Clock, pause } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";

/** A start step is tried this many times, waiting 1, 2, 3… × START_RETRY_MS between tries. */
export const START_ATTEMPTS = 5;
const START_RETRY_MS = 500;

/** Runs `step`, again after a pause on `clock` while the shared state fails, up to START_ATTEMPTS. */
export async function retryStart<T>(
  what: string,
  step: () => Promise<T>,
  context: { clock: Clock; logger: Logger; onRetry?: () => void },
): Promise<T> {
  for (let attempt = 1;; attempt++) {
    try {
      return await step();
    } catch (error) {
      const final = error instanceof GatewayError && error.code !== "internal";
      if (final || attempt >= START_ATTEMPTS) throw error;
      context.logger.warn(
        `reading the shared ${what} failed (attempt ${attempt} of ${START_ATTEMPTS}); trying again`,
        { error: String(error) },
      );
      context.onRetry?.();
      await pause(context.clock, START_RETRY_MS * attempt);
    }
  }
}
