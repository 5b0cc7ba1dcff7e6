/**
 * `/v1/scanner`: what the in-gateway scanner found, and releasing a quarantined tool.
 *
 * - `GET /v1/scanner/findings` (operator): per serving server, its findings and quarantined tools.
 * - `POST /v1/scanner/release` (operator), body `{ "server": "…", "tool": "…" }`: the tool's current
 *   definition becomes its pin and it serves again.
 * @module
 */
import { jsonError } from "../http/http_listener.ts";
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { methodNotAllowed, refuseScope } from "./admin_scope.ts";

/** The scanner routes over a running kernel. */
export function scannerRoutes(kernel: OperatorHost): HttpRoute {
  return {
    path: "/v1/scanner",
    prefix: true,
    methods: ["GET", "POST"],
    async handle(request, auth) {
      const { pathname } = new URL(request.url);
      const scanner = kernel.scanner;
      if (!scanner) {
        return jsonError(503, "not_ready", "The scanner starts with the gateway; retry shortly");
      }
      if (pathname === "/v1/scanner/findings") {
        if (request.method !== "GET") return methodNotAllowed(request.method, pathname, ["GET"]);
        const refused = refuseScope(auth, "read", "reading scanner findings");
        if (refused) return refused;
        return Response.json({
          servers: kernel.proxy.handles().map((h) => ({
            id: h.id,
            findings: scanner.findingsFor(h.id),
            quarantined: scanner.quarantinedTools(h.id),
          })),
        });
      }
      if (pathname === "/v1/scanner/release") {
        if (request.method !== "POST") return methodNotAllowed(request.method, pathname, ["POST"]);
        const refused = refuseScope(auth, "operate", "releasing a quarantined tool");
        if (refused) return refused;
        const body = await request.json().catch(() => undefined) as
          | { server?: unknown; tool?: unknown }
          | undefined;
        if (typeof body?.server !== "string" || typeof body.tool !== "string") {
          return jsonError(
            400,
            "invalid_request",
            'Send JSON { "server": "<id>", "tool": "<upstream tool name>" }',
          );
        }
        if (!scanner.release(body.server, body.tool, auth.subject)) {
          return jsonError(
            404,
            "not_found",
            `Tool "${body.tool}" of server "${body.server}" is not quarantined; see GET /v1/scanner/findings`,
          );
        }
        return Response.json({ released: { server: body.server, tool: body.tool } });
      }
      return jsonError(
        404,
        "not_found",
        `Nothing is served at ${pathname}; use /v1/scanner/findings or /v1/scanner/release`,
      );
    },
  };
}
