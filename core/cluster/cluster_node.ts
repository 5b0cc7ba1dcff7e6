/**
 * This replica as a member of the cluster (MCP_CLUSTER): its shared fleet and policies and its
 * heartbeat, started and stopped together. The kernel builds one with {@link createClusterNode}
 * and calls it at the few points of its start and stop where cluster mode differs from one
 * process.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { SharedState } from "../bus/shared_state.ts";
import type { GatewayConfig } from "../config/config.ts";
import { type ReplicaRecord, ReplicaRegistry } from "./replica_registry.ts";
import { SharedConfig } from "./shared_config.ts";
import { MountedConfig } from "./mounted_config.ts";
import type { ClusterConfigSource, SharedConfigTarget } from "./config_source.ts";

/** What the cluster section of `/v1/operator/status` shows. */
export interface ClusterStatus {
  /** The fleet and policy revisions this replica runs. */
  fleetRevision: number;
  policyRevision: number;
  /** Every replica with a fresh heartbeat, this one included, by id. */
  replicas: ReplicaRecord[];
}

/** What a {@link ClusterNode} is built from. */
export interface ClusterNodeOptions {
  config: GatewayConfig;
  state: SharedState;
  target: SharedConfigTarget;
  bus: Pick<EventBus, "publish">;
  logger: Logger;
  clock: Clock;
  /** How this replica's upstreams are, for its heartbeat. */
  fleetSummary: () => ReplicaRecord["fleet"];
}

/** One replica's part in the cluster. */
export class ClusterNode {
  /** Where the fleet and policies come from: the shared bucket, or the mounted files. */
  readonly config: ClusterConfigSource;
  readonly replicas: ReplicaRegistry;
  readonly replicaId: string;

  constructor(options: ClusterNodeOptions) {
    const { config, state, logger, clock } = options;
    this.replicaId = config.cluster!.replicaId;
    const paths = {
      ...(config.proxy.configPath === undefined ? {} : { fleetPath: config.proxy.configPath }),
      policyPath: config.policyPath,
    };
    const source = { target: options.target, bus: options.bus, clock, ...paths };
    this.config = config.cluster!.configSource === "mounted"
      ? new MountedConfig({ ...source, logger: logger.child("mounted-config") })
      : new SharedConfig({
        ...source,
        state,
        replicaId: this.replicaId,
        logger: logger.child("shared-config"),
      });
    this.replicas = new ReplicaRegistry({
      state,
      replicaId: this.replicaId,
      clock,
      logger: logger.child("replicas"),
      intervalMs: config.cluster!.heartbeatMs,
      snapshot: () => {
        const { rejected, digests } = this.config;
        return {
          fleetRevision: this.config.fleetRevision,
          policyRevision: this.config.policyRevision,
          fleet: options.fleetSummary(),
          ...(rejected.fleet || rejected.policies ? { rejected } : {}),
          ...(digests?.fleet || digests?.policies ? { digests } : {}),
        };
      },
    });
  }

  /** Once serving: applies later revisions of the shared documents and registers the heartbeat. */
  async started(url?: string): Promise<void> {
    await this.config.watch();
    await this.replicas.start(url);
  }

  /** A stop has begun: the heartbeat says draining, so operators and tools see it go. */
  draining(): Promise<void> {
    return this.replicas.drain();
  }

  /** Stops applying and beating; deletes the heartbeat so the others stop listing this replica. */
  async stop(): Promise<void> {
    this.config.close();
    await this.replicas.stop();
  }

  /** The cluster as the heartbeats say, for the status route. */
  async status(): Promise<ClusterStatus> {
    return {
      fleetRevision: this.config.fleetRevision,
      policyRevision: this.config.policyRevision,
      replicas: await this.replicas.list(),
    };
  }
}

/** This replica's cluster membership, when the kernel has shared state (MCP_CLUSTER). */
export function createClusterNode(options: ClusterNodeOptions): ClusterNode {
  return new ClusterNode(options);
}
