/**
 * Wires the gateway's metrics to a running kernel: which kernel part answers each source.
 * @module
 */
import type { OperatorHost } from "./operator_host.ts";
import type { HttpRoute } from "../http/http_route.ts";
import {
  GatewayMetrics,
  type GatewayMetricsSources,
  type NatsBusStats,
} from "./metrics_gateway.ts";
import { metricsRoute } from "./metrics_route.ts";

/** The kernel's parts as metric sources. */
export function kernelMetricsSources(kernel: OperatorHost): GatewayMetricsSources {
  return {
    observeCalls: (observer) => kernel.observeCalls(observer),
    // This replica's own events: with NATS, others' events would be counted twice.
    subscribe: (handler) => kernel.bus.subscribeLocal(handler),
    upstreams: () => kernel.proxy.status(),
    approvalsPending: () => kernel.approvals.list({ status: "pending" }).length,
    rateLimitFallbacks: () => kernel.rateLimitFallbacks,
    natsStats: () => natsStatsOf(kernel.pluginsOf("bus")[0]),
    residentMemoryBytes: () => Deno.memoryUsage().rss,
    // performance.now() counts from the process's time origin, and never goes backwards.
    uptimeSeconds: () => performance.now() / 1000,
  };
}

/** `GET /metrics` for a kernel; mounted through operatorRoutes. */
export function kernelMetricsRoute(kernel: OperatorHost): HttpRoute {
  return metricsRoute(new GatewayMetrics(kernelMetricsSources(kernel)));
}

/**
 * The NATS counters of a bus plugin instance, found by shape: core does not import plugins, and a
 * bus plugin without `stats()` (or with another shape) simply has no NATS metrics.
 */
export function natsStatsOf(bus: unknown): NatsBusStats | undefined {
  const stats = (bus as { stats?: unknown } | undefined)?.stats;
  if (typeof stats !== "function") return undefined;
  const s = stats.call(bus) as Partial<Record<keyof NatsBusStats, unknown>> | undefined;
  if (
    typeof s?.connected !== "boolean" || typeof s.dropped !== "number" ||
    typeof s.reconnects !== "number"
  ) {
    return undefined;
  }
  return { connected: s.connected, dropped: s.dropped, reconnects: s.reconnects };
}
