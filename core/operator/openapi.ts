/**
 * `GET /v1/openapi.json`: an OpenAPI 3.1 description of every HTTP route an operator or a client
 * uses on the gateway's listener. A test holds it to the real listener both ways: every documented
 * path and method is served, and every mounted route is documented.
 * @module
 */
import type { HttpRoute } from "../http/http_route.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import { refuseScope, SCOPES_FOR } from "./admin_scope.ts";

/** Where the document is served. */
export const OPENAPI_PATH = "/v1/openapi.json";

type Json = Record<string, unknown>;
/**
 * Who may call: `overseer` is whoever may see approvals (approvers and operators), `observer` an
 * operator of one tenant or more, `operator` an operator of every tenant.
 */
type Scope =
  | "public"
  | "any"
  | "mcp"
  | "approver"
  | "overseer"
  | "observer"
  | "operator"
  | "admin";

const REQUIRED: Record<Exclude<Scope, "public" | "any">, readonly string[]> = {
  mcp: SCOPES_FOR.mcp,
  approver: SCOPES_FOR.approve,
  overseer: ["admin", "approver", "operator"],
  observer: SCOPES_FOR.observe,
  operator: SCOPES_FOR.read,
  admin: SCOPES_FOR.admin,
};

/**
 * `x-tenant-reach`: `own` where a caller without `all_tenants` sees its own tenant's part only,
 * `all` where an approver or operator must also hold `all_tenants` (admin always may).
 */
const REACH: Partial<Record<Scope, "own" | "all">> = {
  approver: "own",
  overseer: "own",
  observer: "own",
  operator: "all",
};

const ref = (name: string) => ({ $ref: `#/components/responses/${name}` });
const json = (description: string, schema: Json = { type: "object" }) => ({
  description,
  content: { "application/json": { schema } },
});

/** One operation: summary, who may call it, its parameters and its answers. */
function op(
  summary: string,
  scope: Scope,
  extra: { parameters?: Json[]; requestBody?: Json; responses?: Json; description?: string } = {},
): Json {
  const guarded = scope !== "public" && scope !== "any";
  return {
    summary,
    ...(extra.description ? { description: extra.description } : {}),
    ...(scope === "public" ? { security: [] } : {}),
    ...(guarded ? { "x-required-scopes": [...REQUIRED[scope]] } : {}),
    ...(REACH[scope] ? { "x-tenant-reach": REACH[scope] } : {}),
    ...(extra.parameters ? { parameters: extra.parameters } : {}),
    ...(extra.requestBody ? { requestBody: extra.requestBody } : {}),
    responses: {
      // What the listener answers before any route (an operation's own meaning of 400 wins).
      "400": ref("InvalidPath"),
      "503": ref("ShuttingDown"),
      ...(extra.requestBody ? { "408": ref("BodyTimeout"), "413": ref("PayloadTooLarge") } : {}),
      ...(extra.responses ?? { "200": json("OK") }),
      ...(scope === "public" ? {} : { "401": ref("Unauthorized") }),
      ...(guarded ? { "403": ref("Forbidden") } : {}),
    },
  };
}

const param = (name: string, description: string, example: string): Json => ({
  name,
  in: "path",
  required: true,
  description,
  schema: { type: "string" },
  example,
});
const serverId = param("id", "The upstream server's id in the fleet file", "github");
const approvalId = param("id", "The approval request's id", "apr_123");
const mcpBody = {
  required: true,
  content: { "application/json": { schema: { type: "object", description: "JSON-RPC 2.0" } } },
};

