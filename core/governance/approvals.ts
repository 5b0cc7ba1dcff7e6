/**
 * The approvals of the gateway: the queue of requests, the signed single-use tokens that grant
 * them, where redeemed nonces are remembered (in memory, or a shared store the bus provides), and
 * the file that keeps both across a restart (MCP_APPROVALS_PATH).
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import { ApprovalQueue } from "./approval_queue.ts";
import { ApprovalStore } from "./approval_store.ts";
import { ApprovalTokens } from "./approval_tokens.ts";
import { MemoryNonceStore, type NonceStore } from "./nonce_store.ts";

/** The governance settings approvals are built from. */
export interface ApprovalSettings {
  /** MCP_APPROVAL_SECRET; without one, tokens are valid only in this process. */
  approvalSecret?: string | undefined;
  approvalTtlSeconds: number;
  /** MCP_APPROVALS_PATH: where pending requests and used tokens are kept across restarts. */
  approvalsPath?: string | undefined;
  maxPendingApprovalsPerTenant: number;
  maxPendingApprovalsPerPrincipal?: number;
}

/** Cluster mode: approvals live in the shared bucket, and each record names its replica. */
export interface ApprovalCluster {
  replicaId: string;
}

/** The approval queue and tokens, with their nonces and their file. */
export class Approvals {
  readonly queue: ApprovalQueue;
  readonly tokens: ApprovalTokens;
  readonly #settings: ApprovalSettings;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #store: ApprovalStore | undefined;
  #nonces: NonceStore;

  readonly #clustered: boolean;

  constructor(
    settings: ApprovalSettings,
    deps: { clock: Clock; bus: EventBus; logger: Logger; cluster?: ApprovalCluster | undefined },
  ) {
    this.#clustered = deps.cluster !== undefined;
    this.#settings = settings;
    this.#clock = deps.clock;
    this.#logger = deps.logger;
    this.#nonces = new MemoryNonceStore({ clock: deps.clock });
    this.tokens = new ApprovalTokens({
      // Without a configured secret, tokens are valid only in this process (fine for one replica).
      secret: settings.approvalSecret ?? crypto.getRandomValues(new Uint8Array(32)),
      clock: deps.clock,
      ttlMs: settings.approvalTtlSeconds * 1000,
      // Indirect: NATS may replace the in-memory store at start, so replicas share single use.
      nonces: { consume: (nonce, expiresAt) => this.#consumeNonce(nonce, expiresAt) },
    });
    // Cluster mode keeps approvals in the shared bucket, not in a file of one replica.
    if (settings.approvalsPath !== undefined && !deps.cluster) {
      this.#store = new ApprovalStore({
        path: settings.approvalsPath,
        clock: deps.clock,
        logger: deps.logger.child("approvals"),
        snapshot: () => ({
          approvals: this.queue.records(),
          // A NATS store keeps its own nonces (JetStream KV); only the in-memory one needs a file.
          nonces: this.#nonces instanceof MemoryNonceStore ? this.#nonces.entries() : [],
        }),
      });
    }
    const store = this.#store;
    this.queue = new ApprovalQueue({
      clock: deps.clock,
      bus: deps.bus,
      tokens: this.tokens,
      ttlMs: settings.approvalTtlSeconds * 1000,
      maxPendingPerTenant: settings.maxPendingApprovalsPerTenant,
      ...(settings.maxPendingApprovalsPerPrincipal === undefined
        ? {}
        : { maxPendingPerPrincipal: settings.maxPendingApprovalsPerPrincipal }),
      ...(deps.cluster ? { replica: deps.cluster.replicaId } : {}),
      ...(store ? { onChange: () => store.save() } : {}),
    });
  }

  /** Remembers redeemed nonces in `store` (shared by replicas) instead of in memory. */
  useNonceStore(store: NonceStore): void {
    this.#nonces = store;
  }

  /** Restores the approvals and used nonces the last run kept; a corrupt file is set aside. */
  async load(): Promise<void> {
    const store = this.#store;
    if (!store) {
      if (this.#clustered) return; // Shared by the replicas (agent33_approvals), not a file.
      this.#logger.info(
        "approvals are kept in memory only: a restart forgets pending requests and used tokens " +
          "(set MCP_APPROVALS_PATH, or configure a fleet file, to keep them)",
      );
      return;
    }
    const loaded = await store.load();
    let approvals = loaded.approvals;
    if (this.#settings.approvalSecret === undefined) {
      // The tokens were signed with the last process's random key: none of them can verify now.
      const before = approvals.length;
      approvals = approvals.filter((r) => r.status !== "approved");
      if (approvals.length < before) {
        this.#logger.warn(
          `${
            before - approvals.length
          } approved request(s) from before the restart were dropped: ` +
            "MCP_APPROVAL_SECRET is not set, so their tokens were signed with a key that died with " +
            "the last process; callers must request approval again (set MCP_APPROVAL_SECRET to keep " +
            "tokens valid across restarts)",
        );
      }
    }
    const restored = this.queue.restore(approvals);
    if (this.#nonces instanceof MemoryNonceStore) {
      this.#nonces = new MemoryNonceStore({ clock: this.#clock, initial: loaded.nonces });
    }
    const pending = this.queue.list({ status: "pending" }).length;
    this.#logger.info(
      `approvals from ${store.path}: ${restored} request(s) (${pending} pending), ` +
        `${loaded.nonces.length} redeemed token(s) remembered, ${loaded.dropped} expired dropped`,
    );
  }

  /** Writes what is not yet on disk (the gateway stops). */
  async flush(): Promise<void> {
    await this.#store?.flush();
  }

  /** Redeems a token's nonce; with an approvals file, the use is on disk before the call runs. */
  async #consumeNonce(nonce: string, expiresAt: number): Promise<boolean> {
    const first = await this.#nonces.consume(nonce, expiresAt);
    // Fails closed: a use that cannot be recorded could be replayed after a restart.
    if (first && this.#store && this.#nonces instanceof MemoryNonceStore) {
      await this.#store.save();
    }
    return first;
  }
}
