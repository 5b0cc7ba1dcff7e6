/**
 * RefreshPacer: how often an upstream's list_changed may make the gateway fetch its lists again.
 * An upstream may notify as often as it likes (one did after every tools/list, with 2,000 new
 * names each time): a fetch per notification, or even one right after another, spent the
 * gateway's event loop on that upstream (another upstream's p95 went 8.6 → 283 ms) and told
 * every client its lists changed ~28 times a second.
 *
 * So a refresh is followed by a pause; notifications that arrive during a refresh or a pause are
 * coalesced into one refresh at the pause's end (none is lost: that refresh starts after the last
 * notification, so it reads the upstream's latest lists). The pause doubles, up to
 * {@link REFRESH_MAX_PAUSE_MS}, while every refresh finds the lists changed again and the
 * upstream notifies again within the pause; it is back to {@link REFRESH_MIN_PAUSE_MS} once a
 * pause passes with no notification or a refresh finds nothing changed.
 * @module
 */
import { type Clock, type Deadline, deadline } from "../support/clock.ts";
import type { UpstreamCatalog } from "./catalog_fetch.ts";

/** The pause after a refresh, while an upstream is calm. */
export const REFRESH_MIN_PAUSE_MS = 1_000;
/** The longest pause, reached while an upstream changes its lists on every refresh. */
export const REFRESH_MAX_PAUSE_MS = 30_000;

/** Options of {@link RefreshPacer}. */
export interface RefreshPacerOptions {
  clock: Clock;
  /** Fetches the lists; resolves true when they differ from the ones it replaced. */
  refresh: () => Promise<boolean>;
  minPauseMs?: number;
  maxPauseMs?: number;
}

/** Paces the refreshes one upstream's list_changed notifications ask for. */
export class RefreshPacer {
  #options: RefreshPacerOptions;
  #min: number;
  #max: number;
  #pauseMs: number;
  #busy = false;
  #pause: Deadline | undefined;
  #asked = false;
  #closed = false;

  constructor(options: RefreshPacerOptions) {
    this.#options = options;
    this.#min = options.minPauseMs ?? REFRESH_MIN_PAUSE_MS;
    this.#max = options.maxPauseMs ?? REFRESH_MAX_PAUSE_MS;
    this.#pauseMs = this.#min;
  }

  /** The pause that follows the current or last refresh (for tests and status). */
  get pauseMs(): number {
    return this.#pauseMs;
  }

  /** An upstream's list_changed: refreshes now if idle, else once the refresh or pause is over. */
  request(): void {
    if (this.#closed) return;
    if (this.#busy || this.#pause) {
      this.#asked = true;
      return;
    }
    this.#run(false);
  }

  /** Stops pacing (the connection is gone): a pending refresh is dropped with it. */
  close(): void {
    this.#closed = true;
    this.#pause?.cancel();
    this.#pause = undefined;
  }

  #run(afterPause: boolean): void {
    this.#busy = true;
    this.#asked = false;
    this.#options.refresh().catch(() => false).then((changed) => {
      this.#busy = false;
      if (this.#closed) return;
      // Changed again, and asked for again within the pause: an upstream that does not settle.
      this.#pauseMs = afterPause && changed ? Math.min(this.#pauseMs * 2, this.#max) : this.#min;
      const pause = this.#pause = deadline(this.#options.clock, this.#pauseMs);
      pause.expired.then(() => {
        if (this.#pause !== pause) return;
        this.#pause = undefined;
        if (this.#asked) this.#run(true);
        else this.#pauseMs = this.#min;
      });
    });
  }
}

/** Whether two fetches of an upstream's lists differ (what makes a pause grow). */
export function catalogsDiffer(a: UpstreamCatalog, b: UpstreamCatalog): boolean {
  return JSON.stringify(a) !== JSON.stringify(b);
}
