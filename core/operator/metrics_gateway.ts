/**
 * The gateway's metric set: what is exposed at `/metrics` and where each value comes from.
 *
 * Counts of things that happen (tool calls, governance decisions, health checks, sessions) are fed
 * as they happen, by the call observer and bus events; everything the gateway already keeps
 * (upstream state, breaker, tools, approvals, NATS stats, memory) is read at scrape time, so the
 * exposition can never drift from what `/v1/operator/status` shows.
 * @module
 */
import type { BridgeObserver } from "../mcp/bridge.ts";
import type { EventHandler } from "../bus/event_bus.ts";
import type { HandleSnapshot, LifecycleState } from "../proxy/child_server_handle.ts";
import type { BreakerState } from "../proxy/circuit_breaker.ts";
import { MetricRegistry, type MetricRegistryOptions } from "./metrics_registry.ts";

/** What the NATS bus plugin's `stats()` reports that metrics use. */
export interface NatsBusStats {
  connected: boolean;
  dropped: number;
  reconnects: number;
}

/** Where the gateway's metrics are read from; {@link kernelMetricsSources} adapts a kernel. */
export interface GatewayMetricsSources {
  /** Subscribes to every finished tool call; returns the unsubscribe function. */
  observeCalls(observer: BridgeObserver): () => void;
  /** Subscribes to bus events; returns the unsubscribe function. */
  subscribe(handler: EventHandler): () => void;
  upstreams(): HandleSnapshot[];
  approvalsPending(): number;
  /** Cluster mode: rate-limit calls decided by this replica's share, and the outages behind them. */
  rateLimitFallbacks?(): { fallbacks: number; outages: number } | undefined;
  /** The NATS bus's counters, or undefined when the bus is in process. */
  natsStats(): NatsBusStats | undefined;
  residentMemoryBytes(): number;
  uptimeSeconds(): number;
}

/** Every lifecycle state, so each upstream exposes a 0 for the states it is not in. */
export const LIFECYCLE_STATES: readonly LifecycleState[] = [
  "STOPPED",
  "STARTING",
  "READY",
  "DEGRADED",
  "FAILED",
];

/** Every breaker state, likewise. */
export const BREAKER_STATES: readonly BreakerState[] = ["CLOSED", "OPEN", "HALF_OPEN"];

/**
 * Tool call duration buckets in seconds: 0.1 ms (an in-process native tool) to 60 s (the default
 * upstream call timeout), roughly 1-2.5-5 per decade.
 */
export const TOOL_CALL_BUCKETS: readonly number[] = [
  0.0001,
  0.00025,
  0.0005,
  0.001,
  0.0025,
  0.005,
  0.01,
  0.025,
  0.05,
  0.1,
  0.25,
  0.5,
  1,
  2.5,
  5,
  10,
  30,
  60,
];

/** The gateway's metrics over a {@link MetricRegistry}; call `close()` to stop observing. */
export class GatewayMetrics {
  readonly registry: MetricRegistry;
  #unsubscribe: (() => void)[] = [];

