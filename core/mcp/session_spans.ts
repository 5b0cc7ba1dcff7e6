/**
 * The request spans of one inbound session, when tracing is on: every request's span carries
 * the session's shared attributes (OTel's MCP conventions, and ours), encoded once per session
 * and tracer.
 * @module
 */
import type { SessionInfo } from "../plugin_api/mod.ts";
import type {
  GatewayTracer,
  SharedAttributes,
  TraceSpan,
  Tracing,
} from "../tracing/gateway_tracer.ts";
import type { RequestSpanStarter } from "./request_handler.ts";
import type { HandlerExtra } from "./tool_call_lane.ts";

/** Starts the spans of one session's requests. */
export interface SessionSpans {
  /** Starts every request's span but tools/call's (undefined when tracing is off). */
  request?: RequestSpanStarter;
  /** Starts a tools/call span, named after the tool; undefined while no tracer runs. */
  toolCall(called: string, meta: unknown, extra: HandlerExtra, at: number): TraceSpan | undefined;
}

/** The longest request id a span keeps: a client's string id is bounded only by the message. */
const MAX_REQUEST_ID = 256;

/** The request's JSON-RPC id as a span attribute, at most {@link MAX_REQUEST_ID} characters. */
function requestId(extra: HandlerExtra): string {
  const id = String(extra.requestId);
  return id.length > MAX_REQUEST_ID ? id.slice(0, MAX_REQUEST_ID) : id;
}

/** The span starters of the session `sessionId`. */
export function sessionSpans(
  sessionId: string,
  info: SessionInfo,
  tracing: Tracing | undefined,
): SessionSpans {
  let sessionSpanAttributes: { tracer: GatewayTracer; shared: SharedAttributes } | undefined;
  const sessionAttributes = (tracer: GatewayTracer): SharedAttributes => {
    if (sessionSpanAttributes?.tracer !== tracer) {
      sessionSpanAttributes = {
        tracer,
        shared: tracer.shared({
          "mcp.session.id": sessionId,
          "network.transport": info.transport === "stdio" ? "pipe" : "tcp",
          "agent33.transport": info.transport,
          "agent33.tenant": info.auth.tenant,
        }),
      };
    }
    return sessionSpanAttributes.shared;
  };
  // Attributes set one by one into the span's slot, the name kept in two parts: no object or
  // string is built for a traced request.
  const toolCall = (called: string, meta: unknown, extra: HandlerExtra, at: number) => {
    const tracer = tracing?.tracer;
    if (tracer === undefined) return undefined;
    const span = tracer.request(
      "tools/call",
      called,
      meta,
      extra.requestInfo,
      sessionAttributes(tracer),
      at,
    );
    if (!span.recording) return span;
    span.set("mcp.method.name", "tools/call");
    span.set("jsonrpc.request.id", requestId(extra));
    span.set("gen_ai.tool.name", called);
    return span;
  };
  if (tracing === undefined) return { toolCall };
  // Every request but tools/call (whose span the tools handler makes) gets a span here.
  const request: RequestSpanStarter = (method, params, extra) => {
    const tracer = tracing.tracer;
    if (tracer === undefined || method === "tools/call") return undefined;
    const p = params as { _meta?: unknown; uri?: unknown; name?: unknown } | undefined;
    const span = tracer.request(
      method,
      undefined,
      p?._meta,
      extra.requestInfo,
      sessionAttributes(tracer),
    );
    if (!span.recording) return span;
    span.set("mcp.method.name", method);
    span.set("jsonrpc.request.id", requestId(extra));
    if (typeof p?.uri === "string") span.set("mcp.resource.uri", p.uri.slice(0, 2048));
    if (method === "prompts/get" && typeof p?.name === "string") {
      span.set("gen_ai.prompt.name", p.name.slice(0, 256));
    }
    return span;
  };
  return { request, toolCall };
}
