/**
 * MCPServiceBridge: the wiring layer between MCP sessions and the engine's services.
 *
 * Each inbound session gets its own low-level SDK `Server` (the tool list is dynamic, so the
 * high-level `McpServer` does not fit); its handlers resolve to the registries held here. The
 * caller was authenticated by the transport before `serve` is called.
 * @module
 */
import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  CallToolRequestSchema,
  type CallToolResult,
  CompleteRequestSchema,
  CreateMessageResultWithToolsSchema,
  ErrorCode,
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListResourceTemplatesRequestSchema,
  ListToolsRequestSchema,
  McpError,
  type Prompt,
  ReadResourceRequestSchema,
  type Resource,
  type ResourceTemplate,
  type ServerNotification,
  type ServerRequest,
  SetLevelRequestSchema,
  SubscribeRequestSchema,
  type Tool,
  UnsubscribeRequestSchema,
} from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { Clock } from "../support/clock.ts";
import {
  AGENT_PROMPT_PREFIX,
  type Definition,
  type DefinitionRegistry,
} from "./definition_registry.ts";
import { GatewayError, toMcpError } from "../support/errors.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { Logger } from "../support/logger.ts";
import { paginate } from "../support/pagination.ts";
import type { NativeTool, ServedSession, SessionInfo, ToolCallContext } from "../plugin_api/mod.ts";
import {
  type CallPipeline,
  type CallScope,
  inBandAllowed,
  type ItemCall,
  REFUSAL_CODES,
} from "./call_pipeline.ts";
import { approveInBand } from "../governance/in_band_approval.ts";
import { APPROVAL_TOKEN_META_KEY, type ToolGovernance } from "../governance/tool_governance.ts";
import type { CatalogView, ProxyManager, Route } from "../proxy/proxy_manager.ts";
import type { Candidate, ToolDiscovery } from "./tool_discovery.ts";
import type { ToolRegistry } from "./tool_registry.ts";
import {
  type HandlerExtra,
  installToolCallLane,
  type ToolCallHandler,
  type ToolCallLane,
  type ToolCallRequest,
} from "./tool_call_lane.ts";
import { forwardTraced } from "../tracing/upstream_span.ts";
import { type InboundSession, upstreamCallContext } from "./upstream_context.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import { toolPage } from "../support/wire_json.ts";
import { MAX_CALLED_NAME } from "../proxy/catalog_fetch.ts";
import { passthroughBearer } from "../proxy/passthrough_bearer.ts";
import type { ResourceAudience } from "../proxy/upstream_handle.ts";
import {
  errorType,
  type GatewayTracer,
  type SharedAttributes,
  type SpanValue,
  type TraceSpan,
  type Tracing,
} from "../tracing/gateway_tracer.ts";

/** URI of the system status resource. */
export const STATUS_URI = "agent33://system/status";

/** The definition kinds exposed as resources, with their URI path segment. */
const DEFINITION_KINDS = [
  { kind: "agents", noun: "Agent" },
  { kind: "workflows", noun: "Workflow" },
  { kind: "skills", noun: "Skill" },
] as const;
type DefinitionKind = typeof DEFINITION_KINDS[number]["kind"];

/** Counts served by the status resource and the `system_status` tool. */
export interface SystemStatus {
  gateway: { name: string; version: string; uptimeSeconds: number };
  agents: number;
  tools: number;
  skills: number;
  workflows: number;
  proxies: number;
  sessions: number;
}

/** How a tool call ended. */
export type ToolCallOutcome = "ok" | "tool_error" | "denied" | "error";

/** One finished tool call, for metrics. */
export interface ToolCallRecord {
  tool: string;
  /** The upstream server id of a proxied tool. */
  server?: string;
  tenant: string;
  outcome: ToolCallOutcome;
  durationMs: number;
}