  constructor(sources: GatewayMetricsSources, options: MetricRegistryOptions = {}) {
    const r = new MetricRegistry(options);
    this.registry = r;

    const calls = r.counter({
      name: "agent33_tool_calls_total",
      help: 'Finished tool calls by upstream server ("" for native tools), tool and outcome.',
      labelNames: ["server", "tool", "outcome"],
      // Tool names come from callers (denied and unknown names are observed too); server ids come
      // from the fleet file and outcomes are four, so only the tool is folded.
      fold: ["tool"],
    });
    const durations = r.histogram({
      name: "agent33_tool_call_duration_seconds",
      help: "Tool call duration, from request to answer, by upstream server and outcome.",
      labelNames: ["server", "outcome"],
      buckets: TOOL_CALL_BUCKETS,
    });
    const decisions = r.counter({
      name: "agent33_governance_decisions_total",
      help: 'Governance decisions by verdict and denial code ("" when allowed).',
      labelNames: ["verdict", "code"],
    });
    const upstreamState = r.gauge({
      name: "agent33_upstream_state",
      help: "1 for the upstream's current lifecycle state, 0 for the others.",
      labelNames: ["server", "state"],
    });
    const breakerState = r.gauge({
      name: "agent33_upstream_breaker_state",
      help: "1 for the upstream circuit breaker's current state, 0 for the others.",
      labelNames: ["server", "state"],
    });
    // Trips and restarts reset when the upstream recovers, so they are gauges, not counters.
    const breakerTrips = r.gauge({
      name: "agent33_upstream_breaker_trips",
      help: "Consecutive circuit breaker trips since the breaker last closed.",
      labelNames: ["server"],
    });
    const restarts = r.gauge({
      name: "agent33_upstream_restarts",
      help: "Automatic restarts since the upstream was last READY.",
      labelNames: ["server"],
    });
    const tools = r.gauge({
      name: "agent33_upstream_tools",
      help: "Tools the upstream advertises.",
      labelNames: ["server"],
    });
    const healthLatency = r.gauge({
      name: "agent33_upstream_health_check_latency_seconds",
      help: "Latency of the upstream's last health check.",
      labelNames: ["server"],
    });
    const healthChecks = r.counter({
      name: "agent33_upstream_health_checks_total",
      help: "Upstream health checks by result (ok or failed).",
      labelNames: ["server", "result"],
    });
    const sessions = r.gauge({
      name: "agent33_sessions",
      help: "Open inbound MCP sessions by transport.",
      labelNames: ["transport"],
    });
    const approvalsPending = r.gauge({
      name: "agent33_approvals_pending",
      help: "Approval requests waiting for an operator.",
    });
    const rateLimitFallbacks = r.counter({
      name: "agent33_rate_limit_fallbacks_total",
      help: "Rate-limited calls decided by this replica's share of the limit because the shared " +
        "counters (agent33_rate_limits) could not be reached; absent outside cluster mode.",
    });
    const rateLimitOutages = r.counter({
      name: "agent33_rate_limit_outages_total",
      help: "Times the shared rate-limit counters became unreachable; absent outside cluster mode.",
    });
    const natsConnected = r.gauge({
      name: "agent33_nats_connected",
      help: "1 while the NATS event bus is connected, else 0; absent without NATS.",
    });
    const natsDropped = r.counter({
      name: "agent33_nats_events_dropped_total",
      help: "Events the NATS bus lost (buffer full while disconnected, or refused by the client).",
    });
    const natsReconnects = r.counter({
      name: "agent33_nats_reconnects_total",
      help: "Reconnections of the NATS event bus.",
    });
    const rss = r.gauge({
      name: "agent33_process_resident_memory_bytes",
      help: "Resident set size of the gateway process.",
    });
    const uptime = r.gauge({
      name: "agent33_uptime_seconds",
      help: "Seconds since the gateway process started.",
    });
    const folded = r.counter({
      name: "agent33_metrics_folded_total",
      help: 'Observations folded into "(other)" series because a metric reached its series limit.',
      labelNames: ["metric"],
    });

    this.#unsubscribe.push(
      sources.observeCalls({
        toolCall(record) {
          const server = record.server ?? "";
          calls.inc({ server, tool: record.tool, outcome: record.outcome });
          durations.observe({ server, outcome: record.outcome }, record.durationMs / 1000);
        },
      }),
      sources.subscribe((event) => {
        switch (event.type) {
          case "governance.decision":
            decisions.inc({ verdict: event.verdict, code: event.code ?? "" });
            break;
          case "proxy.health":
            healthChecks.inc({ server: event.server, result: event.ok ? "ok" : "failed" });
            break;
          case "session.opened":
            sessions.inc({ transport: event.transport });
            break;
          case "session.closed":
            sessions.inc({ transport: event.transport }, -1);
            break;
        }
      }),
    );

    r.beforeRender(() => {
      // Recomputed each scrape, so a server removed from the fleet disappears.
      for (const gauge of [upstreamState, breakerState, breakerTrips, restarts, tools]) {
        gauge.reset();
      }
      healthLatency.reset();
      for (const s of sources.upstreams()) {
        const server = s.id;
        for (const state of LIFECYCLE_STATES) {
          upstreamState.set({ server, state }, s.state === state ? 1 : 0);
        }
        for (const state of BREAKER_STATES) {
          breakerState.set({ server, state }, s.breaker.state === state ? 1 : 0);
        }
        breakerTrips.set({ server }, s.breaker.trips);
        restarts.set({ server }, s.restarts);
        tools.set({ server }, s.tools);
        if (s.health.latencyMs !== undefined) {
          healthLatency.set({ server }, s.health.latencyMs / 1000);
        }
      }
      approvalsPending.set({}, sources.approvalsPending());
      const fallbacks = sources.rateLimitFallbacks?.();
      for (const family of [rateLimitFallbacks, rateLimitOutages]) family.reset();
      if (fallbacks) {
        rateLimitFallbacks.setTotal({}, fallbacks.fallbacks);
        rateLimitOutages.setTotal({}, fallbacks.outages);
      }
      const nats = sources.natsStats();
      for (const family of [natsConnected, natsDropped, natsReconnects]) family.reset();
      if (nats) {
        natsConnected.set({}, nats.connected ? 1 : 0);
        natsDropped.setTotal({}, nats.dropped);
        natsReconnects.setTotal({}, nats.reconnects);
      }
      rss.set({}, sources.residentMemoryBytes());
      uptime.set({}, sources.uptimeSeconds());
      for (const { name, folds } of r.folds()) {
        if (folds > 0) folded.setTotal({ metric: name }, folds);
      }
    });
  }

  /** The exposition in the text format 0.0.4. */
  render(): string {
    return this.registry.render();
  }

  /** Stops observing calls and events. Idempotent. */
  close(): void {
    for (const unsubscribe of this.#unsubscribe.splice(0)) unsubscribe();
  }
}
