/**
 * The gateway's tracing seam: what the bridge and the call pipeline call to make spans. The
 * tracer behind it (otlp_tracer.ts) is imported only when tracing is configured, so a gateway
 * without `OTEL_*` settings loads none of it and its hot path checks one value: whether a tracer
 * (or a parent span) is there at all.
 * @module
 */
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { TracingConfig } from "./tracing_config.ts";

/** A span attribute value. */
export type SpanValue = string | number | boolean;

/** W3C trace context as it travels: `traceparent` and, when there is one, `tracestate`. */
export interface TraceCarrier {
  traceparent: string;
  tracestate?: string;
}

/** One span in progress. */
export interface TraceSpan {
  /** The trace this span belongs to (32 hex digits; all zeros once the span has ended). */
  readonly traceId: string;
  /**
   * Whether the span records (sampled and still open): when it does not, its attributes and
   * children are dropped, so work done only for them can be skipped (OTel's `isRecording`).
   */
  readonly recording: boolean;
  set(key: string, value: SpanValue | undefined): void;
  /** Marks the span failed with a stable error code (`error.type`) and a message. */
  fail(code: string, message: string): void;
  /**
   * Starts a child span; `client` for a call that leaves the gateway. Its name is `name`, and
   * with a `target` (a tool, a prompt) `name target`, kept apart until encoded.
   */
  child(
    name: string,
    attributes?: Record<string, SpanValue>,
    kind?: "internal" | "client",
    target?: string,
  ): TraceSpan;
  /** The context a request sent from this span carries (upstream `_meta` and headers). */
  carrier(): TraceCarrier;
  /** Ends the span, at `at` when the caller has just read `performance.now()` (one reading fewer). */
  end(at?: number): void;
}

/**
 * The HTTP request of an inbound MCP request as the SDK's `requestInfo` has it: its headers as a
 * plain object, and where the transport can read one header without building that object (the
 * Streamable HTTP transport's direct path), `header(name)`.
 */
export interface InboundRequestInfo {
  readonly headers?: Record<string, string | string[] | undefined>;
  header?(name: string): string | undefined;
}

/** Attributes shared by many spans (a session's), encoded once; made by {@link GatewayTracer.shared}. */
export interface SharedAttributes {
  readonly attributes: Readonly<Record<string, SpanValue>>;
}

/** Makes the spans of inbound MCP requests. */
export interface GatewayTracer {
  /** Encodes attributes that every request of a session carries, once for the session. */
  shared(attributes: Record<string, SpanValue>): SharedAttributes;
  /**
   * A server span for one inbound MCP request named `name` (and ` target`, a tool's name), the
   * child of the caller's context if it sent one: from the request's `params._meta` (MCP
   * clients put `traceparent` there), else from its HTTP headers. It carries `shared`; it starts
   * at `at` when the caller has just read `performance.now()`.
   */
  request(
    name: string,
    target: string | undefined,
    meta: unknown,
    requestInfo: InboundRequestInfo | undefined,
    shared: SharedAttributes,
    at?: number,
  ): TraceSpan;
  /** Exports what is buffered. */
  flush(): Promise<void>;
  /** Exports what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** The tracer the gateway serves with: set once tracing has started, absent when it is off. */
export interface Tracing {
  tracer?: GatewayTracer;
}

/**
 * A failed span's `error.type`: the gateway's stable code (a GatewayError's own, or the one a wire
 * error carries in `data.code`), else the JSON-RPC error code (`jsonrpc_-32603`).
 */
export function errorType(error: unknown): string {
  const e = error as { code?: unknown; data?: { code?: unknown } } | null;
  if (typeof e?.code === "string") return e.code;
  if (typeof e?.data?.code === "string") return e.data.code;
  return typeof e?.code === "number" ? `jsonrpc_${e.code}` : "error";
}

/** Builds the OTLP tracer when `config.enabled` (its export timers on `clock`); undefined otherwise. */
export async function startTracer(
  config: TracingConfig,
  logger: Logger,
  clock?: Clock,
): Promise<GatewayTracer | undefined> {
  if (!config.enabled) return undefined;
  const { OtlpTracer } = await import("./otlp_tracer.ts");
  const tracer = new OtlpTracer(config, logger, clock);
  logger.info(
    `exporting traces to ${config.endpoint} (${config.protocol}) as service ${config.serviceName}`,
  );
  return tracer;
}
