/**
 * A promise raced against a timer from the injected clock, so tests drive timeouts without sleeping.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";

/** Resolves as `promise` does, or rejects with a `timeout` GatewayError after `ms` on `clock`. */
export function withTimeout<T>(
  promise: Promise<T>,
  ms: number,
  clock: Clock,
  message: string,
  data: Record<string, unknown> = {},
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = clock.setTimeout(
      () => reject(new GatewayError("timeout", message, { timeoutMs: ms, ...data })),
      ms,
    );
    promise.then(
      (value) => {
        timer.cancel();
        resolve(value);
      },
      (error) => {
        timer.cancel();
        reject(error);
      },
    );
  });
}
