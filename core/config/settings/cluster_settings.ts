/**
 * The environment variables of cluster mode (several replicas sharing state through NATS
 * JetStream): each declared once, with its parser, default and meaning (core/config/settings/settings.ts
 * joins the groups; docs are generated).
 * @module
 */
import { z } from "zod";
import { bool, int, oneOf, setting } from "./setting.ts";

/** A replica id: what audit records, heartbeats and `/v1/operator/status` name a replica by. */
const replicaId = z.string().optional().transform((value, ctx) => {
  if (value === undefined || value === "") return undefined;
  if (!/^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$/.test(value)) {
    ctx.addIssue({
      code: "custom",
      message:
        `MCP_REPLICA_ID must be 1-63 letters, digits, "-" or "_" (starting with a letter or digit), received "${value}"`,
    });
    return z.NEVER;
  }
  return value;
});

/** Cluster mode's part of the gateway config (`config.cluster`, present with MCP_CLUSTER). */
export interface ClusterConfig {
  /** MCP_REPLICA_ID: this replica's name; `<hostname>-<pid>` by default. */
  replicaId: string;
  /** MCP_CLUSTER_KV_REPLICAS: JetStream replicas of each shared bucket. */
  kvReplicas: number;
  /** MCP_CLUSTER_HEARTBEAT_MS: milliseconds between this replica's heartbeats. */
  heartbeatMs: number;
  /** MCP_CLUSTER_CONFIG: the fleet and policies from the shared bucket, or each replica's files. */
  configSource: "shared" | "mounted";
}

/** The variables of cluster mode. */
export const CLUSTER_SETTINGS = {
  MCP_CLUSTER: setting({
    group: "cluster",
    schema: bool("MCP_CLUSTER"),
    default: false,
    meaning:
      "Share sessions, approvals, rate limits, pins and the fleet with the other replicas through NATS JetStream (needs `NATS_URL`)",
  }),
  MCP_REPLICA_ID: setting({
    group: "cluster",
    schema: replicaId,
    shownDefault: "`<hostname>-<pid>`",
    meaning: "This replica's name in audit records, heartbeats and the cluster status",
  }),
  MCP_CLUSTER_KV_REPLICAS: setting({
    group: "cluster",
    schema: int("MCP_CLUSTER_KV_REPLICAS", 1, 5),
    default: 1,
    meaning:
      "JetStream replicas of each shared bucket the gateway creates; 3 on a 3-node NATS cluster, so losing a node loses no state",
  }),
  MCP_CLUSTER_HEARTBEAT_MS: setting({
    group: "cluster",
    schema: int("MCP_CLUSTER_HEARTBEAT_MS", 200, 60_000),
    default: 5_000,
    meaning:
      "Milliseconds between a replica's heartbeats in `agent33_replicas`; a replica missing three is no longer listed",
  }),
  MCP_CLUSTER_CONFIG: setting({
    group: "cluster",
    schema: oneOf("MCP_CLUSTER_CONFIG", ["shared", "mounted"] as const),
    default: "shared",
    meaning:
      "`shared`: the fleet and policies come from the `agent33_config` bucket and admin edits write it; `mounted`: each replica reads and watches its own files (a ConfigMap), and admin edits of the fleet are refused",
  }),
};
