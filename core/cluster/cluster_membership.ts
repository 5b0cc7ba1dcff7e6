/**
 * This replica's membership as the kernel holds it in cluster mode: the shared state the bus
 * offers, the {@link ClusterNode} (shared fleet, policies, heartbeat) and the shared Streamable
 * HTTP session records, opened by the first transport asking and closed in order at stop.
 * @module
 */
import type { SharedState } from "../bus/shared_state.ts";
import { SharedSessions } from "../mcp/shared_sessions.ts";
import { type ClusterNode, type ClusterNodeOptions, createClusterNode } from "./cluster_node.ts";
import { retryStart } from "./start_retry.ts";

/** One replica's part in the cluster, opened at start and closed at stop. */
export class ClusterMembership {
  readonly state: SharedState;
  readonly node: ClusterNode;
  readonly #options: ClusterNodeOptions;
  #sessions: Promise<SharedSessions> | undefined;

  /**
   * Joins the cluster at start: opens the shared governance state, then the session records,
   * each tried again while the shared state fails (replicas starting together on a fresh NATS
   * cluster time out creating the same buckets). A failure fails the start: a replica that cannot
   * hold sessions or share approvals must not serve.
   */
  static async join(
    gateway:
      & Pick<ClusterNodeOptions, "config" | "bus" | "logger" | "clock">
      & ClusterNodeOptions["target"],
    state: SharedState,
    parts: Pick<ClusterNodeOptions, "fleetSummary"> & {
      governance?: { open(state: SharedState): Promise<void> } | undefined;
    },
  ): Promise<ClusterMembership> {
    const { config, bus, logger, clock } = gateway;
    if (parts.governance) {
      const governance = parts.governance;
      await retryStart("governance state", () => governance.open(state), { clock, logger });
    }
    const membership = new ClusterMembership({
      config,
      target: gateway,
      bus,
      logger,
      clock,
      state,
      fleetSummary: parts.fleetSummary,
    });
    await membership.sessions();
    return membership;
  }

  constructor(options: ClusterNodeOptions) {
    this.#options = options;
    this.state = options.state;
    this.node = createClusterNode(options);
  }

  /**
   * The shared Streamable HTTP session records, opened once (tried again while the shared state
   * fails: replicas starting together on a fresh NATS cluster can time out creating the bucket,
   * and a transport whose factory fails is skipped, leaving a replica without /mcp).
   */
  sessions(): Promise<SharedSessions> {
    const { config, clock, logger } = this.#options;
    return this.#sessions ??= retryStart("session records", () =>
      SharedSessions.open(this.state, {
        ttlMs: config.server.httpSessionIdleMs,
        replicaId: config.cluster!.replicaId,
        clock,
        logger: logger.child("sessions"),
      }), { clock, logger });
  }

  /** Waits for `draining` (the heartbeat said so), then stops the node: no longer listed. */
  async leave(draining: Promise<unknown> | undefined): Promise<void> {
    await draining;
    await this.node.stop();
  }

  /** Closes the session records, then the shared state. */
  async close(): Promise<void> {
    (await this.#sessions?.catch(() => undefined))?.close();
    await this.state.close();
  }
}

/** How many upstreams run, and how many are up or failed, for the replica's heartbeat. */
export function fleetSummary(servers: readonly { state: string }[]): {
  servers: number;
  ready: number;
  failed: number;
} {
  const count = (states: string[]) => servers.filter((s) => states.includes(s.state)).length;
  return {
    servers: servers.length,
    ready: count(["READY", "DEGRADED"]),
    failed: count(["FAILED"]),
  };
}
