/**
 * Flow control between an upstream's relay and the kernel: the relay stops reading its upstream
 * once it has posted a bounded amount the kernel has not yet taken, and reads on when the kernel
 * hands the credit back. `postMessage` between threads has no backpressure of its own, so without
 * this an upstream writing as fast as it can (a log flood) queued its output in the gateway
 * without bound (3 GB in a minute) and starved every other upstream's calls behind the backlog.
 * With it the child blocks on its own full pipe, which is where the pressure belongs.
 *
 * The unit is a message's text length plus a fixed overhead, so both many small messages and a
 * few large ones are bounded. Order is kept and nothing is dropped: an answer queued behind a
 * flood still arrives, once the kernel has taken what came before it.
 * @module
 */
import type { WorkerToKernel } from "../proxy/worker_protocol.ts";
import type { Clock, TimerHandle } from "../support/clock.ts";

/** Credit a relay may have outstanding (posted, not yet taken by the kernel), in cost units. */
export const RELAY_WINDOW = 1 << 20;
/** The kernel returns credit once it has taken this much, so a return costs one post per 256 KiB. */
export const RELAY_CREDIT_BATCH = RELAY_WINDOW / 4;
/** What one message costs besides its text: the kernel's work per message is not only its bytes. */
const MESSAGE_OVERHEAD = 64;

/** What a message to the kernel costs; both sides compute it from the message itself. */
export function creditCost(message: WorkerToKernel | unknown): number {
  if (typeof message === "string") {
    // Frames of one post are newline-separated: each counts its overhead.
    return message.length + frames(message) * MESSAGE_OVERHEAD;
  }
  const line = message as { line?: unknown; preview?: unknown; size?: unknown } | null;
  // A message the relay holds as an object says how large it is (its JSON's length).
  if (typeof line?.size === "number" && Number.isSafeInteger(line.size) && line.size >= 0) {
    return line.size + MESSAGE_OVERHEAD;
  }
  const text = typeof line?.line === "string"
    ? line.line
    : typeof line?.preview === "string"
    ? line.preview
    : "";
  return text.length + MESSAGE_OVERHEAD;
}

/** The relay's side: spends credit on every post; its readers wait while none is left. */
export class RelayCredit {
  #outstanding = 0;
  #closed = false;
  #waiters: (() => void)[] = [];

  /** Counts a message posted to the kernel. */
  spend(message: WorkerToKernel): void {
    this.#outstanding += creditCost(message);
  }

  /** The kernel took `cost` worth of messages. */
  refund(cost: number): void {
    if (!Number.isFinite(cost) || cost <= 0) return;
    this.#outstanding = Math.max(0, this.#outstanding - cost);
    if (this.#outstanding < RELAY_WINDOW) this.#wake();
  }

  /** Undefined while credit is left; else a promise of the kernel returning some (or of close). */
  whenOpen(): Promise<void> | undefined {
    if (this.#closed || this.#outstanding < RELAY_WINDOW) return undefined;
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Releases every reader for good: the upstream is gone and its pipes are being drained. */
  close(): void {
    this.#closed = true;
    this.#wake();
  }

  #wake(): void {
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const wake of waiters) wake();
  }
}

/**
 * Messages a second one upstream's relay may sustain; beyond, credit comes back later. Above the
 * gateway's measured stdio throughput (~6,300 calls/s, docs/performance.md), so only a flood is
 * held; it also bounds the garbage a flood makes the kernel collect (RSS).
 */
export const RELAY_MESSAGES_PER_SECOND = 10_000;
/** Messages a relay may send at once above that rate (a call's burst of 10,000 notifications). */
export const RELAY_MESSAGE_BURST = 20_000;

/**
 * The kernel's side: counts what it took and returns it in batches through `post`, always from a
 * later macrotask and no faster than {@link RELAY_MESSAGES_PER_SECOND} sustained. The later task
 * is what lets the rest of the gateway run: messages from a worker that are ready at once are
 * taken one after another without the event loop turning (no timer, no socket is served), so a
 * relay whose credit came straight back kept the kernel's thread to itself.
 */
export class CreditReturn {
  readonly #clock: Clock;
  readonly #post: (cost: number) => void;
  #cost = 0;
  #messages = 0;
  #tokens = RELAY_MESSAGE_BURST;
  #filledAt: number;
  #timer: TimerHandle | undefined;
  #closed = false;

  /** `post(cost)` sends `{ type: "credit", cost }` to the relay; the waits run on `clock`. */
  constructor(clock: Clock, post: (cost: number) => void) {
    this.#clock = clock;
    this.#post = post;
    this.#filledAt = clock.now();
  }

  /**
   * Counts a message the kernel has finished with. The relay waits only with a full window
   * outstanding and less than a batch is held here without a return scheduled, so the rest is in
   * flight and its arrival schedules one: no deadlock.
   */
  taken(message: unknown): void {
    // A relay that is stopping may still deliver: nothing is returned to it, no timer is left.
    if (this.#closed) return;
    this.#cost += creditCost(message);
    this.#messages += frames(message);
    if (this.#cost < RELAY_CREDIT_BATCH || this.#timer !== undefined) return;
    const now = this.#clock.now();
    this.#tokens = Math.min(
      RELAY_MESSAGE_BURST,
      this.#tokens + (now - this.#filledAt) * RELAY_MESSAGES_PER_SECOND / 1000,
    );
    this.#filledAt = now;
    const short = this.#messages - this.#tokens;
    const delay = short > 0 ? Math.ceil(short * 1000 / RELAY_MESSAGES_PER_SECOND) : 0;
    this.#timer = this.#clock.setTimeout(() => this.#return(), delay);
  }

  /** Stops a scheduled return (the relay is gone). */
  close(): void {
    this.#closed = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #return(): void {
    this.#timer = undefined;
    this.#tokens -= this.#messages;
    const cost = this.#cost;
    this.#cost = 0;
    this.#messages = 0;
    this.#post(cost);
  }
}

function frames(message: unknown): number {
  if (typeof message !== "string") return 1;
  let count = 1;
  for (let at = message.indexOf("\n"); at !== -1; at = message.indexOf("\n", at + 1)) count++;
  return count;
}
