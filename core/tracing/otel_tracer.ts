/**
 * The OpenTelemetry SDK behind {@link GatewayTracer}: `@opentelemetry/sdk-trace`'s provider with a
 * batch processor, W3C trace context from `@opentelemetry/core`, and OTLP/HTTP export of the
 * official serializers' bytes (protobuf or JSON) with `fetch`. Contexts are passed explicitly
 * (a span hands its context to its children), so no context manager runs on the hot path.
 * Imported only when tracing is on (see gateway_tracer.ts).
 * @module
 */
import {
  type Context,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type TextMapSetter,
  trace,
  type Tracer,
} from "@opentelemetry/api";
import {
  type ExportResult,
  ExportResultCode,
  W3CTraceContextPropagator,
} from "@opentelemetry/core";
import { resourceFromAttributes } from "@opentelemetry/resources";
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from "@opentelemetry/sdk-trace";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import type { Logger } from "../logger.ts";
import { GATEWAY_INFO } from "../version.ts";
import type {
  GatewayTracer,
  InboundContext,
  SpanValue,
  TraceCarrier,
  TraceSpan,
} from "./gateway_tracer.ts";
import type { TracingConfig } from "./tracing_config.ts";

const propagator = new W3CTraceContextPropagator();

/** Reads `traceparent`/`tracestate` from `_meta` or headers: strings only, anything else is absent. */
const getter: TextMapGetter<Record<string, unknown>> = {
  keys: (carrier) => Object.keys(carrier),
  get: (carrier, key) => {
    const value = Object.hasOwn(carrier, key) ? carrier[key] : undefined;
    if (typeof value === "string") return value;
    return Array.isArray(value) && typeof value[0] === "string" ? value[0] : undefined;
  },
};

const setter: TextMapSetter<Record<string, string>> = {
  set: (carrier, key, value) => {
    carrier[key] = value;
  },
};

/** Spans buffered before the oldest are dropped (an unreachable collector costs memory no further). */
const MAX_QUEUED_SPANS = 8192;

/** Tracing with the OpenTelemetry SDK. */
export class OtelTracer implements GatewayTracer {
  readonly #provider: TracerProvider;
  readonly #tracer: Tracer;

  constructor(config: TracingConfig, logger: Logger) {
    this.#provider = new TracerProvider({
      resource: resourceFromAttributes({
        ...config.resourceAttributes,
        "service.name": config.serviceName,
        "service.version": GATEWAY_INFO.version,
      }),
      sampler: sampler(config),
      spanProcessors: [
        new BatchSpanProcessor({
          exporter: new OtlpHttpExporter(config, logger),
          maxQueueSize: MAX_QUEUED_SPANS,
          maxExportBatchSize: 512,
          scheduledDelayMillis: 1000,
          exportTimeoutMillis: config.timeoutMs,
        }),
      ],
    });
    this.#tracer = this.#provider.getTracer(GATEWAY_INFO.name, GATEWAY_INFO.version);
  }

  request(name: string, inbound: InboundContext, attributes: Record<string, SpanValue>): TraceSpan {
    return this.start(name, attributes, SpanKind.SERVER, parentContext(inbound));
  }

  /** Starts a span under `parent`. */
  start(
    name: string,
    attributes: Record<string, SpanValue> | undefined,
    kind: SpanKind,
    parent: Context,
  ): TraceSpan {
    const span = this.#tracer.startSpan(
      name,
      { kind, ...(attributes ? { attributes } : {}) },
      parent,
    );
    return new OtelSpan(span, this);
  }

  async flush(): Promise<void> {
    await this.#provider.forceFlush();
  }

  async shutdown(): Promise<void> {
    await this.#provider.shutdown();
  }
}

/** The caller's context: `_meta.traceparent` first (what MCP clients send), then the HTTP headers. */
function parentContext(inbound: InboundContext): Context {
  for (const carrier of [inbound.meta, inbound.headers]) {
    if (carrier === null || typeof carrier !== "object" || Array.isArray(carrier)) continue;
    const context = propagator.extract(ROOT_CONTEXT, carrier as Record<string, unknown>, getter);
    if (trace.getSpanContext(context)) return context;
  }
  return ROOT_CONTEXT;
}

