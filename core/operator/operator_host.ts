/**
 * What the operator surface (admin API, metrics, events, scanner and sync routes) may use of the
 * running gateway: exactly the members its routes read or call. The kernel implements it; the
 * routes are written against this interface, never against the kernel itself, so no route file
 * imports core/kernel.ts and the import graph has no circle through the kernel.
 * @module
 */
import type { BridgeObserver, MCPServiceBridge } from "../mcp/bridge.ts";
import type { Clock } from "../support/clock.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { ApprovalQueue } from "../governance/approval_queue.ts";
import type { PolicySet } from "../governance/policy.ts";
import type { ToolGovernance } from "../governance/tool_governance.ts";
import type { PluginKind } from "../plugin_api/mod.ts";
import type { PluginInstance } from "../plugin_host/plugin_instances.ts";
import type { FleetConfig, FleetServer } from "../proxy/fleet_config.ts";
import type { FleetStore } from "../proxy/fleet_store.ts";
import type { FleetDiff } from "../proxy/fleet_reloader.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { GatewayScanner } from "../scanner/gateway_scanner.ts";
import type { DiscoveryService } from "../sync/discovery_service.ts";
import type { SwitchableEventBus } from "../bus/switchable_event_bus.ts";
import type { Logger } from "../support/logger.ts";

export type { FleetDiff };

/** The running gateway as the operator routes see it (implemented by the Kernel). */
export interface OperatorHost {
  readonly config: GatewayConfig;
  /** The resolved environment (`.env` under the process's variables), as the config read it. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly clock: Clock;
  /** The gateway's log, for what a route notices beyond its answer. */
  readonly logger: Logger;
  readonly bus: SwitchableEventBus;
  readonly bridge: MCPServiceBridge;
  readonly proxy: ProxyManager;
  readonly governance: ToolGovernance;
  readonly approvals: ApprovalQueue;
  /** Cluster mode: how often rate limits fell back to this replica's share (KV unreachable). */
  readonly rateLimitFallbacks?: { fallbacks: number; outages: number } | undefined;
  /** The scanner inside the gateway, once started. */
  readonly scanner: GatewayScanner | undefined;
  /** Discovery kept running (MCP_DISCOVERY), once started; absent while it is off. */
  readonly discovery: DiscoveryService | undefined;
  /** The fleet as last applied, disabled servers included. */
  readonly fleet: readonly FleetServer[];
  /** Where fleet edits go: the shared bucket in cluster mode, else the fleet file (if any). */
  readonly fleetStore: FleetStore | undefined;
  /** Whether the MCP interface (/mcp, /sse, /messages) serves. */
  readonly mcpEnabled: boolean;
  /** Turns the MCP interface on or off at runtime; while off its routes answer 503. */
  setMcpEnabled(enabled: boolean): void;
  /** Calls `observer` for every finished tool call; returns the unsubscribe function. */
  observeCalls(observer: BridgeObserver): () => void;
  /** Instances of loaded plugins of one kind (the bus for its stats, discovery sources). */
  pluginsOf<K extends PluginKind>(kind: K): readonly PluginInstance<K>[];
  /** Parses fleet text and checks every enabled server can be planned; throws `config_invalid`. */
  checkFleet(text: string, path: string): FleetConfig;
  /** Applies a checked fleet without a restart (one application at a time). */
  applyFleet(servers: readonly FleetServer[]): Promise<FleetDiff>;
  /** Re-reads and applies the fleet file now; a bad file keeps the running fleet and throws why. */
  reloadFleet(): Promise<FleetDiff>;
  /** Re-reads the policy files now; a bad file keeps the policy in force and throws why. */
  reloadPolicies(): Promise<PolicySet>;
}
