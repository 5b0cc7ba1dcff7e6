/**
 * A session's tools: `tools/list` shows the tenant the native and proxied tools it may call (or,
 * in search mode, the discovery meta-tools and what it activated), `tools/call` runs one through
 * the call pipeline with a span, the in-flight count and the observer around it. The call
 * handler is returned too: the session's tool-call lane serves it off the SDK's path.
 * @module
 */
import {
  CallToolRequestSchema,
  type CallToolResult,
  ListToolsRequestSchema,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { GatewayError, toMcpError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { paginate } from "../support/pagination.ts";
import { toolPage } from "../support/wire_json.ts";
import { approveInBand } from "../governance/in_band_approval.ts";
import { APPROVAL_TOKEN_META_KEY } from "../governance/tool_governance.ts";
import { MAX_CALLED_NAME } from "../proxy/catalog_fetch.ts";
import { errorType, type TraceSpan } from "../tracing/gateway_tracer.ts";
import {
  type CallPipeline,
  type CallScope,
  inBandAllowed,
  REFUSAL_CODES,
} from "./call_pipeline.ts";
import { runNative } from "./native_tool_call.ts";
import { cursor, guard } from "./request_handler.ts";
import type { SessionContext } from "./session_context.ts";
import type { SessionSpans } from "./session_spans.ts";
import type { HandlerExtra, ToolCallHandler, ToolCallRequest } from "./tool_call_lane.ts";
import type { Candidate, ToolDiscovery } from "./tool_discovery.ts";
import type { ToolRegistry } from "./tool_registry.ts";
import { upstreamCallContext } from "./upstream_context.ts";

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

/** What a session's tool handlers need beyond the session. */
export interface ToolHandlersContext extends SessionContext {
  pipeline: CallPipeline;
  toolRegistry: ToolRegistry;
  discovery: ToolDiscovery;
  /** In-band approval at all (see {@link inBandAllowed} for the rest). */
  approvalInBand: boolean;
  /** The name policies use for a tool name the caller used (aggregated on `/mcp/<server_id>`). */
  policyName(name: string): string;
  spans: SessionSpans;
  logger: Logger;
  observer?: BridgeObserver;
}

/** The tools a session's caller may see, native and proxied. */
interface VisibleTools {
  native(): Tool[];
  proxied(): Candidate[];
  /** The tenant discovers tools by search (native sessions only). */
  searchMode(): boolean;
}

/** Installs tools/list and tools/call on the session; returns the call handler for the lane. */
export function registerToolHandlers(ctx: ToolHandlersContext): ToolCallHandler {
  const visible = visibleTools(ctx);
  ctx.handle(ListToolsRequestSchema, async (request) => {
    await ctx.settled();
    return guard(() => {
      const tools = visible.searchMode()
        ? ctx.discovery.list(ctx.id, ctx.caller, visible.native(), visible.proxied())
        : [...visible.native(), ...visible.proxied().map((c) => c.tool)];
      const page = paginate(tools, request.params?.cursor, ctx.pageSize);
      return toolPage({ tools: page.items, ...cursor(page.nextCursor) });
    });
  });
  const onToolCall = observedToolCall(ctx, pipelineToolCall(ctx, visible));
  ctx.handle(CallToolRequestSchema, onToolCall);
  return onToolCall;
}

/** A tenant sees only what it may call (the same rules as a call, minus arguments). */
function visibleTools(ctx: ToolHandlersContext): VisibleTools {
  const { caller, view, native, pipeline } = ctx;
  const governance = pipeline.governance;
  // The visible list only changes with the fleet's tools or the policy: computed once per pair
  // (the aggregate and the policy set are replaced, never mutated, when they change).
  let visibleMemo: { tools: readonly Tool[]; policies: object; result: Candidate[] } | undefined;
  return {
    native: () =>
      (native ? ctx.toolRegistry.list() : []).filter((t) =>
        governance.visible(caller, { name: t.name, descriptor: t })
      ),
    proxied: (): Candidate[] => {
      const tools = view?.tools() ?? [];
      const policies = governance.policies;
      if (visibleMemo?.tools === tools && visibleMemo.policies === policies) {
        return visibleMemo.result;
      }
      const result = tools.flatMap((tool): Candidate[] => {
        const route = view!.resolveTool(tool.name);
        if (!route) return [];
        const server = route.handle.id;
        const target = pipeline.proxiedTarget(
          ctx.policyName(tool.name),
          server,
          route.original,
          tool,
        );
        return governance.visible(caller, target)
          ? [{
            tool: pipeline.listed(tool, target),
            server,
            ...(target.escalation === undefined ? {} : { escalation: target.escalation }),
          }]
          : [];
      });
      visibleMemo = { tools, policies, result };
      return result;
    },
    searchMode: () => native && ctx.discovery.mode(caller.tenant) === "search",
  };
}

/** One call as the pipeline runs it, inside the call's span. */
type SpannedToolCall = (
  request: ToolCallRequest,
  extra: HandlerExtra,
  span: TraceSpan | undefined,
) => Promise<CallToolResult>;

/** Wraps a call with the name bound, its span, the in-flight count and the observer. */
function observedToolCall(ctx: ToolHandlersContext, callTool: SpannedToolCall): ToolCallHandler {
  const { caller, native, view } = ctx;
  return async (request, extra) => {
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
    // The observer's readings are the span's start and end too: two clock readings fewer.
    const span = ctx.spans.toolCall(called, request.params._meta, extra, started);
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
      const name = request.params.name;
      const upstream = native && ctx.toolRegistry.has(name)
        ? undefined
        : view?.resolveTool(name)?.handle.id;
      const ended = performance.now();
      if (span) {
        span.set("agent33.outcome", outcome);
        span.set("agent33.upstream", upstream);
        span.end(ended);
      }
      try {
        ctx.observer?.toolCall({
          tool: name,
          ...(upstream === undefined ? {} : { server: upstream }),
          tenant: caller.tenant,
          outcome,
          durationMs: ended - started,
        });
      } catch (error) {
        ctx.logger.warn("call observer threw", { error: String(error) });
      }
    }
  };
}

/** Serves a search-mode meta-tool, or runs the call through the pipeline. */
function pipelineToolCall(ctx: ToolHandlersContext, visible: VisibleTools): SpannedToolCall {
  const { caller, info, server, pipeline } = ctx;
  const governance = pipeline.governance;
  const scope: CallScope = {
    ...(ctx.view ? { view: ctx.view } : {}),
    native: ctx.native,
    policyName: ctx.policyName,
  };
  return async (request, extra, span) => {
    const { name, arguments: rawArgs } = request.params;
    const args = rawArgs ?? {};
    const progressToken = request.params._meta?.progressToken;
    if (visible.searchMode() && ctx.discovery.isMetaTool(name)) {
      try {
        const { result, changed } = ctx.discovery.call(
          ctx.id,
          caller,
          name,
          args,
          visible.proxied(),
        );
        if (changed) {
          server.sendToolListChanged().catch(() => {});
          await ctx.info.state?.changed({ activations: ctx.discovery.active(ctx.id) });
        }
        return result;
      } catch (error) {
        throw toMcpError(error);
      }
    }
    const token = request.params._meta?.[APPROVAL_TOKEN_META_KEY];
    const inBand = server.getClientCapabilities()?.elicitation &&
      inBandAllowed({
        enabled: ctx.approvalInBand,
        transport: info.transport,
        tenantApprovalBy: governance.tenantPolicy(caller.tenant)?.approvalBy,
      });
    try {
      return await pipeline.call({
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
                pipeline.approvals,
                caller,
                target,
                callArgs,
                verdict,
                extra,
              ),
          }
          : {}),
        upstream: (route) =>
          upstreamCallContext(ctx.inbound, extra, progressToken, route.handle.id),
        runNative: (tool) => runNative(ctx, tool, request, extra, span),
      });
    } catch (error) {
      throw toMcpError(error);
    }
  };
}