class OtelSpan implements TraceSpan {
  readonly #span: Span;
  readonly #tracer: OtelTracer;

  constructor(span: Span, tracer: OtelTracer) {
    this.#span = span;
    this.#tracer = tracer;
  }

  get traceId(): string {
    return this.#span.spanContext().traceId;
  }

  set(key: string, value: SpanValue | undefined): void {
    if (value !== undefined) this.#span.setAttribute(key, value);
  }

  fail(code: string, message: string): void {
    this.#span.setAttribute("error.type", code);
    this.#span.setStatus({ code: SpanStatusCode.ERROR, message: message.slice(0, 256) });
  }

  child(
    name: string,
    attributes?: Record<string, SpanValue>,
    kind: "internal" | "client" = "internal",
  ): TraceSpan {
    return this.#tracer.start(
      name,
      attributes,
      kind === "client" ? SpanKind.CLIENT : SpanKind.INTERNAL,
      trace.setSpan(ROOT_CONTEXT, this.#span),
    );
  }

  carrier(): TraceCarrier {
    const carrier: Record<string, string> = {};
    propagator.inject(trace.setSpan(ROOT_CONTEXT, this.#span), carrier, setter);
    return carrier as unknown as TraceCarrier;
  }

  end(): void {
    this.#span.end();
  }
}

function sampler(config: TracingConfig): Sampler {
  const ratio = new TraceIdRatioBasedSampler(config.samplerRatio);
  switch (config.sampler) {
    case "always_on":
      return new AlwaysOnSampler();
    case "always_off":
      return new AlwaysOffSampler();
    case "traceidratio":
      return ratio;
    case "parentbased_always_off":
      return new ParentBasedSampler({ root: new AlwaysOffSampler() });
    case "parentbased_traceidratio":
      return new ParentBasedSampler({ root: ratio });
    case "parentbased_always_on":
      return new ParentBasedSampler({ root: new AlwaysOnSampler() });
  }
}

/**
 * OTLP/HTTP export: the official serializer's bytes POSTed with `fetch`, bounded by the export
 * timeout. A failed batch is dropped (the next one is tried as usual) and the failure logged once
 * until an export succeeds again, so a collector that is down neither blocks calls nor floods the log.
 */
class OtlpHttpExporter implements SpanExporter {
  readonly #config: TracingConfig;
  readonly #log: Logger;
  readonly #pending = new Set<Promise<void>>();
  #failing = false;

  constructor(config: TracingConfig, logger: Logger) {
    this.#config = config;
    this.#log = logger;
  }

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const json = this.#config.protocol === "http/json";
    const body = (json ? JsonTraceSerializer : ProtobufTraceSerializer).serializeRequest(spans);
    if (!body) {
      done({
        code: ExportResultCode.FAILED,
        error: new Error("the spans could not be serialized"),
      });
      return;
    }
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(), this.#config.timeoutMs);
    const sent = fetch(this.#config.endpoint, {
      method: "POST",
      headers: {
        ...this.#config.headers,
        "content-type": json ? "application/json" : "application/x-protobuf",
      },
      body: body as Uint8Array<ArrayBuffer>,
      signal: abort.signal,
    }).then(async (response) => {
      await response.body?.cancel();
      if (!response.ok) throw new Error(`the collector answered HTTP ${response.status}`);
      if (this.#failing) this.#log.info(`trace export to ${this.#config.endpoint} works again`);
      this.#failing = false;
      done({ code: ExportResultCode.SUCCESS });
    }).catch((error: unknown) => {
      if (!this.#failing) {
        this.#log.warn(
          `trace export to ${this.#config.endpoint} failed (${describe(error)}); spans are ` +
            "dropped until it works: check OTEL_EXPORTER_OTLP_ENDPOINT and the collector",
        );
      }
      this.#failing = true;
      done({ code: ExportResultCode.FAILED, error: error as Error });
    }).finally(() => {
      clearTimeout(timer);
      this.#pending.delete(sent);
    });
    this.#pending.add(sent);
  }

  async forceFlush(): Promise<void> {
    await Promise.allSettled([...this.#pending]);
  }

  async shutdown(): Promise<void> {
    await this.forceFlush();
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
