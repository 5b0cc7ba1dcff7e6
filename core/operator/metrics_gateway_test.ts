import assert from "node:assert/strict";
import type { BridgeObserver } from "../mcp/bridge.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import type { HandleSnapshot } from "../proxy/child_server_handle.ts";
import {
  GatewayMetrics,
  type GatewayMetricsSources,
  type NatsBusStats,
} from "./metrics_gateway.ts";

interface Fake {
  sources: GatewayMetricsSources;
  bus: InProcessEventBus;
  observers: Set<BridgeObserver>;
  upstreams: HandleSnapshot[];
  set(values: { pending?: number; nats?: NatsBusStats }): void;
}

function fake(): Fake {
  const bus = new InProcessEventBus();
  const observers = new Set<BridgeObserver>();
  const state = { pending: 0, nats: undefined as NatsBusStats | undefined };
  const f: Fake = {
    bus,
    observers,
    upstreams: [],
    set: (values) => Object.assign(state, values),
    sources: {
      observeCalls: (o) => {
        observers.add(o);
        return () => void observers.delete(o);
      },
      subscribe: (h) => bus.subscribe(h),
      upstreams: () => f.upstreams,
      approvalsPending: () => state.pending,
      natsStats: () => state.nats,
      residentMemoryBytes: () => 123456,
      uptimeSeconds: () => 42.5,
    },
  };
  return f;
}

function snapshot(id: string, overrides: Partial<HandleSnapshot> = {}): HandleSnapshot {
  return {
    id,
    transport: "stdio",
    state: "READY",
    breaker: { state: "CLOSED", trips: 0, consecutiveFailures: 0, retryAfterMs: 0 },
    health: { consecutiveFailures: 0 },
    tools: 3,
    resources: 0,
    prompts: 0,
    restarts: 0,
    ...overrides,
  };
}

/** The sample lines of one metric family (its name followed by `{`, `_` suffixes or a space). */
function samples(text: string, name: string): string[] {
  return text.split("\n").filter((l) => l.startsWith(`${name}{`) || l.startsWith(`${name} `));
}

Deno.test('Tool calls count by server, tool and outcome; native tools have server ""', () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  for (const o of f.observers) {
    o.toolCall({ tool: "system_status", tenant: "t", outcome: "ok", durationMs: 0.2 });
    o.toolCall({ tool: "fs__read", server: "fs", tenant: "t", outcome: "ok", durationMs: 30 });
    o.toolCall({ tool: "fs__read", server: "fs", tenant: "t", outcome: "ok", durationMs: 40 });
    o.toolCall({ tool: "fs__rm", server: "fs", tenant: "t", outcome: "denied", durationMs: 1 });
  }
  const text = metrics.render();
  assert.deepEqual(samples(text, "agent33_tool_calls_total"), [
    'agent33_tool_calls_total{server="",tool="system_status",outcome="ok"} 1',
    'agent33_tool_calls_total{server="fs",tool="fs__read",outcome="ok"} 2',
    'agent33_tool_calls_total{server="fs",tool="fs__rm",outcome="denied"} 1',
  ]);
  assert.match(text, /^# TYPE agent33_tool_call_duration_seconds histogram$/m);
  assert.match(
    text,
    /^agent33_tool_call_duration_seconds_bucket\{server="fs",outcome="ok",le="0.025"\} 0$/m,
  );
  assert.match(
    text,
    /^agent33_tool_call_duration_seconds_bucket\{server="fs",outcome="ok",le="0.05"\} 2$/m,
  );
  assert.match(text, /^agent33_tool_call_duration_seconds_sum\{server="fs",outcome="ok"\} 0.07$/m);
  assert.match(
    text,
    /^agent33_tool_call_duration_seconds_bucket\{server="",outcome="ok",le="0.00025"\} 1$/m,
  );
  metrics.close();
});

Deno.test('Random tool names fold into tool="(other)" past the series limit', () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources, { maxSeries: 5 });
  for (const o of f.observers) {
    for (let i = 0; i < 50; i++) {
      o.toolCall({ tool: `junk${i}`, tenant: "t", outcome: "error", durationMs: 1 });
    }
  }
  const text = metrics.render();
  const calls = samples(text, "agent33_tool_calls_total");
  assert.equal(calls.length, 6);
  assert.equal(calls[5], 'agent33_tool_calls_total{server="",tool="(other)",outcome="error"} 45');
  assert.deepEqual(samples(text, "agent33_metrics_folded_total"), [
    'agent33_metrics_folded_total{metric="agent33_tool_calls_total"} 45',
  ]);
  metrics.close();
});

