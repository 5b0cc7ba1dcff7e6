/**
 * Operator HTTP routes served by the kernel: `/v1/operator/status` (the cached fleet health, and
 * in cluster mode every replica's heartbeat). Every route needs scope `admin` or `operator`.
 * @module
 */
import { refuseScope } from "./admin_scope.ts";
import type { SystemStatus } from "../mcp/bridge.ts";
import type { HttpRoute } from "../http/http_route.ts";
import type { HandleSnapshot } from "../proxy/child_server_handle.ts";
import type { ClusterStatus } from "../cluster/cluster_node.ts";

/** What the status route reads. */
export interface OperatorStatusSource {
  system(): SystemStatus;
  servers(): HandleSnapshot[];
  ready(): boolean;
  /** In cluster mode, this replica's id (MCP_REPLICA_ID): which replica answered. */
  replicaId?(): string | undefined;
  /** In cluster mode: the replicas and the revisions they run. */
  cluster?(): Promise<ClusterStatus>;
}

/** `GET /v1/operator/status`: gateway counts and, per upstream, state, breaker, last health check, latency and tool count. */
export function operatorStatusRoute(source: OperatorStatusSource): HttpRoute {
  return {
    path: "/v1/operator/status",
    methods: ["GET"],
    async handle(_request, auth) {
      const refused = refuseScope(auth, "read", "/v1/operator/status");
      if (refused) return refused;
      const replica = source.replicaId?.();
      return Response.json({
        ...(replica === undefined ? {} : { replica }),
        ready: source.ready(),
        gateway: source.system(),
        servers: source.servers(),
        ...(source.cluster ? { cluster: await clusterPart(source.cluster) } : {}),
      });
    },
  };
}

/** The cluster part; the shared state being unreachable is shown, not a failed status. */
async function clusterPart(
  cluster: () => Promise<ClusterStatus>,
): Promise<ClusterStatus | { error: { code: string; message: string } }> {
  try {
    return await cluster();
  } catch (error) {
    return {
      error: {
        code: "shared_state_unavailable",
        message: `The replicas' heartbeats cannot be read (${
          error instanceof Error ? error.message : String(error)
        }); check NATS (NATS_URL) and its JetStream`,
      },
    };
  }
}
