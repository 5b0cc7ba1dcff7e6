/**
 * The gateway's HTTP listener and every route it serves, mounted with the guards they share: operator
 * routes (approvals, status, the admin API) answer through the redacting sink and refuse a
 * state-changing body that is not JSON; the MCP transports' routes need scope `mcp` and answer
 * 503 while an operator has the MCP interface turned off.
 * @module
 */
import type { PreparedAuth } from "../auth/gateway_auth.ts";
import { createHostGuard } from "../auth/host_guard.ts";
import { refuseNonJsonBody } from "../auth/json_body_guard.ts";
import { ProtectedResource } from "../auth/oauth_resource.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Logger } from "../support/logger.ts";
import { HttpListener, jsonError } from "../http/http_listener.ts";
import type { HttpRoute } from "../http/http_route.ts";
import type { InboundTransport } from "../plugin_api/mod.ts";
import { refuseScope } from "./admin_scope.ts";
import { approvalRoutes } from "./approval_routes.ts";
import type { OperatorHost } from "./operator_host.ts";
import { redactedRoute } from "./redacted_route.ts";
import { operatorRoutes } from "./routes.ts";
import { operatorStatusRoute, type OperatorStatusSource } from "./status_routes.ts";

/** What the gateway's listener and routes are made from. */
export interface GatewayRoutes {
  host: OperatorHost;
  /** Whether the gateway has started and every upstream has started or failed once. */
  ready: () => boolean;
  /** Plugins loaded and failed, for /readyz. */
  plugins: () => { loaded: number; failed: number };
  /** The HTTP transports, whose routes are mounted even while the interface is off. */
  transports: readonly InboundTransport[];
  /** Cluster mode: this replica's id, and the replicas and the revisions they run. */
  cluster?: Pick<OperatorStatusSource, "replicaId" | "cluster">;
}

/**
 * The gateway's HTTP listener, not yet started, as the server settings configure it (host and
 * port, DNS-rebinding checks, authentication or --no-auth's anonymous caller, OAuth metadata,
 * body bounds, readiness), with every route mounted.
 */
function gatewayListener(
  server: GatewayConfig["server"],
  auth: PreparedAuth,
  options: {
    protectedResource: ProtectedResource | undefined;
    logger: Logger;
    routes: GatewayRoutes;
  },
): HttpListener {
  const { host, ready, plugins } = options.routes;
  const listener = new HttpListener({
    host: server.host,
    port: server.port,
    authenticator: auth.authenticator,
    ...(auth.anonymous ? { anonymous: auth.anonymous } : {}),
    ...(options.protectedResource ? { protectedResource: options.protectedResource } : {}),
    hostGuard: (port) =>
      createHostGuard({
        host: server.host,
        port,
        ...(server.allowedHosts.length ? { allowedHosts: server.allowedHosts } : {}),
        ...(server.allowedOrigins.length ? { allowedOrigins: server.allowedOrigins } : {}),
      }),
    logger: options.logger,
    maxBodyBytes: server.maxMessageBytes,
    bodyTimeoutMs: server.bodyTimeoutMs,
    readiness: () => ({
      ready: ready(),
      detail: {
        plugins: plugins().loaded,
        pluginFailures: plugins().failed,
        sessions: host.bridge.sessionCount,
        toolCallsInFlight: host.bridge.inFlightCalls,
        upstreams: host.proxy.handles().map((h) => ({ id: h.id, state: h.state })),
      },
    }),
  });
  mountGatewayRoutes(listener, options.routes);
  return listener;
}

/** What a started listener tells the person who started the gateway. */
export interface ListenerInfo {
  url: string;
  generatedToken?: string;
  generatedAdminToken?: string;
  oauth?: { issuer: string; resource: string; metadataUrl: string };
}

/**
 * Builds the listener (handed to `opened` before it starts, so a stop after a failed start closes
 * it) and starts it; says where it listens and what a person needs to call it.
 */
export async function startGatewayHttp(
  server: GatewayConfig["server"],
  auth: PreparedAuth,
  options: { logger: Logger; routes: GatewayRoutes; opened: (listener: HttpListener) => void },
): Promise<ListenerInfo> {
  const resource = server.oauth && auth.authenticator
    ? new ProtectedResource(server.oauth)
    : undefined;
  const listener = gatewayListener(server, auth, { ...options, protectedResource: resource });
  options.opened(listener);
  const addr = await listener.start();
  const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
  const info: ListenerInfo = { url: `http://${host}:${addr.port}` };
  if (auth.generatedToken) info.generatedToken = auth.generatedToken;
  if (auth.generatedAdminToken) info.generatedAdminToken = auth.generatedAdminToken;
  if (resource) {
    const { issuer, resource: url } = server.oauth!;
    info.oauth = { issuer, resource: url, metadataUrl: resource.metadataUrl };
  }
  return info;
}

/** Mounts every route of the gateway on `listener`. */
function mountGatewayRoutes(listener: HttpListener, routes: GatewayRoutes): void {
  const { host } = routes;
  const status: OperatorStatusSource = {
    system: () => host.bridge.status(),
    servers: () =>
      host.proxy.status().map((s) => ({
        ...s,
        findings: host.scanner?.findingsFor(s.id) ?? [],
        quarantined: host.scanner?.quarantinedTools(s.id) ?? [],
      })),
    ready: routes.ready,
    ...routes.cluster,
  };
  // Operator routes answer through the redacting sink; the MCP routes redact at their errors.
  listener.mount(redactedRoute(jsonBodiesOnly(approvalRoutes(host.approvals))));
  listener.mount(redactedRoute(jsonBodiesOnly(operatorStatusRoute(status))));
  for (const route of operatorRoutes(host)) listener.mount(redactedRoute(jsonBodiesOnly(route)));
  // Mounted even when disabled at start: an operator can enable the interface at runtime.
  for (const transport of routes.transports) {
    for (const route of transport.routes ?? []) {
      listener.mount(mcpScopeOnly(whileMcpEnabled(route, () => host.mcpEnabled)));
    }
  }
}

/** The route, answering 503 while an operator has the MCP interface turned off. */
function whileMcpEnabled(route: HttpRoute, enabled: () => boolean): HttpRoute {
  return {
    ...route,
    handle: (request, auth, body) => {
      if (enabled()) return route.handle(request, auth, body);
      return Promise.resolve(jsonError(
        503,
        "mcp_disabled",
        `The MCP interface (${route.path}) is turned off by an operator; ` +
          "turn it on with POST /v1/mcp/enable (scope admin)",
        { "Retry-After": "60" },
      ));
    },
  };
}

/** The route, answering 415 to a state-changing request whose body is not JSON. */
function jsonBodiesOnly(route: HttpRoute): HttpRoute {
  if (route.public) return route;
  return {
    ...route,
    handle: (request, auth, body) =>
      Promise.resolve(refuseNonJsonBody(request) ?? route.handle(request, auth, body)),
  };
}

/** The MCP transport route, answering 403 to a caller without scope `mcp` (or `admin`). */
function mcpScopeOnly(route: HttpRoute): HttpRoute {
  return {
    ...route,
    handle: (request, auth, body) =>
      Promise.resolve(
        refuseScope(auth, "mcp", `the MCP endpoint ${route.path}`) ??
          route.handle(request, auth, body),
      ),
  };
}
