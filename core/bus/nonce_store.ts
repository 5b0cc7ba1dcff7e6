/**
 * What keeps approval-token nonces single-use: the in-process store (governance/nonce_store.ts)
 * serves one gateway, a bus that shares state between replicas (bus-nats, on JetStream KV)
 * provides one for all of them, so two replicas cannot both honour the same token. Declared here,
 * under the bus, because the bus selection picks which one serves.
 * @module
 */

/** Remembers consumed nonces until they expire. */
export interface NonceStore {
  /**
   * Marks `nonce` used; true the first time only. `expiresAt` (epoch ms) is when the token
   * carrying it expires: the store must remember the nonce at least until then. Rejects when
   * the store cannot decide (e.g. unreachable): callers must then refuse the token.
   */
  consume(nonce: string, expiresAt: number): Promise<boolean>;
}
