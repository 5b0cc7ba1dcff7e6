/**
 * A bound on how many lines one noisy source (an upstream's stderr, its log notifications that
 * reach no caller) may write to the operator's log: a hostile or broken upstream must not turn
 * the gateway's log into its own disk and CPU sink. Lines past the bound in a one-second window
 * are counted, and the count is reported once when the window ends, by the clock's timer, so a
 * burst that stops is still summed up.
 * @module
 */
import type { Clock, TimerHandle } from "./clock.ts";

/** How long one window of the bound lasts. */
export const LOG_WINDOW_MS = 1000;

/** Admits at most `perWindow` lines each window; reports what it held back. */
export class LogRateWindow {
  readonly #perWindow: number;
  readonly #clock: Clock;
  readonly #onSuppressed: (lines: number) => void;
  #startedAt = -Infinity;
  #lines = 0;
  #suppressed = 0;
  #report: TimerHandle | undefined;

  /** `onSuppressed(n)` is told, once a window ends, that `n` lines of it were not admitted. */
  constructor(perWindow: number, clock: Clock, onSuppressed: (lines: number) => void) {
    this.#perWindow = perWindow;
    this.#clock = clock;
    this.#onSuppressed = onSuppressed;
  }

  /** Whether one more line may be logged now; counts it as suppressed when not. */
  admit(): boolean {
    const now = this.#clock.now();
    if (now - this.#startedAt >= LOG_WINDOW_MS) {
      this.#flush();
      this.#startedAt = now;
      this.#lines = 0;
    }
    if (this.#lines < this.#perWindow) {
      this.#lines++;
      return true;
    }
    if (this.#suppressed++ === 0) {
      this.#report = this.#clock.setTimeout(
        () => this.#flush(),
        Math.max(0, this.#startedAt + LOG_WINDOW_MS - now),
      );
    }
    return false;
  }

  /** Reports what is held back now and stops the timer (a closing source). */
  close(): void {
    this.#flush();
  }

  #flush(): void {
    this.#report?.cancel();
    this.#report = undefined;
    const held = this.#suppressed;
    this.#suppressed = 0;
    if (held > 0) this.#onSuppressed(held);
  }
}
