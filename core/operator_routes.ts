/**
 * Operator HTTP routes served by the kernel: `/v1/operator/status` (the cached fleet health).
 * Every route needs scope `admin` or `operator`.
 * @module
 */
import { hasScope } from "./auth/token_payload.ts";
import type { SystemStatus } from "./bridge.ts";
import { jsonError } from "./http_listener.ts";
import type { HttpRoute } from "./plugin_api.ts";
import type { HandleSnapshot } from "./proxy/child_server_handle.ts";

/** What the status route reads. */
export interface OperatorStatusSource {
  system(): SystemStatus;
  servers(): HandleSnapshot[];
  ready(): boolean;
}

/** `GET /v1/operator/status`: gateway counts and, per upstream, state, breaker, last health check, latency and tool count. */
export function operatorStatusRoute(source: OperatorStatusSource): HttpRoute {
  return {
    path: "/v1/operator/status",
    methods: ["GET"],
    handle(_request, auth) {
      if (!hasScope(auth, "admin", "operator")) {
        return Promise.resolve(jsonError(
          403,
          "forbidden",
          `Caller "${auth.subject}" lacks scope admin or operator, which /v1/operator/status needs`,
          {
            "WWW-Authenticate":
              'Bearer realm="agent33", error="insufficient_scope", scope="operator"',
          },
        ));
      }
      return Promise.resolve(Response.json({
        ready: source.ready(),
        gateway: source.system(),
        servers: source.servers(),
      }));
    },
  };
}
