/**
 * What the proxy manager, the bridge and the operator routes use of one configured upstream,
 * whether one instance serves every caller (ChildServerHandle, `scope: shared`) or a pool starts
 * one per tenant or per session (ScopedUpstream).
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { Progress } from "@modelcontextprotocol/sdk/types.js";
import type { UpstreamCatalog } from "./catalog_fetch.ts";
import type { BreakerSnapshot, CircuitBreaker } from "./circuit_breaker.ts";
import type { FleetServer } from "./fleet_config.ts";

/** The seed's lifecycle states. */
export type LifecycleState = "STOPPED" | "STARTING" | "READY" | "DEGRADED" | "FAILED";

/** A server→client request from an upstream, to relay to the inbound client that caused it. */
export interface RelayedRequest {
  method: "sampling/createMessage" | "elicitation/create" | "roots/list";
  params?: Record<string, unknown>;
}

/** What one forwarded call carries back to its inbound client. */
export interface UpstreamCallContext {
  /** Aborted when the inbound client cancels or goes away. */
  signal: AbortSignal;
  /** Forwards upstream progress to the inbound client. */
  onProgress?: (progress: Progress) => void;
  /** Forwards an upstream log message to the inbound client. */
  onLog?: (params: { level: string; logger?: string; data: unknown }) => void;
  /** Relays a server→client request (sampling, elicitation, roots) to the inbound client. */
  relay?: (request: RelayedRequest, signal: AbortSignal) => Promise<Record<string, unknown>>;
  /** The caller's tenant: picks its instance of a `scope: tenant` upstream. */
  tenant?: string;
  /** The inbound session: server→client traffic never crosses from one session to another. */
  sessionId?: string;
  /** The caller's own bearer token; set only for `auth: passthrough` upstreams, never logged. */
  bearer?: string;
  /** Why the caller's bearer may not go to this `auth: passthrough` upstream; the call is refused. */
  bearerRefused?: string;
  /**
   * Runs once the circuit breaker admitted the call, just before it is sent (the call pipeline
   * redeems an approval token here, so a call the breaker refuses keeps its token). A rejection
   * fails the call without sending it and without counting against the upstream.
   */
  admitted?: () => Promise<void>;
  /**
   * The W3C trace context of the gateway's span for this call (tracing on): sent in the request's
   * `_meta` (`traceparent`, `tracestate`), which the HTTP relay also sends as headers.
   */
  trace?: { traceparent: string; tracestate?: string };
}

/** The latest health check. */
export interface HealthSnapshot {
  /** When it ran (clock ms); absent before the first check. */
  checkedAt?: number;
  ok?: boolean;
  latencyMs?: number;
  error?: string;
  consecutiveFailures: number;
}

/** Everything an operator sees about one upstream. */
export interface HandleSnapshot {
  id: string;
  transport: FleetServer["transport"];
  state: LifecycleState;
  breaker: BreakerSnapshot;
  health: HealthSnapshot;
  tools: number;
  resources: number;
  prompts: number;
  restarts: number;
  lastError?: string;
  serverInfo?: { name: string; version: string };
  /** The server's fleet `scope` (absent for `shared`). */
  scope?: "tenant" | "session";
  /** The tenant or session one instance of a scoped server serves. */
  instance?: string;
  /** A scoped server's running instances (the rest of this snapshot is its catalog template's). */
  instances?: HandleSnapshot[];
}

/**
 * Who may hear of one resource update: the subscribers of one tenant's or one session's instance
 * of a scoped server. Absent (a shared server): every session subscribed to the URI.
 */
export type ResourceAudience = { tenant: string } | { sessionId: string };

/** Why the handle changed, for the proxy manager. */
export type HandleChange = "state" | "catalog" | "breaker";

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
  onResourceUpdated(listener: (uri: string, audience?: ResourceAudience) => void): () => void;
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
