/**
 * MCPServiceBridge: the wiring layer between MCP sessions and the engine's services.
 *
 * Each inbound session gets its own low-level SDK `Server` (the tool list is dynamic, so the
 * high-level `McpServer` does not fit); the bridge builds it and installs one handler family per
 * method group on it — tools_handlers.ts, resources_handlers.ts, prompts_handlers.ts,
 * completion_handlers.ts, logging_handlers.ts — each given a {@link SessionContext} and the few
 * services it needs. The bridge keeps the live sessions, the notifications fanned out to all of
 * them; the session gate counts the tool calls in flight. The caller was authenticated by the transport
 * before `serve` is called.
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Clock } from "../support/clock.ts";
import type { DefinitionRegistry } from "./definition_registry.ts";
import { GatewayError } from "../support/errors.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { Logger } from "../support/logger.ts";
import type { ServedSession, SessionInfo, SessionState } from "../plugin_api/mod.ts";
import type { CallPipeline } from "./call_pipeline.ts";
import type { CatalogView, ProxyManager } from "../proxy/proxy_manager.ts";
import type { ToolDiscovery } from "./tool_discovery.ts";
import type { ToolRegistry } from "./tool_registry.ts";
import { type ToolCallHandler, ToolCallLane } from "./tool_call_lane.ts";
import type { SessionStage } from "../plugin_api/session_stage.ts";
import { compose } from "../plugin_api/stage_pipeline.ts";
import type { InboundSession } from "./upstream_context.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import { passthroughBearer } from "../proxy/passthrough_bearer.ts";
import type { ResourceAudience } from "../proxy/upstream_handle.ts";
import type { Tracing } from "../tracing/gateway_tracer.ts";
import { EngineCatalog, STATUS_URI, type SystemStatus } from "./engine_catalog.ts";
import { handleRequest } from "./request_handler.ts";
import { itemAccess, type SessionContext } from "./session_context.ts";
import { sessionSpans } from "./session_spans.ts";
import { registerLoggingHandlers } from "./logging_handlers.ts";
import { type BridgeObserver, registerToolHandlers } from "./tools_handlers.ts";
import {
  registerResourceHandlers,
  routeResourceUpdate,
  subscriptionKey,
} from "./resources_handlers.ts";
import { registerPromptHandlers } from "./prompts_handlers.ts";
import { registerCompletionHandlers } from "./completion_handlers.ts";

export { STATUS_URI, type SystemStatus } from "./engine_catalog.ts";
export type { BridgeObserver, ToolCallOutcome, ToolCallRecord } from "./tools_handlers.ts";

/** What the bridge is built from (the seed's constructor arguments). */
export interface MCPServiceBridgeOptions {
  toolRegistry: ToolRegistry;
  agentRegistry: DefinitionRegistry;
  skillRegistry: DefinitionRegistry;
  workflowRegistry: DefinitionRegistry;
  logger: Logger;
  clock: Clock;
  bus: EventBus;
  /** Items per page of every list. */
  pageSize: number;
  /** The upstream fleet, when one is configured. */
  proxy?: ProxyManager;
  /** MCP_PROXY_STARTUP_WAIT: how long a list waits for upstreams on their first start. */
  startupWaitMs?: number;
  /** The one path of every tool call (resolve, quarantine, escalation, governance, forward). */
  pipeline: CallPipeline;
  /**
   * In-band approval (elicitation) at all: false turns it off on every transport; true leaves
   * it to call_pipeline.ts's `inBandAllowed` (stdio: on; HTTP: the tenant's `approval: in_band`).
   */
  approvalInBand: boolean;
  /** Progressive tool discovery (search mode). */
  discovery: ToolDiscovery;
  /** Told about every tool call (metrics). */
  observer?: BridgeObserver;
  /** Spans of inbound requests, when tracing is on (its tracer is set once tracing started). */
  tracing?: Tracing;
  /** The gateway's one count of tool calls in flight (the session gate's). */
  callsInFlight?: () => number;
}

interface LiveSession {
  id: string;
  info: SessionInfo;
  server: Server;
  inbound: InboundSession;
  /** Upstream resources this session subscribed to: `<server>\0<upstream uri>` → the URI it used. */
  subscriptions: Map<string, string>;
  /** The session's tools/call handler, shared by the SDK `Server` and the lane. */
  callTool: ToolCallHandler;
  lane?: ToolCallLane;
}

