/**
 * Start steps that read or open the shared state, tried again when it fails: on a fresh NATS
 * cluster, replicas starting together create the same buckets at once, and the first reads can
 * time out while a bucket's stream elects its leader. A `GatewayError` is retried only when it
 * says the shared state is unreachable (`internal`); any other (an invalid document, a missing
 * secret) is not: trying again changes nothing.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { retry } from "../support/retry.ts";

/** A start step is tried this many times, waiting 1, 2, 3… × START_RETRY_MS between tries. */
export const START_ATTEMPTS = 5;
const START_RETRY_MS = 500;
/**
 * ... and not again once this long has passed since its first try. A step that opens a bucket
 * tries for 30 s itself while a cluster forms: without this bound a shared state that never
 * answers failed a start only after five of those, minutes later.
 */
export const START_BUDGET_MS = 30_000;

/**
 * Runs `step`, again after a pause on `clock` while the shared state fails, up to
 * {@link START_ATTEMPTS} tries within {@link START_BUDGET_MS}.
 */
export function retryStart<T>(
  what: string,
  step: () => Promise<T>,
  context: { clock: Clock; logger: Logger; onRetry?: () => void },
): Promise<T> {
  return retry(step, {
    clock: context.clock,
    attempts: START_ATTEMPTS,
    withinMs: START_BUDGET_MS,
    transient: (error) => !(error instanceof GatewayError && error.code !== "internal"),
    pauseMs: (attempt) => START_RETRY_MS * attempt,
    retrying: (error, attempt) => {
      context.logger.warn(
        `reading the shared ${what} failed (attempt ${attempt} of ${START_ATTEMPTS}); trying again`,
        { error: String(error) },
      );
      context.onRetry?.();
    },
  });
}
