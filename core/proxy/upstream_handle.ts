/**
 * What the proxy manager, the bridge and the operator routes use of one configured upstream,
 * whether one instance serves every caller (ChildServerHandle, `scope: shared`) or a pool starts
 * one per tenant or per session (ScopedUpstream).
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type {
  HandleChange,
  HandleSnapshot,
  LifecycleState,
  UpstreamCallContext,
  UpstreamCatalog,
} from "./child_server_handle.ts";
import type { CircuitBreaker } from "./circuit_breaker.ts";
import type { FleetServer } from "./fleet_config.ts";

/** One configured upstream server. */
export interface UpstreamHandle {
  readonly id: string;
  readonly server: FleetServer;
  /** The breaker of the instance whose catalog is listed. */
  readonly breaker: CircuitBreaker;
  readonly state: LifecycleState;
  /** Whether its tools are listed and calls may be sent. */
  readonly serving: boolean;
  readonly catalog: UpstreamCatalog;
  readonly serverDescription: { instructions?: string; serverInfo?: Record<string, unknown> };
  readonly capabilities: ReturnType<Client["getServerCapabilities"]>;
  onChange(listener: (change: HandleChange) => void): () => void;
  onResourceUpdated(listener: (uri: string) => void): () => void;
  start(): Promise<void>;
  stop(): Promise<void>;
  restart(): Promise<void>;
  checkHealth(): Promise<void>;
  callTool(
    name: string,
    args: Record<string, unknown>,
    ctx: UpstreamCallContext,
  ): Promise<CallToolResult>;
  readResource(uri: string, ctx: UpstreamCallContext): ReturnType<Client["readResource"]>;
  getPrompt(
    name: string,
    args: Record<string, string>,
    ctx: UpstreamCallContext,
  ): ReturnType<Client["getPrompt"]>;
  complete(
    params: Parameters<Client["complete"]>[0],
    ctx: UpstreamCallContext,
  ): ReturnType<Client["complete"]>;
  subscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown>;
  unsubscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown>;
  snapshot(): HandleSnapshot;
  /** An inbound session ended: a `scope: session` server stops that session's instance. */
  endSession(sessionId: string): Promise<void>;
}
