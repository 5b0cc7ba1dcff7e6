/**
 * Operator HTTP routes served by the kernel: `/v1/operator/status` (the cached fleet health).
 * Every route needs scope `admin` or `operator`.
 * @module
 */
import { refuseScope } from "./admin_scope.ts";
import type { SystemStatus } from "../mcp/bridge.ts";
import type { HttpRoute } from "../http/http_route.ts";
import type { HandleSnapshot } from "../proxy/child_server_handle.ts";

/** What the status route reads. */
export interface OperatorStatusSource {
  system(): SystemStatus;
  servers(): HandleSnapshot[];
  ready(): boolean;
  /** In cluster mode, this replica's id (MCP_REPLICA_ID): which replica answered. */
  replicaId?(): string | undefined;
}

/** `GET /v1/operator/status`: gateway counts and, per upstream, state, breaker, last health check, latency and tool count. */
export function operatorStatusRoute(source: OperatorStatusSource): HttpRoute {
  return {
    path: "/v1/operator/status",
    methods: ["GET"],
    handle(_request, auth) {
      const refused = refuseScope(auth, "read", "/v1/operator/status");
      if (refused) return Promise.resolve(refused);
      const replica = source.replicaId?.();
      return Promise.resolve(Response.json({
        ...(replica === undefined ? {} : { replica }),
        ready: source.ready(),
        gateway: source.system(),
        servers: source.servers(),
      }));
    },
  };
}
