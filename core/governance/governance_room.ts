/**
 * The governance room, built once from the settings: approvals (queue, tokens, nonces, their
 * file), the audit log, ToolGovernance with its rate limiter, the policy reloader, and in cluster
 * mode the governance state shared with the other replicas.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import { Approvals } from "./approvals.ts";
import { AuditLog } from "./audit_log.ts";
import { type ClusterGovernance, clusterGovernanceOf } from "./cluster_governance.ts";
import { DEFAULT_POLICY } from "./policy_loader.ts";
import { PolicyReloader } from "./policy_reloader.ts";
import { RateLimiter } from "./rate_limiter.ts";
import { ToolGovernance } from "./tool_governance.ts";

/** The pieces of governance the gateway runs. */
export interface GovernanceRoom {
  approvals: Approvals;
  audit: AuditLog;
  governance: ToolGovernance;
  /** Starts with the default policy; loads MCP_POLICY_PATH at start. */
  policies: PolicyReloader;
  /** Cluster mode: the approvals, rate limits and pins shared with the other replicas. */
  shared: ClusterGovernance | undefined;
  /** Cluster mode: how often rate limits fell back to this replica's share (KV unreachable). */
  rateLimitFallbacks(): { fallbacks: number; outages: number } | undefined;
}

/** Builds governance; `onPolicyReload` runs after every policy reload (tool lists may change). */
export function createGovernance(
  config: GatewayConfig,
  deps: {
    clock: Clock;
    bus: EventBus;
    logger: Logger;
    onPolicyReload: () => void;
    /** Cluster mode: how many replicas share the rate limits now. */
    countReplicas: () => Promise<number>;
  },
): GovernanceRoom {
  const { governance: settings } = config;
  const { clock, bus, logger } = deps;
  const replica = config.cluster?.replicaId;
  const approvals = new Approvals(settings, { clock, bus, logger, cluster: config.cluster });
  const shared = clusterGovernanceOf(
    config,
    { approvals: approvals.queue, clock, logger },
    deps.countReplicas,
  );
  const audit = new AuditLog({
    ...(replica === undefined ? {} : { replica }),
    ...(settings.auditLog === undefined ? {} : { path: settings.auditLog }),
    maxBytes: settings.auditMaxBytes,
    includeArguments: settings.auditIncludeArguments,
    bus,
    clock,
    logger: logger.child("audit"),
  });
  const governance = new ToolGovernance({
    policies: DEFAULT_POLICY,
    tokens: approvals.tokens,
    approvals: approvals.queue,
    rateLimiter: shared?.rateLimiter ?? new RateLimiter({ clock }),
    audit,
    clock,
    maxSchemaWork: settings.maxSchemaWork,
    maxSchemaCodePerUpstream: settings.maxSchemaCodePerUpstream,
  });
  const policies = new PolicyReloader({
    path: config.policyPath,
    governance,
    logger,
    bus,
    onReload: deps.onPolicyReload,
  });
  const rateLimitFallbacks = () => {
    const stats = shared?.rateLimiter.stats();
    return stats && { fallbacks: stats.fallbacks, outages: stats.outages };
  };
  return { approvals, audit, governance, policies, shared, rateLimitFallbacks };
}
