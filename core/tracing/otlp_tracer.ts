/**
 * The tracer behind {@link GatewayTracer}: spans recorded as small objects and encoded into the
 * export batch the moment they end (otlp_exporter.ts), as protobuf (otlp_protobuf.ts, the
 * default) or as the OTLP specification's JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`).
 *
 * Why not the OpenTelemetry SDK: measured on the gateway's own three spans per call, the SDK
 * (`@opentelemetry/sdk-trace` 3.1.1 with a batch processor and the official serializers) cost
 * 22 µs of CPU per call with JSON and 28 µs with protobuf (a quarter of it garbage collection,
 * an eighth converting hex ids to bytes), and Deno's built-in OpenTelemetry 16 µs for four spans
 * — against a gateway that spends 120–340 µs per call in all, so 7–20 %. This records the same
 * spans for a fraction of that (see docs/observability.md for the bench figures). Contexts are
 * passed explicitly, span to child, so no context manager runs on the hot path.
 * Imported only when tracing is on (see gateway_tracer.ts).
 * @module
 */
import { type Clock, systemClock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import { redact } from "../support/redact.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import type {
  GatewayTracer,
  InboundContext,
  SharedAttributes,
  SpanValue,
  TraceCarrier,
  TraceSpan,
} from "./gateway_tracer.ts";
import type { TracingConfig } from "./tracing_config.ts";
import { jsonAttributes, JsonBatch } from "./otlp_json.ts";
import { encodeAttributes, ProtobufBatch } from "./otlp_protobuf.ts";
import { SpanExporter } from "./otlp_exporter.ts";
import type { EncodedShared, FinishedSpan, OtlpResource } from "./span_batch.ts";
import { hex32, randomWord, TraceId } from "./span_ids.ts";
import { formatTraceparent, type ParentContext, parseTraceparent } from "./w3c_trace_context.ts";

/** OTLP SpanKind values. */
const KIND = { internal: 1, server: 2, client: 3 } as const;

/** {@link SharedAttributes} with each encoding's form, made once when first needed. */
class EncodedAttributes implements SharedAttributes, EncodedShared {
  readonly attributes: Readonly<Record<string, SpanValue>>;
  #proto: Uint8Array | undefined;
  #json: string | undefined;

  constructor(attributes: Record<string, SpanValue>) {
    this.attributes = { ...attributes };
  }

  get proto(): Uint8Array {
    return this.#proto ??= encodeAttributes(9, this.attributes);
  }

  get json(): string {
    return this.#json ??= jsonAttributes(this.attributes);
  }
}

/** The spans of one gateway, exported in batches to an OTLP/HTTP endpoint. */
export class OtlpTracer implements GatewayTracer {
  readonly #sample: (trace: TraceId, parent: ParentContext | undefined) => boolean;
  readonly #exporter: SpanExporter;
  #stopped = false;

  constructor(config: TracingConfig, logger: Logger, clock: Clock = systemClock) {
    this.#sample = sampler(config);
    const resource: OtlpResource = {
      attributes: {
        ...config.resourceAttributes,
        "service.name": config.serviceName,
        "service.version": GATEWAY_INFO.version,
        "telemetry.sdk.name": GATEWAY_INFO.name,
        "telemetry.sdk.language": "js",
      },
      scope: { name: GATEWAY_INFO.name, version: GATEWAY_INFO.version },
    };
    const batch = config.protocol === "http/json"
      ? new JsonBatch(resource)
      : new ProtobufBatch(resource);
    this.#exporter = new SpanExporter(config, logger, clock, batch);
  }

  shared(attributes: Record<string, SpanValue>): SharedAttributes {
    return new EncodedAttributes(attributes);
  }

  request(
    name: string,
    inbound: InboundContext,
    shared: SharedAttributes,
    attributes: Record<string, SpanValue>,
  ): TraceSpan {
    const parent = parentOf(inbound);
    const trace = parent === undefined ? TraceId.random() : TraceId.fromHex(parent.traceId);
    const span = new RecordingSpan(
      this,
      name,
      KIND.server,
      trace,
      parent === undefined ? 0 : parseInt(parent.spanId.slice(0, 8), 16),
      parent === undefined ? 0 : parseInt(parent.spanId.slice(8), 16),
      parent?.tracestate,
      this.#sample(trace, parent),
      attributes,
    );
    // Made by shared(): this tracer's own class.
    span.shared = shared as EncodedAttributes;
    return span;
  }

  /** Encodes a finished span for export. */
  record(span: FinishedSpan): void {
    if (!this.#stopped) this.#exporter.add(span);
  }

  async flush(): Promise<void> {
    await this.#exporter.flush();
  }

