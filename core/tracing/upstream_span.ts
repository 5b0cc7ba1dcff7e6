/**
 * The client span of a request the gateway forwards to an upstream (tools/call, resources/read,
 * resources/subscribe, prompts/get, completion/complete, …): one helper, so every forwarded
 * method gets the same span and passes the same trace context on (the upstream's `_meta`, and for
 * a Streamable HTTP upstream its headers too).
 * @module
 */
import type { UpstreamCallContext } from "../proxy/upstream_handle.ts";
import type { Route } from "../proxy/proxy_manager.ts";
import { errorType, type SpanValue, type TraceSpan } from "./gateway_tracer.ts";

/** What is forwarded: the method, what it names (a tool or prompt, in the span's name), more attributes. */
export interface ForwardedRequest {
  method: string;
  /** The upstream's own tool or prompt name; appended to the span's name. */
  target?: string;
  attributes?: Record<string, SpanValue>;
}

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
  // Untraced, no async frame of its own: one promise and closure fewer on every call.
  return parent === undefined ? send(ctx) : sendInSpan(parent, route, request, ctx, send);
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
  const { method, target } = request;
  // The request's attributes as they are and the rest set: no merged copy of them per call.
  const span = parent.child(method, request.attributes, "client", target);
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
