/**
 * The client span of a request the gateway forwards to an upstream (tools/call, resources/read,
 * resources/subscribe, prompts/get, completion/complete, …): one helper, so every forwarded
 * method gets the same span and passes the same trace context on (the upstream's `_meta`, and for
 * a Streamable HTTP upstream its headers too).
 * @module
 */
import type { UpstreamCallContext } from "../proxy/upstream_handle.ts";
import type { Route } from "../proxy/proxy_manager.ts";
import { errorType, type TraceSpan } from "./gateway_tracer.ts";

/**
 * What is forwarded: the method, and the attribute that carries the upstream's own name for what
 * it names (a tool, a prompt, a resource's URI), which `named` also appends to the span's name.
 * Module constants ({@link FORWARDED}): no object is built per forwarded request.
 */
export interface ForwardedRequest {
  readonly method: string;
  readonly attribute?: string;
  readonly named?: boolean;
}

/** The requests the gateway forwards, as their client spans describe them. */
export const FORWARDED = {
  toolsCall: { method: "tools/call", attribute: "gen_ai.tool.name", named: true },
  promptsGet: { method: "prompts/get", attribute: "gen_ai.prompt.name", named: true },
  resourcesRead: { method: "resources/read", attribute: "mcp.resource.uri" },
  resourcesSubscribe: { method: "resources/subscribe", attribute: "mcp.resource.uri" },
  completionComplete: { method: "completion/complete" },
} as const satisfies Record<string, ForwardedRequest>;

/** The longest upstream name or URI a span keeps (an upstream's text is hostile). */
const MAX_NAME = 2048;

/**
 * Sends `send(ctx)` inside a client span under `parent` (when tracing is on), with `ctx.trace`
 * set to that span's context; the parent gets the upstream and its breaker's state as it was sent.
 */
export function forwardTraced<T>(
  parent: TraceSpan | undefined,
  route: Route,
  request: ForwardedRequest,
  ctx: UpstreamCallContext,
  send: (ctx: UpstreamCallContext) => Promise<T>,
): Promise<T> {
  // Untraced, no async frame of its own: one promise and closure fewer on every call; under a
  // span that records nothing (unsampled), its context only.
  if (parent === undefined) return send(ctx);
  if (!parent.recording) return send({ ...ctx, trace: parent.carrier() });
  return sendInSpan(parent, route, request, ctx, send);
}

/** The client span around one send; settles with it (reactions, not an async frame of its own). */
function sendInSpan<T>(
  parent: TraceSpan,
  route: Route,
  request: ForwardedRequest,
  ctx: UpstreamCallContext,
  send: (ctx: UpstreamCallContext) => Promise<T>,
): Promise<T> {
  const server = route.handle.id;
  parent.set("agent33.upstream", server);
  parent.set("agent33.breaker.state", route.handle.breaker.state);
  const { method, attribute } = request;
  const original = route.original.length > MAX_NAME
    ? route.original.slice(0, MAX_NAME)
    : route.original;
  const span = parent.child(method, undefined, "client", request.named ? original : undefined);
  if (attribute !== undefined) span.set(attribute, original);
  span.set("mcp.method.name", method);
  span.set("agent33.upstream", server);
  span.set("agent33.upstream.transport", route.handle.server.transport);
  const failed = (error: unknown) => {
    span.fail(errorType(error), error instanceof Error ? error.message : String(error));
    span.end();
  };
  let sent: Promise<T>;
  try {
    sent = send({ ...ctx, trace: span.carrier() });
  } catch (error) {
    failed(error);
    return Promise.reject(error);
  }
  return sent.then((result) => {
    span.end();
    return result;
  }, (error: unknown) => {
    failed(error);
    throw error;
  });
}
