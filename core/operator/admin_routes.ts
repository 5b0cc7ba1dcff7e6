/**
 * The admin API's routes, joined: the MCP interface, the fleet, the connector boundary and the
 * OpenAPI document. Every route needs scope `operator` to read or restart and `admin` to change.
 * @module
 */
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { connectorRoutes } from "./admin_connector_routes.ts";
import { mcpAdminRoutes } from "./admin_mcp_routes.ts";
import { serverRoutes } from "./admin_server_routes.ts";
import { openApiRoute } from "./openapi.ts";

/** Every admin route over the running kernel. */
export function adminRoutes(kernel: OperatorHost): HttpRoute[] {
  return [
    ...mcpAdminRoutes(kernel),
    serverRoutes(kernel),
    connectorRoutes(kernel),
    openApiRoute(),
  ];
}