Deno.test("Governance decisions count by verdict and code from governance.decision events", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  const base = {
    type: "governance.decision" as const,
    time: "2026-01-01T00:00:00Z",
    tenant: "t",
    subject: "s",
    tool: "x",
    effect: "read" as const,
    argumentsHash: "h",
  };
  f.bus.publish({ ...base, verdict: "allow" });
  f.bus.publish({ ...base, verdict: "deny", code: "tool_denied" });
  f.bus.publish({ ...base, verdict: "deny", code: "tool_denied" });
  f.bus.publish({ ...base, verdict: "approval_required", code: "approval_required" });
  assert.deepEqual(samples(metrics.render(), "agent33_governance_decisions_total"), [
    'agent33_governance_decisions_total{verdict="allow",code=""} 1',
    'agent33_governance_decisions_total{verdict="deny",code="tool_denied"} 2',
    'agent33_governance_decisions_total{verdict="approval_required",code="approval_required"} 1',
  ]);
  metrics.close();
});

Deno.test("Upstream state and breaker state are 1 for the current state and 0 for every other", () => {
  const f = fake();
  f.upstreams = [
    snapshot("a"),
    snapshot("b", {
      state: "DEGRADED",
      breaker: { state: "OPEN", trips: 2, consecutiveFailures: 5, retryAfterMs: 1000 },
      health: { consecutiveFailures: 1, ok: false, latencyMs: 250, checkedAt: 1 },
      tools: 0,
      restarts: 1,
    }),
  ];
  const metrics = new GatewayMetrics(f.sources);
  const text = metrics.render();
  assert.deepEqual(samples(text, "agent33_upstream_state"), [
    'agent33_upstream_state{server="a",state="STOPPED"} 0',
    'agent33_upstream_state{server="a",state="STARTING"} 0',
    'agent33_upstream_state{server="a",state="READY"} 1',
    'agent33_upstream_state{server="a",state="DEGRADED"} 0',
    'agent33_upstream_state{server="a",state="FAILED"} 0',
    'agent33_upstream_state{server="b",state="STOPPED"} 0',
    'agent33_upstream_state{server="b",state="STARTING"} 0',
    'agent33_upstream_state{server="b",state="READY"} 0',
    'agent33_upstream_state{server="b",state="DEGRADED"} 1',
    'agent33_upstream_state{server="b",state="FAILED"} 0',
  ]);
  assert.deepEqual(samples(text, "agent33_upstream_breaker_state").slice(3), [
    'agent33_upstream_breaker_state{server="b",state="CLOSED"} 0',
    'agent33_upstream_breaker_state{server="b",state="OPEN"} 1',
    'agent33_upstream_breaker_state{server="b",state="HALF_OPEN"} 0',
  ]);
  assert.deepEqual(samples(text, "agent33_upstream_breaker_trips"), [
    'agent33_upstream_breaker_trips{server="a"} 0',
    'agent33_upstream_breaker_trips{server="b"} 2',
  ]);
  assert.deepEqual(samples(text, "agent33_upstream_restarts"), [
    'agent33_upstream_restarts{server="a"} 0',
    'agent33_upstream_restarts{server="b"} 1',
  ]);
  assert.deepEqual(samples(text, "agent33_upstream_tools"), [
    'agent33_upstream_tools{server="a"} 3',
    'agent33_upstream_tools{server="b"} 0',
  ]);
  // Only b has been checked.
  assert.deepEqual(samples(text, "agent33_upstream_health_check_latency_seconds"), [
    'agent33_upstream_health_check_latency_seconds{server="b"} 0.25',
  ]);
  metrics.close();
});

Deno.test("An upstream removed from the fleet disappears at the next scrape", () => {
  const f = fake();
  f.upstreams = [snapshot("a"), snapshot("b")];
  const metrics = new GatewayMetrics(f.sources);
  assert.equal(samples(metrics.render(), "agent33_upstream_tools").length, 2);
  f.upstreams = [snapshot("a")];
  assert.deepEqual(samples(metrics.render(), "agent33_upstream_tools"), [
    'agent33_upstream_tools{server="a"} 3',
  ]);
  metrics.close();
});

