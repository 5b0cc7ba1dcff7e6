/**
 * The operator surface's HTTP routes, mounted by the kernel on its listener (behind the Host check
 * and authentication). Each family lives in its own file; this list is the one place they join.
 * @module
 */
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { adminRoutes } from "./admin_routes.ts";
import { dashboardRoute } from "./dashboard.ts";
import { eventsStreamRoute } from "./events_stream.ts";
import { kernelMetricsRoute } from "./metrics_kernel.ts";
import { scannerRoutes } from "./scanner_routes.ts";

/** Every operator route family, over the running gateway (the kernel, as an OperatorHost). */
export function operatorRoutes(host: OperatorHost): HttpRoute[] {
  return [
    eventsStreamRoute({ bus: host.bus, clock: host.clock }),
    dashboardRoute(),
    kernelMetricsRoute(host),
    ...adminRoutes(host),
    scannerRoutes(host),
  ];
}
