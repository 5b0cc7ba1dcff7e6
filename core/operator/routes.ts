/**
 * The operator surface's HTTP routes, mounted by the kernel on its listener (behind the Host check
 * and authentication). Each family lives in its own file; this list is the one place they join.
 * @module
 */
import type { Kernel } from "../kernel.ts";
import type { HttpRoute } from "../http_route.ts";
import { adminRoutes } from "./admin_routes.ts";
import { dashboardRoute } from "./dashboard.ts";
import { eventsStreamRoute } from "./events_stream.ts";
import { kernelMetricsRoute } from "./metrics_kernel.ts";
import { scannerRoutes } from "./scanner_routes.ts";

/** Every operator route family, given the running kernel. */
export function operatorRoutes(_kernel: Kernel): HttpRoute[] {
  return [
    eventsStreamRoute({ bus: _kernel.bus, clock: _kernel.clock }),
    dashboardRoute(),
    kernelMetricsRoute(_kernel),
    ...adminRoutes(_kernel),
    scannerRoutes(_kernel),
  ];
}
