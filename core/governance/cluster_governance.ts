/**
 * The governance state replicas share in cluster mode (MCP_CLUSTER): pending approvals
 * (`agent33_approvals`), rate-limit counters (`agent33_rate_limits`) and the scanner's pins and
 * quarantines (`agent33_pins`). The kernel creates it with the queue and opens it once the
 * shared state is up; without cluster mode none of this exists and nothing changes.
 * @module
 */
import type { SharedState } from "../bus/shared_state.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock, TimerHandle } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { SharedPins } from "./shared_pins.ts";
import type { ApprovalQueue } from "./approval_queue.ts";
import { SharedApprovalBackend } from "./shared_approval_backend.ts";
import { SharedRateLimiter } from "./shared_rate_limiter.ts";

/**
 * How often the live replicas are counted: the count is the rate limits' outage share, so it is
 * read while the shared state answers and the last count holds while it does not.
 */
const COUNT_EVERY_MS = 10_000;

/** What {@link createClusterGovernance} needs. */
export interface ClusterGovernanceOptions {
  approvals: ApprovalQueue;
  clock: Clock;
  logger: Logger;
  replicaId: string;
  /** MCP_APPROVAL_TTL_SECONDS in ms: how long requests wait and tokens live. */
  approvalTtlMs: number;
  /** Whether MCP_APPROVAL_SECRET is set: replicas can only verify each other's tokens with one. */
  approvalSecretSet: boolean;
  /** How many replicas are live now (the heartbeats of agent33_replicas). */
  countReplicas: () => Promise<number>;
}

/** The shared governance state of one replica. */
export interface ClusterGovernance {
  /** Rate limits counted across replicas (this replica's share until open, and in outages). */
  readonly rateLimiter: SharedRateLimiter;
  /** The scanner's shared pins and quarantines; set by open. */
  readonly pins: SharedPins | undefined;
  /** How many replicas are live, as last read (at least 1). */
  replicas(): number;
  /** Opens the buckets and shares the approval queue; fails start-up when it cannot. */
  open(shared: SharedState): Promise<void>;
  /** Stops the watches and the replica count. */
  close(): void;
}

/**
 * The shared governance state of this replica when `config` is in cluster mode, else undefined;
 * {@link ClusterGovernance.open} it at start, once the shared state is up.
 */
export function clusterGovernanceOf(
  config: GatewayConfig,
  parts: { approvals: ApprovalQueue; clock: Clock; logger: Logger },
  countReplicas: () => Promise<number>,
): ClusterGovernance | undefined {
  if (!config.cluster) return undefined;
  return createClusterGovernance({
    approvals: parts.approvals,
    clock: parts.clock,
    logger: parts.logger.child("cluster"),
    replicaId: config.cluster.replicaId,
    approvalTtlMs: config.governance.approvalTtlSeconds * 1000,
    approvalSecretSet: config.governance.approvalSecret !== undefined,
    countReplicas,
  });
}

/** The shared governance state for a replica; {@link ClusterGovernance.open} at start. */
export function createClusterGovernance(options: ClusterGovernanceOptions): ClusterGovernance {
  const { clock, logger } = options;
  let replicas = 1;
  let pins: SharedPins | undefined;
  let approvalsShared = false;
  let rateLimitsShared = false;
  let timer: TimerHandle | undefined;
  let closed = false;
  const rateLimiter = new SharedRateLimiter({
    clock,
    logger: logger.child("rate-limits"),
    replicas: () => replicas,
  });
  const count = async () => {
    try {
      replicas = Math.max(1, Math.floor(await options.countReplicas()));
    } catch {
      // The last count stands: it is what the outage share needs.
    }
    if (!closed) timer = clock.setTimeout(() => void count(), COUNT_EVERY_MS);
  };
  return {
    rateLimiter,
    get pins() {
      return pins;
    },
    replicas: () => replicas,
    async open(shared) {
      if (!options.approvalSecretSet) {
        throw new GatewayError(
          "config_invalid",
          "MCP_CLUSTER=true needs MCP_APPROVAL_SECRET, the same on every replica: a token " +
            "approved on one replica must verify on the others",
        );
      }
      // Each part is opened once: a start that failed half way (a bucket timing out on a fresh
      // NATS cluster) opens only what is still missing when it is tried again.
      if (!approvalsShared) {
        await options.approvals.share(
          await SharedApprovalBackend.open(shared, {
            requestTtlMs: options.approvalTtlMs,
            tokenTtlMs: options.approvalTtlMs,
            logger: logger.child("approvals"),
          }),
        );
        approvalsShared = true;
      }
      if (!rateLimitsShared) {
        await rateLimiter.open(shared);
        rateLimitsShared = true;
      }
      pins ??= await SharedPins.open(shared, {
        logger: logger.child("pins"),
        replica: options.replicaId,
      });
      if (timer === undefined) await count();
    },
    close() {
      closed = true;
      timer?.cancel();
      options.approvals.close();
      pins?.close();
    },
  };
}
