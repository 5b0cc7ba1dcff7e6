/**
 * The MCP room, built once from the settings: the one call path (CallPipeline), the bridge with
 * its SDK `Server` per session, the session gate, and the session pipeline every transport
 * plugin's sessions are built through.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { ApprovalQueue } from "../governance/approval_queue.ts";
import type { ToolGovernance } from "../governance/tool_governance.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { Tracing } from "../tracing/gateway_tracer.ts";
import { type BridgeObserver, MCPServiceBridge } from "./bridge.ts";
import { CallPipeline, HTTP_HINTS, STDIO_HINTS } from "./call_pipeline.ts";
import type { DefinitionRegistry } from "./definition_registry.ts";
import { SessionGate } from "./session_gate.ts";
import { SessionPipeline } from "./session_pipeline.ts";
import { ToolActivationManager } from "./tool_activation_manager.ts";
import { ToolDiscovery } from "./tool_discovery.ts";
import type { ToolRegistry } from "./tool_registry.ts";

/** The pieces of the MCP surface the gateway runs. */
export interface McpRoom {
  /** The one path of every tool call, for clients (the bridge) and the engine alike. */
  calls: CallPipeline;
  bridge: MCPServiceBridge;
  gate: SessionGate;
  sessions: SessionPipeline;
  /** Calls `observer` for every finished tool call (metrics); returns the unsubscribe function. */
  observeCalls(observer: BridgeObserver): () => void;
}

/** What the MCP room serves from. */
export interface McpRoomDeps {
  registries: {
    tools: ToolRegistry;
    agents: DefinitionRegistry;
    skills: DefinitionRegistry;
    workflows: DefinitionRegistry;
  };
  proxy: ProxyManager;
  governance: ToolGovernance;
  approvals: ApprovalQueue;
  tracing: Tracing;
  clock: Clock;
  bus: EventBus;
  logger: Logger;
}

/** Builds the MCP room. */
export function createMcp(config: GatewayConfig, deps: McpRoomDeps): McpRoom {
  const { server } = config;
  const { registries, proxy, governance, approvals } = deps;
  const gate = new SessionGate(server, deps.logger, deps.clock);
  const observers = new Set<BridgeObserver>();
  const calls = new CallPipeline({
    tools: registries.tools,
    proxy,
    governance,
    approvals,
    // A stdio-only gateway has no approvals or scanner routes to point callers at.
    hints: server.transport === "stdio" ? STDIO_HINTS : HTTP_HINTS,
  });
  const bridge = new MCPServiceBridge({
    toolRegistry: registries.tools,
    agentRegistry: registries.agents,
    skillRegistry: registries.skills,
    workflowRegistry: registries.workflows,
    logger: deps.logger.child("bridge"),
    clock: deps.clock,
    bus: deps.bus,
    pageSize: server.pageSize,
    proxy,
    pipeline: calls,
    tracing: deps.tracing,
    callsInFlight: () => gate.inFlightCalls,
    startupWaitMs: config.proxy.startupWaitMs,
    approvalInBand: config.governance.approvalInBand,
    observer: {
      toolCall: (record) => {
        for (const observer of observers) observer.toolCall(record);
      },
    },
    discovery: new ToolDiscovery({
      governance,
      activation: new ToolActivationManager(),
      defaultMode: server.toolDiscoveryMode,
    }),
  });
  // The bridge's serve is looked up per session (tests replace it to watch what reaches it).
  const sessions = new SessionPipeline(
    gate,
    (transport, info, stages) => bridge.serve(transport, info, stages),
  );
  return {
    calls,
    bridge,
    gate,
    sessions,
    observeCalls: (observer) => {
      observers.add(observer);
      return () => void observers.delete(observer);
    },
  };
}