/** Observes the bridge; must not throw (errors are the observer's own). */
export interface BridgeObserver {
  toolCall(record: ToolCallRecord): void;
}

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
   * it to {@link inBandAllowed} (stdio: on; HTTP: the tenant's `approval: in_band`).
   */
  approvalInBand: boolean;
  /** Progressive tool discovery (search mode). */
  discovery: ToolDiscovery;
  /** Told about every tool call (metrics). */
  observer?: BridgeObserver;
  /** Spans of inbound requests, when tracing is on (its tracer is set once tracing started). */
  tracing?: Tracing;
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
  #unsubscribe: (() => void)[] = [];
  /** Tool calls being served, and who waits for them to reach zero (shutdown). */
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(options: MCPServiceBridgeOptions) {
    this.#options = options;
    this.#startedAt = options.clock.now();
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

  /** Serves one MCP session over `transport` for an authenticated caller. */
  async serve(transport: Transport, info: SessionInfo): Promise<ServedSession> {
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
        });
      }
    };
    server.onerror = (error) =>
      this.#options.logger.debug("session transport error", { session: id, error: error.message });
    this.#sessions.set(id, live);
    await server.connect(transport);
    live.lane = installToolCallLane(transport, server, live.callTool);
    this.#options.bus.publish({
      type: "session.opened",
      sessionId: id,
      transport: info.transport,
      tenant: info.auth.tenant,
    });
    return { close: () => server.close() };
  }

  /** Tool calls being served right now, across every session. */
  get inFlightCalls(): number {
    return this.#inFlight;
  }

  /**
   * Resolves once no tool call is in flight, or after `timeoutMs`; says which, and how many were
   * still running (shutdown drains before it closes sessions).
   */
  async drain(timeoutMs: number): Promise<{ drained: boolean; pending: number }> {
    if (this.#inFlight === 0) return { drained: true, pending: 0 };
    let timer: ReturnType<typeof setTimeout> | undefined;
    let wake: (() => void) | undefined;
    const idle = new Promise<boolean>((resolve) => {
      wake = () => resolve(true);
      this.#idleWaiters.push(wake);
    });
    const late = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), timeoutMs);
    });
    try {
      const drained = await Promise.race([idle, late]);
      return { drained, pending: this.#inFlight };
    } finally {
      clearTimeout(timer);
      // A drain that timed out must not stay registered (shutdown polls it repeatedly).
      this.#idleWaiters = this.#idleWaiters.filter((w) => w !== wake);
    }
  }

  #callStarted(): void {
    this.#inFlight++;
  }

  #callEnded(): void {
    if (--this.#inFlight > 0) return;
    const waiters = this.#idleWaiters;
    this.#idleWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Closes every session. */
  async close(): Promise<void> {
    for (const unsubscribe of this.#unsubscribe) unsubscribe();
    await Promise.allSettled([...this.#sessions.values()].map((s) => s.server.close()));
    this.#sessions.clear();
  }

  #createServer(live: LiveSession): Server {
    const o = this.#options;
    const governance: ToolGovernance = o.pipeline.governance;
    const { info } = live;
    const view = this.#view(info);
    const native = info.upstream === undefined; // a /mcp/<id> session sees one upstream alone
    // What every request span of this session carries (OTel's MCP conventions, and ours),
    // encoded once per session and tracer.
    let sessionSpanAttributes: { tracer: GatewayTracer; shared: SharedAttributes } | undefined;
    const sessionAttributes = (tracer: GatewayTracer): SharedAttributes => {
      if (sessionSpanAttributes?.tracer !== tracer) {
        sessionSpanAttributes = {
          tracer,
          shared: tracer.shared({
            "mcp.session.id": live.id,
            "network.transport": info.transport === "stdio" ? "pipe" : "tcp",
            "agent33.transport": info.transport,
            "agent33.tenant": info.auth.tenant,
          }),
        };
      }
      return sessionSpanAttributes.shared;
    };
    const spanAttributes = (method: string, extra: HandlerExtra): Record<string, SpanValue> => ({
      "mcp.method.name": method,
      "jsonrpc.request.id": String(extra.requestId),
    });
    const tracing = o.tracing;
    // Every request but tools/call (whose span onToolCall makes) gets a span here.
    const handle = <S extends z.ZodObject>(
      target: Server,
      schema: S,
      handler: (request: z.infer<S>, extra: HandlerExtra, span?: TraceSpan) => unknown,
    ) =>
      handleRequest(
        target,
        schema,
        handler,
        tracing === undefined ? undefined : (method, params, extra) => {
          const tracer = tracing.tracer;
          if (tracer === undefined || method === "tools/call") return undefined;
          const p = params as { _meta?: unknown; uri?: unknown; name?: unknown } | undefined;
          const span = tracer.request(
            method,
            { meta: p?._meta, headers: extra.requestInfo?.headers },
            sessionAttributes(tracer),
            spanAttributes(method, extra),
          );
          if (typeof p?.uri === "string") span.set("mcp.resource.uri", p.uri.slice(0, 2048));
          if (method === "prompts/get" && typeof p?.name === "string") {
            span.set("gen_ai.prompt.name", p.name.slice(0, 256));
          }
          return span;
        },
      );
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
    const session: InboundSession = {
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
    live.inbound = session;

    handle(server, SetLevelRequestSchema, (request) => {
      session.logLevel = request.params.level;
      return {};
    });

    const caller = {
      tenant: info.auth.tenant,
      subject: info.auth.subject,
      scopes: info.auth.scopes,
    };
    // Policies name proxied tools by their aggregated name, also on /mcp/<server_id>.
    const policyName = (name: string) =>
      info.upstream === undefined ? name : o.proxy!.qualifiedName(info.upstream, name);

    // Resources and prompts pass the pipeline's item stages (quarantine, tenant globs, connector).
    const scoped = info.upstream !== undefined;
    const requireAccess = async (
      surface: string,
      kind: ItemCall["kind"],
      name: string,
      route: Route | undefined,
      args: Record<string, unknown> = {},
    ) => {
      try {
        await o.pipeline.useItem(
          caller,
          { kind, name, scoped, ...(route ? { route } : {}) },
          surface,
          args,
        );
      } catch (error) {
        throw toMcpError(error);
      }
    };
    const mayList = (kind: ItemCall["kind"], name: string, route: Route | undefined) =>
      o.pipeline.itemRefusal(caller, { kind, name, scoped, ...(route ? { route } : {}) }) ===
        undefined;
    const resourceRoute = (uri: string) => view?.resolveResource(uri);
    const scope: CallScope = {
      ...(view ? { view } : {}),
      native,
      policyName,
    };
    // A tenant sees only what it may call (the same rules as a call, minus arguments).
    const nativeTools = () =>
      (native ? o.toolRegistry.list() : []).filter((t) =>
        governance.visible(caller, { name: t.name, descriptor: t })
      );
    // The visible list only changes with the fleet's tools or the policy: computed once per pair
    // (the aggregate and the policy set are replaced, never mutated, when they change).
    let visibleMemo: { tools: readonly Tool[]; policies: object; result: Candidate[] } | undefined;
    const proxiedTools = (): Candidate[] => {
      const tools = view?.tools() ?? [];
      const policies = governance.policies;
      if (visibleMemo?.tools === tools && visibleMemo.policies === policies) {
        return visibleMemo.result;
      }
      const result = tools.flatMap((tool): Candidate[] => {
        const route = view!.resolveTool(tool.name);
        if (!route) return [];
        const server = route.handle.id;
        const target = o.pipeline.proxiedTarget(
          policyName(tool.name),
          server,
          route.original,
          tool,
        );
        return governance.visible(caller, target)
          ? [{
            tool: o.pipeline.listed(tool, target),
            server,
            ...(target.escalation === undefined ? {} : { escalation: target.escalation }),
          }]
          : [];
      });
      visibleMemo = { tools, policies, result };
      return result;
    };
    const searchMode = () => native && o.discovery.mode(caller.tenant) === "search";

    handle(server, ListToolsRequestSchema, async (request) => {
      await o.proxy?.settled(o.startupWaitMs ?? 0);
      return guard(() => {
        const tools = searchMode()
          ? o.discovery.list(live.id, caller, nativeTools(), proxiedTools())
          : [...nativeTools(), ...proxiedTools().map((c) => c.tool)];
        const page = paginate(tools, request.params?.cursor, o.pageSize);
        return toolPage({ tools: page.items, ...cursor(page.nextCursor) });
      });
    });

    const onToolCall = async (request: ToolCallRequest, extra: HandlerExtra) => {
      const called = request.params.name;
      // Checked before any lookup, policy or glob sees the name.
      if (called.length > MAX_CALLED_NAME) {
        throw toMcpError(
          new GatewayError(
            "unknown_tool",
            `Unknown tool: the name is ${called.length} characters, longer than any tool ` +
              `(at most ${MAX_CALLED_NAME}); call tools/list for the names`,
            { length: called.length },
          ),
        );
      }
      const started = performance.now();
      let outcome: ToolCallOutcome = "error";
      const tracer = tracing?.tracer;
      const span = tracer === undefined ? undefined : tracer.request(
        `tools/call ${called}`,
        { meta: request.params._meta, headers: extra.requestInfo?.headers },
        sessionAttributes(tracer),
        {
          "mcp.method.name": "tools/call",
          "jsonrpc.request.id": String(extra.requestId),
          "gen_ai.tool.name": called,
        },
      );
      this.#callStarted();
      try {
        const result = await callTool(request, extra, span);
        outcome = result.isError ? "tool_error" : "ok";
        if (result.isError) span?.fail("tool_error", "the tool returned isError: true");
        return result;
      } catch (error) {
        const code = (error as { data?: { code?: unknown } }).data?.code;
        outcome = typeof code === "string" && REFUSAL_CODES.has(code) ? "denied" : "error";
        span?.fail(errorType(error), error instanceof Error ? error.message : String(error));
        throw error;
      } finally {
        this.#callEnded();
        const name = request.params.name;
        const upstream = native && o.toolRegistry.has(name)
          ? undefined
          : view?.resolveTool(name)?.handle.id;
        if (span) {
          span.set("agent33.outcome", outcome);
          span.set("agent33.upstream", upstream);
          span.end();
        }
        try {
          o.observer?.toolCall({
            tool: name,
            ...(upstream === undefined ? {} : { server: upstream }),
            tenant: caller.tenant,
            outcome,
            durationMs: performance.now() - started,
          });
        } catch (error) {
          o.logger.warn("call observer threw", { error: String(error) });
        }
      }
    };
    handle(server, CallToolRequestSchema, onToolCall);
    live.callTool = onToolCall;

    const callTool = async (
      request: ToolCallRequest,
      extra: HandlerExtra,
      span: TraceSpan | undefined,
    ): Promise<CallToolResult> => {
      const { name, arguments: rawArgs } = request.params;
      const args = rawArgs ?? {};
      const progressToken = request.params._meta?.progressToken;
      if (searchMode() && o.discovery.isMetaTool(name)) {
        try {
          const { result, changed } = o.discovery.call(live.id, caller, name, args, proxiedTools());
          if (changed) server.sendToolListChanged().catch(() => {});
          return result;
        } catch (error) {
          throw toMcpError(error);
        }
      }
      const token = request.params._meta?.[APPROVAL_TOKEN_META_KEY];
      const inBand = server.getClientCapabilities()?.elicitation &&
        inBandAllowed({
          enabled: o.approvalInBand,
          transport: info.transport,
          tenantApprovalBy: governance.tenantPolicy(caller.tenant)?.approvalBy,
        });
      try {
        return await o.pipeline.call({
          caller,
          name,
          args,
          scope,
          ...(span === undefined ? {} : { span }),
          ...(typeof token === "string" ? { approvalToken: token } : {}),
          ...(inBand
            ? {
              approveInBand: (verdict, target, callArgs) =>
                approveInBand(
                  governance,
                  o.pipeline.approvals,
                  caller,
                  target,
                  callArgs,
                  verdict,
                  extra,
                ),
            }
            : {}),
          upstream: (route) => upstreamCallContext(session, extra, progressToken, route.handle.id),
          runNative: (tool) => runNative(tool, request, extra, span),
        });
      } catch (error) {
        throw toMcpError(error);
      }
    };

    const runNative = async (
      tool: NativeTool,
      request: ToolCallRequest,
      extra: HandlerExtra,
      span: TraceSpan | undefined,
    ): Promise<CallToolResult> => {
      const { name } = request.params;
      const args = request.params.arguments ?? {};
      const progressToken = request.params._meta?.progressToken;
      const ctx: ToolCallContext = {
        auth: info.auth,
        signal: extra.signal,
        ...(request.params._meta === undefined ? {} : { meta: request.params._meta }),
        ...(span === undefined ? {} : { span }),
        // Engine agents may use the caller's own model; only when the client offers sampling.
        ...(server.getClientCapabilities()?.sampling
          ? {
            sample: async (params: Record<string, unknown>, signal?: AbortSignal) =>
              await extra.sendRequest(
                { method: "sampling/createMessage", params } as ServerRequest,
                CreateMessageResultWithToolsSchema,
                { signal: signal ?? extra.signal },
              ) as Record<string, unknown>,
          }
          : {}),
        progress: async (progress, total, message) => {
          if (progressToken === undefined) return;
          await extra.sendNotification({
            method: "notifications/progress",
            params: {
              progressToken,
              progress,
              ...(total === undefined ? {} : { total }),
              ...(message === undefined ? {} : { message }),
            },
          });
        },
      };
      try {
        return await tool.handler(args, ctx);
      } catch (error) {
        if (error instanceof GatewayError) throw error.toMcpError();
        // A tool's own failure is a result the model can read, not a protocol error.
        const message = error instanceof Error ? error.message : String(error);
        o.logger.warn("native tool failed", { tool: name, error: message });
        return {
          isError: true,
          content: [{ type: "text", text: `Tool "${name}" failed: ${message}` }],
        } satisfies CallToolResult;
      }
    };

    handle(server, ListResourcesRequestSchema, async (request) => {
      await o.proxy?.settled(o.startupWaitMs ?? 0);
      return guard(() => {
        const resources = [
          ...(native ? this.#resources() : []).filter((r) => mayList("resource", r.uri, undefined)),
          ...(view?.resources() ?? []).filter((r) =>
            mayList("resource", r.uri, resourceRoute(r.uri))
          ),
        ];
        const page = paginate(resources, request.params?.cursor, o.pageSize);
        return { resources: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, ListResourceTemplatesRequestSchema, async (request) => {
      await o.proxy?.settled(o.startupWaitMs ?? 0);
      return guard(() => {
        const templates = [
          ...(native ? resourceTemplates() : []).filter((t) =>
            mayList("resource-template", t.uriTemplate, undefined)
          ),
          ...(view?.resourceTemplates() ?? []).filter((t) =>
            mayList("resource-template", t.uriTemplate, resourceRoute(t.uriTemplate))
          ),
        ];
        const page = paginate(templates, request.params?.cursor, o.pageSize);
        return { resourceTemplates: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, ReadResourceRequestSchema, async (request, extra, span) => {
      const { uri } = request.params;
      const route = view?.resolveResource(uri);
      if (route && (!native || !uri.startsWith("agent33://"))) {
        await requireAccess("resources/read", "resource", uri, route);
        const ctx = upstreamCallContext(session, extra, undefined, route.handle.id);
        try {
          const result = await forwardTraced(
            span,
            route,
            { method: "resources/read", attributes: { "mcp.resource.uri": route.original } },
            ctx,
            (traced) => route.handle.readResource(route.original, traced),
          );
          // Contents carry the upstream's URIs; answer with the names this client used.
          return {
            ...result,
            contents: result.contents.map((c) => c.uri === route.original ? { ...c, uri } : c),
          };
        } catch (error) {
          throw toMcpError(error);
        }
      }
      await requireAccess("resources/read", "resource", uri, undefined);
      return guard(() => {
        const text = this.#readResource(uri);
        return { contents: [{ uri, mimeType: "application/json", text }] };
      });
    });

    handle(server, SubscribeRequestSchema, async (request, extra, span) => {
      const { uri } = request.params;
      const route = view?.resolveResource(uri);
      if (!route) {
        throw toMcpError(
          new GatewayError(
            "not_found",
            `Cannot subscribe to "${uri}": only upstream resources change; engine resources are static`,
            { uri },
          ),
        );
      }
      await requireAccess("resources/subscribe", "resource", uri, route);
      const key = `${route.handle.id}\u0000${route.original}`;
      live.subscriptions.set(key, uri);
      try {
        await forwardTraced(
          span,
          route,
          { method: "resources/subscribe", attributes: { "mcp.resource.uri": route.original } },
          upstreamCallContext(session, extra, undefined, route.handle.id),
          (traced) => route.handle.subscribe(route.original, traced),
        );
      } catch (error) {
        live.subscriptions.delete(key);
        throw toMcpError(error);
      }
      return {};
    });

    handle(server, UnsubscribeRequestSchema, async (request, extra) => {
      const { uri } = request.params;
      const route = view?.resolveResource(uri);
      if (!route) return {};
      const key = `${route.handle.id}\u0000${route.original}`;
      live.subscriptions.delete(key);
      // Other sessions on the same instance may still want updates of this resource.
      const scope = route.handle.server.scope;
      const audience: ResourceAudience | undefined = scope === "tenant"
        ? { tenant: session.tenant ?? "" }
        : scope === "session"
        ? { sessionId: session.sessionId ?? "" }
        : undefined;
      const stillWanted = [...this.#sessions.values()].some((s) =>
        s.subscriptions.has(key) && hears(s, audience)
      );
      if (!stillWanted) {
        await route.handle.unsubscribe(
          route.original,
          upstreamCallContext(session, extra, undefined, route.handle.id),
        ).catch((error) => o.logger.debug("upstream unsubscribe failed", { error: String(error) }));
      }
      return {};
    });

    handle(server, ListPromptsRequestSchema, async (request) => {
      await o.proxy?.settled(o.startupWaitMs ?? 0);
      return guard(() => {
        const prompts = [
          ...(native ? this.#prompts().map((p) => p.prompt) : []).filter((p) =>
            mayList("prompt", p.name, undefined)
          ),
          ...(view?.prompts() ?? []).filter((p) =>
            mayList("prompt", p.name, view?.resolvePrompt(p.name))
          ),
        ];
        const page = paginate(prompts, request.params?.cursor, o.pageSize);
        return { prompts: page.items, ...cursor(page.nextCursor) };
      });
    });

    handle(server, GetPromptRequestSchema, async (request, extra, span) => {
      const { name, arguments: args = {} } = request.params;
      const found = native ? this.#prompts().find((p) => p.prompt.name === name) : undefined;
      if (!found) {
        const route = view?.resolvePrompt(name);
        if (route) {
          await requireAccess("prompts/get", "prompt", name, route, args);
          try {
            return await forwardTraced(
              span,
              route,
              {
                method: "prompts/get",
                target: route.original,
                attributes: { "gen_ai.prompt.name": route.original },
              },
              upstreamCallContext(session, extra, undefined, route.handle.id),
              (traced) => route.handle.getPrompt(route.original, args, traced),
            );
          } catch (error) {
            throw toMcpError(error);
          }
        }
      }
      if (found) await requireAccess("prompts/get", "prompt", name, undefined, args);
      return guard(() => {
        if (!found) {
          throw new GatewayError(
            "not_found",
            `Unknown prompt "${name}"; call prompts/list for the names`,
            { prompt: name },
          );
        }
        for (const arg of found.prompt.arguments ?? []) {
          if (arg.required && args[arg.name] === undefined) {
            throw new GatewayError(
              "invalid_arguments",
              `Prompt "${name}" needs the argument "${arg.name}"`,
              { prompt: name, argument: arg.name },
            );
          }
        }
        return {
          description: found.prompt.description,
          messages: [{
            role: "user" as const,
            content: { type: "text" as const, text: fillTemplate(found.template, args) },
          }],
        };
      });
    });

    handle(server, CompleteRequestSchema, async (request, extra, span) => {
      const { ref, argument } = request.params;
      const route = ref.type === "ref/prompt"
        ? (native && this.#prompts().some((p) => p.prompt.name === ref.name)
          ? undefined
          : view?.resolvePrompt(ref.name))
        : view?.resolveResource(ref.uri);
      // Completion reveals what a prompt or resource holds: the same access as using it.
      const completing = { argument: argument.name };
      if (ref.type === "ref/prompt") {
        await requireAccess("completion/complete", "prompt", ref.name, route, completing);
      } else {
        await requireAccess("completion/complete", "resource-template", ref.uri, route, completing);
      }
      if (route) {
        const upstreamRef = ref.type === "ref/prompt"
          ? { type: "ref/prompt" as const, name: route.original }
          : { type: "ref/resource" as const, uri: route.original };
        try {
          return await forwardTraced(
            span,
            route,
            { method: "completion/complete" },
            upstreamCallContext(session, extra, undefined, route.handle.id),
            (traced) => route.handle.complete({ ...request.params, ref: upstreamRef }, traced),
          );
        } catch (error) {
          throw toMcpError(error);
        }
      }
      return guard(() => {
        let candidates: string[] = [];
        if (ref.type === "ref/resource") {
          const kind = DEFINITION_KINDS.find((k) => ref.uri === templateUri(k.kind));
          if (kind && argument.name === "id") {
            candidates = this.#registry(kind.kind).list().map((d) => d.id);
          }
        }
        const values = candidates.filter((c) => c.startsWith(argument.value));
        return {
          completion: {
            values: values.slice(0, 100),
            total: values.length,
            hasMore: values.length > 100,
          },
        };
      });
    });

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
    if (!route) return;
    const key = `${route.handle.id}\u0000${route.original}`;
    for (const session of this.#sessions.values()) {
      if (!hears(session, audience)) continue;
      const uri = session.subscriptions.get(key);
      if (uri === undefined) continue;
      session.server.sendResourceUpdated({ uri }).catch(() => {});
    }
  }

  #registry(kind: DefinitionKind): DefinitionRegistry {
    const o = this.#options;
    switch (kind) {
      case "agents":
        return o.agentRegistry;
      case "workflows":
        return o.workflowRegistry;
      case "skills":
        return o.skillRegistry;
    }
  }

  #resources(): Resource[] {
    const resources: Resource[] = [{
      uri: STATUS_URI,
      name: "system-status",
      title: "System status",
      description: "Counts of agents, tools, skills, workflows, proxies and sessions",
      mimeType: "application/json",
    }];
    for (const { kind, noun } of DEFINITION_KINDS) {
      for (const d of this.#registry(kind).list()) {
        resources.push({
          uri: `agent33://${kind}/${encodeURIComponent(d.id)}`,
          // The name is the id its tool (workflow_run, agent_invoke) takes; the human name is the title.
          name: d.id,
          title: d.name,
          description: d.description || `${noun} ${d.id}`,
          mimeType: "application/json",
        });
      }
    }
    return resources;
  }

  #readResource(uri: string): string {
    if (uri === STATUS_URI) return JSON.stringify(this.status(), null, 2);
    const match = /^agent33:\/\/(agents|workflows|skills)\/(.+)$/.exec(uri);
    if (match) {
      const kind = match[1] as DefinitionKind;
      const key = decodeURIComponent(match[2]!);
      const found = this.#registry(kind).find(key);
      if (found) return JSON.stringify(found.body, null, 2);
      throw new GatewayError(
        "not_found",
        `No ${kind.slice(0, -1)} with id or name "${key}"; list them with resources/list`,
        { uri },
      );
    }
    throw new GatewayError(
      "not_found",
      `Unknown resource "${uri}"; call resources/list and resources/templates/list for what exists`,
      { uri },
    );
  }

  #prompts(): { prompt: Prompt; template: string }[] {
    const o = this.#options;
    const out: { prompt: Prompt; template: string }[] = [];
    const add = (name: string, d: Definition) => {
      if (!d.prompt) return;
      out.push({
        prompt: { name, description: d.description, arguments: d.prompt.arguments },
        template: d.prompt.template,
      });
    };
    for (const skill of o.skillRegistry.list()) add(skill.id, skill);
    for (const agent of o.agentRegistry.list()) add(`${AGENT_PROMPT_PREFIX}${agent.id}`, agent);
    return out;
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

function templateUri(kind: DefinitionKind): string {
  return `agent33://${kind}/{id}`;
}

function resourceTemplates(): ResourceTemplate[] {
  return DEFINITION_KINDS.map(({ kind, noun }) => ({
    uriTemplate: templateUri(kind),
    name: `${kind.slice(0, -1)}-by-id`,
    title: `${noun} definition`,
    description: `${noun} definition by id or name`,
    mimeType: "application/json",
  }));
}

function cursor(next: string | undefined): { nextCursor?: string } {
  return next === undefined ? {} : { nextCursor: next };
}

/** Starts the span of one request, or undefined (tracing off, or the handler makes its own). */
type RequestSpanStarter = (
  method: string,
  params: unknown,
  extra: HandlerExtra,
) => TraceSpan | undefined;

/**
 * Installs a request handler whose malformed params are answered with -32602 Invalid params.
 *
 * The SDK parses params before a handler runs and reports a failure as -32603 Internal error;
 * a client that sends `{"name": 42}` made a mistake of its own, so the parse happens here.
 */
function handleRequest<S extends z.ZodObject>(
  server: Server,
  schema: S,
  handler: (
    request: z.infer<S>,
    extra: RequestHandlerExtra<ServerRequest, ServerNotification>,
    span?: TraceSpan,
  ) => unknown,
  startSpan?: RequestSpanStarter,
): void {
  const method = (schema.shape as { method: z.ZodLiteral<string> }).method.value;
  const lenient = schema.extend({ params: z.unknown().optional() });
  const run = (request: unknown, extra: HandlerExtra, span?: TraceSpan) => {
    const parsed = schema.safeParse(request);
    if (!parsed.success) {
      throw new McpError(
        ErrorCode.InvalidParams,
        `Invalid params for ${method}: ${z.prettifyError(parsed.error).replaceAll("\n", "; ")}`,
      );
    }
    return handler(parsed.data, extra, span);
  };
  server.setRequestHandler(lenient, (request, extra) => {
    const span = startSpan?.(method, (request as { params?: unknown }).params, extra);
    if (span === undefined) return run(request, extra) as never;
    return traced(span, () => run(request, extra, span)) as never;
  });
}

/** Runs a handler inside its request span: the outcome, or the error's code, then the end. */
async function traced(span: TraceSpan, fn: () => unknown): Promise<unknown> {
  try {
    const result = await fn();
    span.set("agent33.outcome", "ok");
    return result;
  } catch (error) {
    span.set("agent33.outcome", "error");
    span.fail(errorType(error), error instanceof Error ? error.message : String(error));
    throw error;
  } finally {
    span.end();
  }
}

/** Runs a handler body, turning gateway errors into wire errors. */
function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw toMcpError(error);
  }
}

/** Fills `{{name}}` placeholders; unknown placeholders are left as they are. */
function fillTemplate(template: string, args: Record<string, string>): string {
  return template.replace(
    /\{\{\s*([A-Za-z0-9_-]+)\s*\}\}/g,
    (whole, key: string) => Object.hasOwn(args, key) ? args[key]! : whole,
  );
}

/** Whether a session may hear of an update with this audience (none: a shared server's). */
function hears(session: LiveSession, audience: ResourceAudience | undefined): boolean {
  if (audience === undefined) return true;
  return "tenant" in audience
    ? session.inbound.tenant === audience.tenant
    : session.inbound.sessionId === audience.sessionId;
}
