/**
 * Single-use memory for approval-token nonces: the thing that makes an approval good for one
 * call. The in-memory store serves one gateway; replicas share a store on the bus (bus-nats
 * provides one on JetStream KV) so two replicas cannot both honour the same token.
 * @module
 */
import type { NonceStore } from "../bus/nonce_store.ts";
import type { Clock } from "../support/clock.ts";

export type { NonceStore } from "../bus/nonce_store.ts";

/** Options for {@link MemoryNonceStore}. */
export interface MemoryNonceStoreOptions {
  clock: Clock;
  /** Nonces an earlier process consumed, with their expiry (see approval_store.ts). */
  initial?: Iterable<{ nonce: string; expiresAt: number }>;
}

/** Below this many entries the store never sweeps: a sweep would cost more than it frees. */
const MIN_SWEEP_SIZE = 1024;

/** A {@link NonceStore} for one process; memory is bounded by the tokens still unexpired. */
export class MemoryNonceStore implements NonceStore {
  readonly #clock: Clock;
  readonly #expiry = new Map<string, number>();
  #sweepAt = MIN_SWEEP_SIZE;

  constructor(options: MemoryNonceStoreOptions) {
    this.#clock = options.clock;
    const now = this.#clock.now();
    for (const { nonce, expiresAt } of options.initial ?? []) {
      if (expiresAt > now) this.#expiry.set(nonce, expiresAt);
    }
    this.#sweepAt = Math.max(MIN_SWEEP_SIZE, this.#expiry.size * 2);
  }

  /** How many nonces are remembered (for tests and stats). */
  get size(): number {
    return this.#expiry.size;
  }

  /** The consumed nonces that still matter (their token has not expired), for persistence. */
  entries(): { nonce: string; expiresAt: number }[] {
    const now = this.#clock.now();
    const out: { nonce: string; expiresAt: number }[] = [];
    for (const [nonce, expiresAt] of this.#expiry) {
      if (expiresAt > now) out.push({ nonce, expiresAt });
    }
    return out;
  }

  consume(nonce: string, expiresAt: number): Promise<boolean> {
    const now = this.#clock.now();
    const seenUntil = this.#expiry.get(nonce);
    if (seenUntil !== undefined && seenUntil > now) return Promise.resolve(false);
    // An expired nonce is refused too: nothing may be redeemed after its token expires, and a
    // nonce that is forgotten at once could otherwise be "first" again and again.
    if (!(expiresAt > now)) return Promise.resolve(false);
    this.#expiry.set(nonce, expiresAt);
    if (this.#expiry.size >= this.#sweepAt) this.#sweep(now);
    return Promise.resolve(true);
  }

  /**
   * Drops expired nonces. Runs when the map doubles since the last sweep, so each consume pays
   * amortized O(1) and the map never holds more than twice the live nonces (plus a floor).
   */
  #sweep(now: number): void {
    for (const [nonce, expiresAt] of this.#expiry) {
      if (expiresAt <= now) this.#expiry.delete(nonce);
    }
    this.#sweepAt = Math.max(MIN_SWEEP_SIZE, this.#expiry.size * 2);
  }
}
