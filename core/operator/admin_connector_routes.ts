/**
 * `/v1/connectors` and `/v1/connectors/{server}`: the connector boundary as it stands. Each MCP
 * destination (a server in the fleet, or one a `connectors:` policy names) with its lifecycle and
 * breaker state and the policy that bounds it, or the plain statement that nothing does.
 * @module
 */
import type { ConnectorPolicy } from "../governance/policy.ts";
import { jsonError } from "../http/http_listener.ts";
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import type { BreakerState } from "../proxy/circuit_breaker.ts";
import type { LifecycleState } from "../proxy/child_server_handle.ts";
import { pathParams, refuseScope } from "./admin_scope.ts";

/** Where the connector routes are mounted. */
export const CONNECTORS_PATH = "/v1/connectors";

/** What an unbounded destination allows. */
export const NO_CONNECTOR_POLICY = "no connector policy: every tenant, every effect class";

/** One destination's boundary. */
export interface ConnectorView {
  server: string;
  /** In the fleet file (false: only a policy names it). */
  configured: boolean;
  enabled: boolean;
  state: LifecycleState;
  breaker: BreakerState;
  policy: {
    tenants: readonly string[] | "*";
    effects: string[];
    /** `file:line` of the rule. */
    source: string;
    rule: string;
  } | null;
  /** The boundary in words. */
  summary: string;
}

/** What a destination's state is made of. */
export interface ConnectorInput {
  server: string;
  configured: boolean;
  enabled: boolean;
  state?: LifecycleState;
  breaker?: BreakerState;
  policy?: ConnectorPolicy;
}

/** The view of one destination. */
export function connectorView(input: ConnectorInput): ConnectorView {
  const { policy } = input;
  const base = {
    server: input.server,
    configured: input.configured,
    enabled: input.enabled,
    state: input.state ?? "STOPPED",
    breaker: input.breaker ?? "CLOSED",
  };
  if (!policy) return { ...base, policy: null, summary: NO_CONNECTOR_POLICY };
  const effects = [...policy.effects];
  const source = `${policy.source.file}:${policy.source.line}`;
  const tenants = policy.tenants === "*" ? "every tenant" : `tenants ${policy.tenants.join(", ")}`;
  const classes = effects.length > 0 ? `effect classes ${effects.join(", ")}` : "no effect class";
  return {
    ...base,
    policy: { tenants: policy.tenants, effects, source, rule: policy.source.text },
    summary: `${tenants}; ${classes} (${source})`,
  };
}

/** The connector routes over the running kernel. */
export function connectorRoutes(kernel: OperatorHost): HttpRoute {
  const views = (): ConnectorView[] => {
    const connectors = kernel.governance.policies.connectors;
    const ids = new Set([...kernel.fleet.map((s) => s.id), ...connectors.keys()]);
    return [...ids].map((server) => {
      const configured = kernel.fleet.find((s) => s.id === server);
      const handle = kernel.proxy.get(server);
      const policy = connectors.get(server);
      return connectorView({
        server,
        configured: configured !== undefined,
        enabled: configured?.enabled ?? false,
        ...(handle ? { state: handle.state, breaker: handle.breaker.snapshot().state } : {}),
        ...(policy ? { policy } : {}),
      });
    });
  };
  return {
    path: CONNECTORS_PATH,
    prefix: true,
    methods: ["GET"],
    handle(request, auth) {
      const url = new URL(request.url);
      const refused = refuseScope(auth, "read", `GET ${url.pathname}`);
      if (refused) return Promise.resolve(refused);
      const params = pathParams(url.pathname, CONNECTORS_PATH);
      if (params instanceof Response) return Promise.resolve(params);
      const [server, ...rest] = params;
      if (server === undefined) return Promise.resolve(Response.json({ connectors: views() }));
      const found = rest.length === 0 ? views().find((v) => v.server === server) : undefined;
      if (found) return Promise.resolve(Response.json(found));
      return Promise.resolve(jsonError(
        404,
        "not_found",
        `No MCP destination "${server}": it is neither in the fleet file nor in a connectors: policy; list them with GET ${CONNECTORS_PATH}`,
      ));
    },
  };
}