Deno.test("Health checks count by server and result from proxy.health events", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  f.bus.publish({ type: "proxy.health", server: "a", ok: true, latencyMs: 3 });
  f.bus.publish({ type: "proxy.health", server: "a", ok: true, latencyMs: 4 });
  f.bus.publish({ type: "proxy.health", server: "a", ok: false, latencyMs: 9, error: "x" });
  assert.deepEqual(samples(metrics.render(), "agent33_upstream_health_checks_total"), [
    'agent33_upstream_health_checks_total{server="a",result="ok"} 2',
    'agent33_upstream_health_checks_total{server="a",result="failed"} 1',
  ]);
  metrics.close();
});

Deno.test("Sessions are counted per transport as they open and close", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  f.bus.publish({
    type: "session.opened",
    sessionId: "1",
    transport: "streamable-http",
    tenant: "t",
  });
  f.bus.publish({
    type: "session.opened",
    sessionId: "2",
    transport: "streamable-http",
    tenant: "t",
  });
  f.bus.publish({ type: "session.opened", sessionId: "3", transport: "sse", tenant: "t" });
  f.bus.publish({ type: "session.closed", sessionId: "3", transport: "sse", tenant: "t" });
  assert.deepEqual(samples(metrics.render(), "agent33_sessions"), [
    'agent33_sessions{transport="streamable-http"} 2',
    'agent33_sessions{transport="sse"} 0',
  ]);
  metrics.close();
});

Deno.test("Approvals pending, memory and uptime are read at scrape time", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  f.set({ pending: 4 });
  const text = metrics.render();
  assert.deepEqual(samples(text, "agent33_approvals_pending"), ["agent33_approvals_pending 4"]);
  assert.deepEqual(samples(text, "agent33_process_resident_memory_bytes"), [
    "agent33_process_resident_memory_bytes 123456",
  ]);
  assert.deepEqual(samples(text, "agent33_uptime_seconds"), ["agent33_uptime_seconds 42.5"]);
  metrics.close();
});

Deno.test("NATS metrics are absent without a NATS bus and mirror its stats with one", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  assert.doesNotMatch(metrics.render(), /agent33_nats_/);
  f.set({ nats: { connected: false, dropped: 7, reconnects: 2 } });
  const text = metrics.render();
  assert.deepEqual(samples(text, "agent33_nats_connected"), ["agent33_nats_connected 0"]);
  assert.deepEqual(samples(text, "agent33_nats_events_dropped_total"), [
    "agent33_nats_events_dropped_total 7",
  ]);
  assert.deepEqual(samples(text, "agent33_nats_reconnects_total"), [
    "agent33_nats_reconnects_total 2",
  ]);
  assert.match(text, /^# TYPE agent33_nats_events_dropped_total counter$/m);
  metrics.close();
});

Deno.test("rate-limit fallback metrics are absent outside cluster mode and count the share's calls in it", () => {
  const f = fake();
  const limiter: { stats?: { fallbacks: number; outages: number } } = {};
  const metrics = new GatewayMetrics({ ...f.sources, rateLimitFallbacks: () => limiter.stats });
  assert.doesNotMatch(metrics.render(), /agent33_rate_limit_/);
  limiter.stats = { fallbacks: 12, outages: 1 };
  const text = metrics.render();
  assert.deepEqual(samples(text, "agent33_rate_limit_fallbacks_total"), [
    "agent33_rate_limit_fallbacks_total 12",
  ]);
  assert.deepEqual(samples(text, "agent33_rate_limit_outages_total"), [
    "agent33_rate_limit_outages_total 1",
  ]);
  metrics.close();
});

Deno.test("close() stops observing calls and events", () => {
  const f = fake();
  const metrics = new GatewayMetrics(f.sources);
  metrics.close();
  assert.equal(f.observers.size, 0);
  f.bus.publish({ type: "proxy.health", server: "a", ok: true, latencyMs: 3 });
  assert.doesNotMatch(metrics.render(), /health_checks_total/);
  metrics.close();
});
