/**
 * How the bridge's handler families install their request handlers on a session's SDK `Server`:
 * params parsed here (a malformed request is the client's mistake, -32602), each request inside
 * its span when tracing is on, gateway errors turned into wire errors.
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { toMcpError } from "../support/errors.ts";
import { errorType, type TraceSpan } from "../tracing/gateway_tracer.ts";
import type { HandlerExtra } from "./tool_call_lane.ts";

/** Starts the span of one request, or undefined (tracing off, or the handler makes its own). */
export type RequestSpanStarter = (
  method: string,
  params: unknown,
  extra: HandlerExtra,
) => TraceSpan | undefined;

/** A request handler: the parsed request, the SDK's context and the request's span, if any. */
export type RequestHandler<S extends z.ZodObject> = (
  request: z.infer<S>,
  extra: HandlerExtra,
  span?: TraceSpan,
) => unknown;

/** Installs one handler on a session's server (bound to the session's server and spans). */
export type RequestRegistrar = <S extends z.ZodObject>(
  schema: S,
  handler: RequestHandler<S>,
) => void;

/**
 * Installs a request handler whose malformed params are answered with -32602 Invalid params.
 *
 * The SDK parses params before a handler runs and reports a failure as -32603 Internal error;
 * a client that sends `{"name": 42}` made a mistake of its own, so the parse happens here.
 */
export function handleRequest<S extends z.ZodObject>(
  server: Server,
  schema: S,
  handler: RequestHandler<S>,
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
    // An unsampled span passes its context on but needs no outcome or end.
    if (span === undefined || !span.recording) return run(request, extra, span) as never;
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
export function guard<T>(fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    throw toMcpError(error);
  }
}

/** The `nextCursor` field of a list page, absent on the last page. */
export function cursor(next: string | undefined): { nextCursor?: string } {
  return next === undefined ? {} : { nextCursor: next };
}