/** Serves MCP sessions over any transport from the engine's registries. */
export class MCPServiceBridge {
  #options: MCPServiceBridgeOptions;
  #sessions = new Map<string, LiveSession>();
  #startedAt: number;
  #engine: EngineCatalog;
  #unsubscribe: (() => void)[] = [];

  constructor(options: MCPServiceBridgeOptions) {
    this.#options = options;
    this.#startedAt = options.clock.now();
    this.#engine = new EngineCatalog(options, () => this.status());
    const { toolRegistry, agentRegistry, skillRegistry, workflowRegistry } = options;
    this.#unsubscribe.push(
      toolRegistry.onChange(() => this.#broadcastToolsChanged()),
      agentRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
      skillRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
      workflowRegistry.onChange(() => this.#broadcastDefinitionsChanged()),
    );
    if (options.proxy) {
      this.#unsubscribe.push(
        options.proxy.onChange(() => {
          this.#broadcastToolsChanged();
          this.#broadcastDefinitionsChanged();
        }),
        options.proxy.onResourceUpdated((uri, audience) => this.#onResourceUpdated(uri, audience)),
      );
    }
  }

  /** Number of live sessions. */
  get sessionCount(): number {
    return this.#sessions.size;
  }

  /** Current counts of everything the gateway serves. */
  status(): SystemStatus {
    const o = this.#options;
    return {
      gateway: {
        ...GATEWAY_INFO,
        uptimeSeconds: Math.round((o.clock.now() - this.#startedAt) / 1000),
      },
      agents: o.agentRegistry.size,
      // Every tool served: native and proxied (tools/list shows a tenant those it may call).
      tools: o.toolRegistry.size + (o.proxy?.aggregated.tools().length ?? 0),
      skills: o.skillRegistry.size,
      workflows: o.workflowRegistry.size,
      proxies: o.proxy?.size ?? 0,
      sessions: this.#sessions.size,
    };
  }

  /**
   * Serves one MCP session over `transport` for an authenticated caller: its SDK `Server` behind
   * the session pipeline's `stages` (transport side first) and the tool-call lane.
   */
  async serve(
    transport: Transport,
    info: SessionInfo,
    stages: readonly SessionStage[] = [],
  ): Promise<ServedSession> {
    const id = crypto.randomUUID();
    const live = { id, info, subscriptions: new Map() } as unknown as LiveSession;
    const server = this.#createServer(live);
    live.server = server;
    server.onclose = () => {
      live.lane?.abortAll();
      this.#options.discovery.forget(id);
      void this.#options.proxy?.endSession(id);
      if (this.#sessions.delete(id)) {
        this.#options.bus.publish({
          type: "session.closed",
          sessionId: id,
          transport: info.transport,
          tenant: info.auth.tenant,
        });
      }
    };
    server.onerror = (error) =>
      this.#options.logger.debug("session transport error", { session: id, error: error.message });
    this.#sessions.set(id, live);
    if (info.state?.initial) this.#restore(live, info.state.initial, false);
    live.lane = new ToolCallLane(server, live.callTool);
    await server.connect(compose(transport, [...stages, live.lane]));
    this.#options.bus.publish({
      type: "session.opened",
      sessionId: id,
      transport: info.transport,
      tenant: info.auth.tenant,
    });
    return {
      close: () => server.close(),
      restore: (state) => this.#restore(live, state, true),
    };
  }

  /**
   * Sets a session's state to what another replica's copy changed it to (cluster mode); the
   * client hears tools/list_changed when its activated tools changed and `notify` is set.
   */
  #restore(live: LiveSession, state: SessionState, notify: boolean): void {
    if (state.logLevel === undefined) delete live.inbound.logLevel;
    else live.inbound.logLevel = state.logLevel;
    const changed = this.#options.discovery.restore(live.id, state.activations);
    if (changed && notify) live.server.sendToolListChanged().catch(() => {});
    live.subscriptions.clear();
    let view: CatalogView | undefined;
    try {
      view = this.#view(live.info);
    } catch { /* its upstream left the fleet: nothing to relay */ }
    for (const uri of state.subscriptions) {
      const route = view?.resolveResource(uri);
      if (route) live.subscriptions.set(subscriptionKey(route), uri);
    }
  }

  /** Tool calls received and not yet answered, across every session (the session gate counts). */
  get inFlightCalls(): number {
    return this.#options.callsInFlight?.() ?? 0;
  }

  /** Closes every session. */
  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.server.close()));
    this.#sessions.clear();
  }

  #createServer(live: LiveSession): Server {
    const o = this.#options;
    const { info } = live;
    const view = this.#view(info);
    const native = info.upstream === undefined; // a /mcp/<id> session sees one upstream alone
    const server = new Server(GATEWAY_INFO, {
      capabilities: {
        tools: { listChanged: true },
        resources: { listChanged: true, ...(o.proxy ? { subscribe: true } : {}) },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions: native
        ? "AGENT-33 MCP gateway: native tools, proxied upstream tools (<server>__<tool>), " +
          `engine definitions as resources (${STATUS_URI} for counts) and prompts.`
        : `AGENT-33 MCP gateway: upstream "${info.upstream}" alone, under its own names.`,
    });
    const inbound: InboundSession = {
      server,
      tenant: info.auth.tenant,
      sessionId: live.id,
      // The caller's token goes only to upstreams configured to forward it, and only if it is fit.
      bearerFor: (upstreamId) => {
        const upstream = o.proxy?.get(upstreamId)?.server;
        return upstream?.auth === "passthrough"
          ? passthroughBearer(upstream, info.auth, info.bearer)
          : undefined;
      },
    };
    live.inbound = inbound;
    const caller = {
      tenant: info.auth.tenant,
      subject: info.auth.subject,
      principal: info.auth.principal,
      scopes: info.auth.scopes,
    };
    const spans = sessionSpans(live.id, info, o.tracing);
    const session: SessionContext = {
      id: live.id,
      info,
      server,
      inbound,
      caller,
      view,
      native,
      pageSize: o.pageSize,
      handle: (schema, handler) => handleRequest(server, schema, handler, spans.request),
      settled: async () => {
        await o.proxy?.settled(o.startupWaitMs ?? 0);
      },
      ...itemAccess(o.pipeline, caller, info.upstream !== undefined),
    };
    registerLoggingHandlers(session);
    live.callTool = registerToolHandlers({
      ...session,
      pipeline: o.pipeline,
      toolRegistry: o.toolRegistry,
      discovery: o.discovery,
      approvalInBand: o.approvalInBand,
      // Policies name proxied tools by their aggregated name, also on /mcp/<server_id>.
      policyName: (name) =>
        info.upstream === undefined ? name : o.proxy!.qualifiedName(info.upstream, name),
      spans,
      logger: o.logger,
      ...(o.observer ? { observer: o.observer } : {}),
    });
    registerResourceHandlers({
      ...session,
      engine: this.#engine,
      subscriptions: live.subscriptions,
      sessions: () => this.#sessions.values(),
      logger: o.logger,
    });
    registerPromptHandlers({ ...session, engine: this.#engine });
    registerCompletionHandlers({ ...session, engine: this.#engine });
    return server;
  }

  #view(info: SessionInfo): CatalogView | undefined {
    const proxy = this.#options.proxy;
    if (info.upstream === undefined) return proxy?.aggregated;
    const view = proxy?.scoped(info.upstream);
    if (!view) {
      throw new GatewayError(
        "not_found",
        `No upstream server "${info.upstream}" is configured; see GET /v1/operator/status for the ids`,
        { server: info.upstream },
      );
    }
    return view;
  }

  #onResourceUpdated(namespacedUri: string, audience?: ResourceAudience): void {
    const route = this.#options.proxy?.aggregated.resolveResource(namespacedUri);
    if (route) routeResourceUpdate(this.#sessions.values(), route, audience);
  }

  /** Tells every session its tool list may have changed (e.g. after a policy reload). */
  notifyToolsChanged(): void {
    this.#broadcastToolsChanged();
  }

  #broadcastToolsChanged(): void {
    const count = this.#options.toolRegistry.size +
      (this.#options.proxy?.aggregated.tools().length ?? 0);
    this.#options.bus.publish({ type: "tools.changed", count });
    this.#broadcast((s) => s.sendToolListChanged());
  }

  #broadcastDefinitionsChanged(): void {
    this.#broadcast((s) => s.sendResourceListChanged());
    this.#broadcast((s) => s.sendPromptListChanged());
  }

  #broadcast(send: (server: Server) => Promise<void>): void {
    for (const session of this.#sessions.values()) {
      send(session.server).catch((error) =>
        this.#options.logger.debug("could not notify session", {
          session: session.id,
          error: String(error),
        })
      );
    }
  }
}