  async shutdown(): Promise<void> {
    await this.flush();
    this.#stopped = true;
  }
}

/** The caller's context: `_meta.traceparent` first (what MCP clients send), then the HTTP headers. */
function parentOf(inbound: InboundContext): ParentContext | undefined {
  const meta = inbound.meta as Record<string, unknown> | null | undefined;
  if (meta !== null && typeof meta === "object") {
    const parent = parseTraceparent(meta.traceparent, meta.tracestate);
    if (parent) return parent;
  }
  const info = inbound.requestInfo;
  if (info === undefined) return undefined;
  // Two headers, not all of them: copying a request's headers into an object was ~13 µs a call.
  if (info.header) return parseTraceparent(info.header("traceparent"), info.header("tracestate"));
  return parseTraceparent(first(info.headers?.traceparent), first(info.headers?.tracestate));
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * One span. An unsampled span still has ids (its children and upstreams carry them) but reads
 * no clock, keeps no attributes and is never encoded.
 */
class RecordingSpan implements TraceSpan, FinishedSpan {
  readonly trace: TraceId;
  readonly idHi: number;
  readonly idLo: number;
  readonly parentHi: number;
  readonly parentLo: number;
  readonly traceState: string | undefined;
  readonly name: string;
  readonly kind: number;
  readonly startMs: number;
  endMs = 0;
  readonly keys: string[] = [];
  readonly values: SpanValue[] = [];
  shared: EncodedShared | undefined = undefined;
  error: string | undefined = undefined;
  readonly #tracer: OtlpTracer;
  readonly #sampled: boolean;

  constructor(
    tracer: OtlpTracer,
    name: string,
    kind: number,
    trace: TraceId,
    parentHi: number,
    parentLo: number,
    traceState: string | undefined,
    sampled: boolean,
    attributes: Record<string, SpanValue> | undefined,
  ) {
    this.#tracer = tracer;
    this.trace = trace;
    let hi = randomWord();
    let lo = randomWord();
    while ((hi | lo) === 0) [hi, lo] = [randomWord(), randomWord()];
    this.idHi = hi;
    this.idLo = lo;
    this.parentHi = parentHi;
    this.parentLo = parentLo;
    this.traceState = traceState;
    this.name = name;
    this.kind = kind;
    this.#sampled = sampled;
    this.startMs = sampled ? performance.now() : 0;
    if (sampled && attributes !== undefined) {
      for (const key in attributes) this.set(key, attributes[key]);
    }
  }

  get traceId(): string {
    return this.trace.hex;
  }

  set(key: string, value: SpanValue | undefined): void {
    if (value === undefined || !this.#sampled) return;
    // A span has a dozen attributes at most: a scan (inlined, unlike indexOf's builtin call) is
    // cheaper than any map, and the keys are the gateway's constants, so mostly one comparison.
    const keys = this.keys;
    for (let i = 0; i < keys.length; i++) {
      if (keys[i] === key) {
        this.values[i] = value;
        return;
      }
    }
    keys.push(key);
    this.values.push(value);
  }

  fail(code: string, message: string): void {
    if (!this.#sampled) return;
    this.set("error.type", code);
    // An upstream's error text may quote anything: redacted like every diagnostic.
    this.error = redact(message).slice(0, 256);
  }

  child(
    name: string,
    attributes?: Record<string, SpanValue>,
    kind: "internal" | "client" = "internal",
  ): TraceSpan {
    return new RecordingSpan(
      this.#tracer,
      name,
      KIND[kind],
      this.trace,
      this.idHi,
      this.idLo,
      this.traceState,
      this.#sampled,
      attributes,
    );
  }

  carrier(): TraceCarrier {
    const traceparent = formatTraceparent(
      this.trace.hex,
      hex32(this.idHi) + hex32(this.idLo),
      this.#sampled,
    );
    return this.traceState === undefined ? { traceparent } : {
      traceparent,
      tracestate: this.traceState,
    };
  }

  end(): void {
    if (!this.#sampled || this.endMs !== 0) return;
    this.endMs = performance.now();
    this.#tracer.record(this);
  }
}

/** Decides at a trace's root; `parentbased_*` follows the caller's sampled flag when it sent one. */
function sampler(
  config: TracingConfig,
): (trace: TraceId, parent: ParentContext | undefined) => boolean {
  // The ratio samplers decide on the trace id's last 8 hex digits, as the OTel SDKs do.
  const ratio = (trace: TraceId) => trace.w3 / 0x1_0000_0000 < config.samplerRatio;
  const root = config.sampler.endsWith("always_on")
    ? () => true
    : config.sampler.endsWith("always_off")
    ? () => false
    : ratio;
  if (!config.sampler.startsWith("parentbased_")) return (trace) => root(trace);
  return (trace, parent) => parent === undefined ? root(trace) : parent.sampled;
}
