/**
 * `GET /metrics`: the Prometheus scrape endpoint. Prometheus authenticates like any operator
 * client (a bearer token), so the route needs scope `admin` or `operator`.
 * @module
 */
import { refuseScope } from "./admin_scope.ts";
import type { HttpRoute } from "../http/http_route.ts";
import { EXPOSITION_CONTENT_TYPE } from "./metrics_exposition.ts";

/** The path Prometheus scrapes by default. */
export const METRICS_PATH = "/metrics";

/** `GET /metrics`, serving `metrics.render()` as text format 0.0.4 to admins and operators. */
export function metricsRoute(metrics: { render(): string }): HttpRoute {
  return {
    path: METRICS_PATH,
    methods: ["GET"],
    handle(_request, auth) {
      const refused = refuseScope(auth, "read", METRICS_PATH);
      if (refused) return Promise.resolve(refused);
      return Promise.resolve(
        new Response(metrics.render(), {
          headers: { "Content-Type": EXPOSITION_CONTENT_TYPE, "Cache-Control": "no-store" },
        }),
      );
    },
  };
}
