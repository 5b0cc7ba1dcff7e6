/**
 * The MCP server interface, for operators: `/v1/mcp/status`, `/v1/mcp/config`, `/v1/mcp/enable`,
 * `/v1/mcp/disable`, `/v1/mcp/reload`, and `/v1/mcp/sync/*` (registry sync and discovery proposals).
 * @module
 */
import {
  LATEST_PROTOCOL_VERSION,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import type { GatewayConfig } from "../config/config.ts";
import { GatewayError } from "../support/errors.ts";
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { redactConfig, redactServer } from "./admin_redaction.ts";
import { type AdminAccess, refuseScope } from "./admin_scope.ts";
import { syncRoutes } from "./sync_routes.ts";

/** The MCP endpoints the enable switch governs. */
export const MCP_ENDPOINTS = { streamableHttp: "/mcp", sse: "/sse", messages: "/messages" };

/** One exact-path admin route guarded by a scope. */
function guarded(
  method: "GET" | "POST",
  path: string,
  access: AdminAccess,
  handle: (request: Request) => Promise<Response> | Response,
): HttpRoute {
  return {
    path,
    methods: [method],
    async handle(request, auth) {
      return refuseScope(auth, access, `${method} ${path}`) ?? await handle(request);
    },
  };
}

/** How callers authenticate, from the configuration. */
export function authModes(server: GatewayConfig["server"]): string[] {
  if (server.authDisabled) return [server.authDisabledAdmin ? "none_admin" : "none"];
  const modes: string[] = [];
  if (server.authToken !== undefined) modes.push("static_token");
  if (server.adminToken !== undefined) modes.push("admin_token");
  if (server.tokensFile !== undefined) modes.push("tokens_file");
  if (server.jwt.secret !== undefined) modes.push("jwt_hs256");
  if (server.jwt.jwksUrl !== undefined) modes.push("jwt_jwks");
  // Nothing configured on loopback: the kernel generated the two tokens for this run.
  return modes.length > 0 ? modes : ["generated_token"];
}

/** `/v1/mcp/status`, `/config`, `/enable`, `/disable`, `/reload` and `/sync/*`. */
export function mcpAdminRoutes(kernel: OperatorHost): HttpRoute[] {
  const setEnabled = (enabled: boolean) => () => {
    kernel.setMcpEnabled(enabled);
    return Response.json({ enabled: kernel.mcpEnabled, endpoints: MCP_ENDPOINTS });
  };
  return [
    guarded("GET", "/v1/mcp/status", "read", () => {
      const { server } = kernel.config;
      return Response.json({
        enabled: kernel.mcpEnabled,
        transport: server.transport,
        endpoints: MCP_ENDPOINTS,
        responseMode: server.httpResponseMode,
        toolDiscoveryMode: server.toolDiscoveryMode,
        sessions: kernel.bridge.sessionCount,
        protocolVersions: [...SUPPORTED_PROTOCOL_VERSIONS],
        latestProtocolVersion: LATEST_PROTOCOL_VERSION,
        auth: {
          modes: authModes(server),
          ...(server.jwt.issuer === undefined ? {} : { jwtIssuer: server.jwt.issuer }),
          ...(server.jwt.audience === undefined ? {} : { jwtAudience: server.jwt.audience }),
        },
      });
    }),
    guarded("GET", "/v1/mcp/config", "read", () =>
      Response.json({
        config: redactConfig(kernel.config),
        fleet: {
          path: kernel.config.proxy.configPath ?? null,
          servers: kernel.fleet.map(redactServer),
        },
        policies: { path: kernel.config.policyPath, files: [...kernel.governance.policies.files] },
      })),
    guarded("POST", "/v1/mcp/enable", "admin", setEnabled(true)),
    guarded("POST", "/v1/mcp/disable", "admin", setEnabled(false)),
    guarded("POST", "/v1/mcp/reload", "admin", () => reload(kernel)),
    ...syncRoutes(kernel),
  ];
}

/** What reloading one file did. */
type ReloadPart =
  | { status: "reloaded"; path: string; [detail: string]: unknown }
  | { status: "refused"; path: string; reason: string; problems: string[] }
  | { status: "not_configured"; message: string };

/** Reloads the fleet and the policies now; a refused file keeps what runs, and the answer says why. */
async function reload(kernel: OperatorHost): Promise<Response> {
  const fleetPath = kernel.config.proxy.configPath;
  const policyPath = kernel.config.policyPath;
  const fleet: ReloadPart = fleetPath === undefined
    ? {
      status: "not_configured",
      message: "No fleet file is configured; set MCP_PROXY_CONFIG_PATH (or serve --config FILE)",
    }
    : await kernel.reloadFleet().then(
      (diff) => ({ status: "reloaded" as const, path: fleetPath, ...diff }),
      (error) => refused(fleetPath, error),
    );
  const policies: ReloadPart = await kernel.reloadPolicies().then(
    (set) => ({ status: "reloaded" as const, path: policyPath, files: [...set.files] }),
    (error) => refused(policyPath, error),
  );
  const failures = [["fleet", fleet], ["policies", policies]] as const;
  const reasons = failures.filter(([, part]) => part.status === "refused").map(([what, part]) =>
    `${what} not reloaded, the previous one stays in force: ${(part as { reason: string }).reason}`
  );
  if (reasons.length === 0) return Response.json({ fleet, policies });
  return Response.json(
    {
      error: { code: "reload_refused", message: `${reasons.join("\n")}\nFix the file and reload.` },
      fleet,
      policies,
    },
    { status: 422 },
  );
}

function refused(path: string, error: unknown): ReloadPart {
  const reason = error instanceof Error ? error.message : String(error);
  const problems = error instanceof GatewayError && Array.isArray(error.data.problems)
    ? error.data.problems.map(String)
    : [reason];
  return { status: "refused", path, reason, problems };
}