/** The gateway's OpenAPI 3.1 document. */
export function openApiDocument(): Json {
  // Cluster mode: the edit is compare-and-set on the shared fleet's revision.
  const ifMatch = {
    name: "If-Match",
    in: "header",
    required: false,
    description: 'Cluster mode: the fleet revision the edit is based on, e.g. "12"',
    schema: { type: "string" },
  };
  const fleetChange = (summary: string) =>
    op(summary, "admin", {
      parameters: [serverId, ifMatch],
      responses: {
        "200": json("Changed in the fleet file and applied"),
        "400": json("The fleet file would become invalid; nothing was written"),
        "404": ref("NotFound"),
        "409": json(
          "No fleet file is configured (set MCP_PROXY_CONFIG_PATH), or revision_conflict (cluster mode)",
        ),
      },
    });
  return {
    openapi: "3.1.0",
    info: {
      title: "AGENT-33 MCP gateway",
      version: GATEWAY_INFO.version,
      description:
        "HTTP surface of the gateway: MCP transports, health probes, and the operator API. " +
        "Errors are JSON `{ error: { code, message } }`. Scopes `approver` and `operator` reach " +
        "the token's own tenant: `x-tenant-reach: own` operations show such a caller its tenant's " +
        "part only, `all` ones also need scope `all_tenants` (or `admin`).",
    },
    security: [{ bearer: [] }],
    paths: {
      "/healthz": { get: op("Liveness: the process answers", "public") },
      "/readyz": {
        get: op("Readiness: plugins loaded and every upstream started or failed", "public", {
          responses: { "200": json("Ready"), "503": json("Not ready, with the reasons") },
        }),
      },
      "/mcp": {
        post: op("MCP Streamable HTTP: a JSON-RPC message (initialize opens a session)", "mcp", {
          requestBody: mcpBody,
          responses: { "200": json("JSON-RPC response or SSE stream"), "503": ref("McpDisabled") },
        }),
        get: op("MCP Streamable HTTP: the session's server-to-client SSE stream", "mcp", {
          responses: { "200": { description: "text/event-stream" }, "503": ref("McpDisabled") },
        }),
        delete: op("MCP Streamable HTTP: end the session", "mcp", {
          responses: { "200": json("Closed"), "503": ref("McpDisabled") },
        }),
      },
      "/mcp/{server_id}": {
        post: op("MCP Streamable HTTP for one upstream alone, under its own names", "mcp", {
          parameters: [param("server_id", "The upstream server's id", "github")],
          requestBody: mcpBody,
          responses: { "200": json("JSON-RPC response or SSE stream"), "503": ref("McpDisabled") },
        }),
      },
      "/sse": {
        get: op("Legacy HTTP+SSE (2024-11-05): open the event stream", "mcp", {
          responses: { "200": { description: "text/event-stream" }, "503": ref("McpDisabled") },
        }),
      },
      "/messages": {
        post: op("Legacy HTTP+SSE: post a JSON-RPC message to a session", "mcp", {
          parameters: [{
            name: "sessionId",
            in: "query",
            required: true,
            schema: { type: "string" },
          }],
          requestBody: mcpBody,
          responses: { "202": { description: "Accepted" }, "503": ref("McpDisabled") },
        }),
      },
      "/metrics": {
        get: op("Prometheus metrics (text format 0.0.4)", "operator", {
          responses: { "200": { description: "text/plain; version=0.0.4" } },
        }),
      },
      "/dashboard": {
        get: op("The operator dashboard page (static; it asks for a token)", "public", {
          responses: { "200": { description: "text/html" } },
        }),
      },
      "/dashboard/{asset}": {
        get: op("A dashboard asset", "public", {
          parameters: [param("asset", "index.html, app.js or style.css", "app.js")],
          responses: { "200": { description: "The asset" }, "404": ref("NotFound") },
        }),
      },
      "/v1/events": {
        get: op("The event bus as a Server-Sent Events stream", "observer", {
          responses: { "200": { description: "text/event-stream" } },
        }),
      },
      "/v1/operator/status": {
        get: op(
          "Gateway counts and, per upstream, state, breaker and health; in cluster mode the replicas",
          "operator",
        ),
      },
      "/v1/approvals": {
        get: op("Approval requests", "overseer", {
          parameters: [{
            name: "status",
            in: "query",
            schema: { enum: ["pending", "approved", "denied", "expired"] },
          }],
        }),
      },
      "/v1/approvals/{id}": {
        get: op(
          "One approval request; its caller sees its status and, once approved, the token",
          "any",
          {
            parameters: [approvalId],
            responses: { "200": json("The request"), "404": ref("NotFound") },
          },
        ),
      },
      "/v1/approvals/{id}/approve": {
        post: op("Approve: issues the single-use token (never by the requester)", "approver", {
          parameters: [approvalId],
          responses: { "200": json("Approved, with the token"), "404": ref("NotFound") },
        }),
      },
      "/v1/approvals/{id}/deny": {
        post: op("Deny, with an optional reason (never by the requester)", "approver", {
          parameters: [approvalId],
          requestBody: { content: { "application/json": { schema: { type: "object" } } } },
          responses: { "200": json("Denied"), "404": ref("NotFound") },
        }),
      },
      "/v1/mcp/status": {
        get: op(
          "MCP interface: enabled, transport, sessions, protocol versions, auth mode",
          "operator",
        ),
      },
      "/v1/mcp/config": {
        get: op("Effective configuration and fleet, secrets redacted", "operator"),
      },
      "/v1/mcp/enable": { post: op("Turn the MCP interface on", "admin") },
      "/v1/mcp/disable": {
        post: op("Turn the MCP interface off: /mcp, /sse and /messages answer 503", "admin"),
      },
      "/v1/mcp/reload": {
        post: op("Reload the fleet file and the policies now", "admin", {
          responses: {
            "200": json("What changed"),
            "422": json("A file was refused (file:line); the previous one stays in force"),
          },
        }),
      },
      "/v1/mcp/sync/proposals": {
        get: op("Pending sync proposals from the registry and discovery", "operator", {
          description:
            "Each proposal carries `digest`: the SHA-256 hex of exactly what applying it writes " +
            "(an add's or update's `yaml`) or does (a disable's or remove's action, server and " +
            "version). Pass it to apply so a proposal that changed since it was reviewed is " +
            "refused. Of two proposals with one id (registry and discovery) the registry's is listed.",
          parameters: [{
            name: "discover",
            in: "query",
            required: false,
            description:
              "Ask the discovery sources again first, bounded by MCP_DISCOVERY_TIMEOUT_MS (running discovery is shown live without it)",
            schema: { type: "boolean" },
          }],
        }),
      },
      "/v1/mcp/sync/run": {
        post: op("Read the registry and compute proposals", "admin", {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: { type: "object", required: ["registry"] },
                example: { registry: "https://registry.modelcontextprotocol.io" },
              },
            },
          },
        }),
      },
      "/v1/mcp/sync/apply": {
        post: op("Write the chosen proposals to the fleet file and apply them", "admin", {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["ids", "digests"],
                  properties: {
                    ids: { type: "array", items: { type: "string" } },
                    digests: {
                      type: "object",
                      description:
                        "For each id, the `digest` listed by GET proposals or POST run (an id " +
                        "without one is a 400): a proposal whose digest differs now refuses the " +
                        "whole request (409 proposal_changed)",
                      additionalProperties: { type: "string" },
                    },
                  },
                },
                example: {
                  ids: ["add:acme-weather"],
                  digests: { "add:acme-weather": "<digest from GET /v1/mcp/sync/proposals>" },
                },
              },
            },
          },
          responses: {
            "200": json("Written to the fleet file and applied"),
            "400": json(
              "The body is malformed, an id has no digest, or the fleet file would become invalid",
            ),
            "404": json("No pending proposal with an id given"),
            "409": json(
              "proposal_changed (a digest differs: review the proposal again), no_fleet_file, conflict or fleet_read_only",
            ),
          },
        }),
      },
      "/v1/mcp/proxy/servers": {
        get: op("The upstream fleet: state, breaker, health, tool count", "operator"),
        post: op("Add a server to the fleet file and start it", "admin", {
          description: "The body is one fleet entry as JSON, in the fleet file's own format.",
          parameters: [ifMatch],
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: { type: "object", required: ["id"] },
                example: {
                  id: "github",
                  command: ["npx", "-y", "@modelcontextprotocol/server-github"],
                },
              },
            },
          },
          responses: {
            "201": json("Added and applied"),
            "400": json("The entry is invalid; the file is unchanged"),
            "409": json("The id exists, no fleet file is configured, or revision_conflict"),
          },
        }),
      },
      "/v1/mcp/proxy/servers/{id}": {
        get: op("One upstream server", "operator", {
          parameters: [serverId],
          responses: { "200": json("The server"), "404": ref("NotFound") },
        }),
        delete: fleetChange("Remove a server from the fleet file and stop it"),
      },
      "/v1/mcp/proxy/servers/{id}/enable": { post: fleetChange("Enable a server and start it") },
      "/v1/mcp/proxy/servers/{id}/disable": { post: fleetChange("Disable a server and stop it") },
      "/v1/mcp/proxy/servers/{id}/restart": {
        post: op("Restart a server (breaker reset)", "operator", {
          parameters: [serverId],
          responses: { "200": json("Restarted"), "404": ref("NotFound") },
        }),
      },
      "/v1/connectors": {
        get: op("The connector boundary: each destination's state, breaker and policy", "operator"),
      },
      "/v1/connectors/{server}": {
        get: op("One destination's connector boundary", "operator", {
          parameters: [param("server", "The upstream server's id", "github")],
          responses: { "200": json("The destination"), "404": ref("NotFound") },
        }),
      },
      "/v1/scanner/findings": {
        get: op("The in-gateway scanner's findings and quarantined tools, per server", "operator"),
      },
      "/v1/scanner/release": {
        post: op("Release a quarantined tool: its current definition becomes its pin", "operator", {
          requestBody: {
            required: true,
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  required: ["server", "tool"],
                  properties: { server: { type: "string" }, tool: { type: "string" } },
                },
                example: { server: "github", tool: "create_issue" },
              },
            },
          },
          responses: { "200": json("Released"), "404": ref("NotFound") },
        }),
      },
      [OPENAPI_PATH]: { get: op("This document", "observer") },
    },
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "MCP_SERVER_AUTH_TOKEN (clients), MCP_ADMIN_TOKEN (operators), a tokens-file token, " +
            "or a JWT (scope/scp claim). Scopes: mcp, approver, operator, admin (admin grants all)",
        },
      },
      schemas: {
        Error: {
          type: "object",
          required: ["error"],
          properties: {
            error: {
              type: "object",
              required: ["code", "message"],
              properties: { code: { type: "string" }, message: { type: "string" } },
            },
          },
        },
      },
      responses: Object.fromEntries(
        [
          ["Unauthorized", "No or invalid credentials"],
          ["Forbidden", "The caller lacks the scope named in the message"],
          ["NotFound", "Nothing by that id; the message names it"],
          ["McpDisabled", "An operator turned the MCP interface off"],
          ["NotImplemented", "Reserved for a later issue"],
          [
            "InvalidPath",
            "invalid_path / invalid_id: dot segments, encoded slashes, control characters or malformed percent-encoding in the path",
          ],
          [
            "ShuttingDown",
            "shutting_down: the gateway is stopping (Connection: close, Retry-After)",
          ],
          [
            "BodyTimeout",
            "request_timeout: the body did not arrive within MCP_HTTP_BODY_TIMEOUT_MS",
          ],
          [
            "PayloadTooLarge",
            "payload_too_large: the body exceeds MCP_MAX_MESSAGE_BYTES (declared or read)",
          ],
        ].map(([name, description]) => [
          name,
          json(description!, { $ref: "#/components/schemas/Error" }),
        ]),
      ),
    },
  };
}

/** `GET /v1/openapi.json` (scope `admin` or `operator`, of any tenant). */
export function openApiRoute(): HttpRoute {
  const body = JSON.stringify(openApiDocument());
  return {
    path: OPENAPI_PATH,
    methods: ["GET"],
    handle(_request, auth) {
      const refused = refuseScope(auth, "observe", `GET ${OPENAPI_PATH}`);
      return Promise.resolve(
        refused ?? new Response(body, { headers: { "Content-Type": "application/json" } }),
      );
    },
  };
}
