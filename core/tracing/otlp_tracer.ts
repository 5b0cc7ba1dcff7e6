/**
 * The tracer behind {@link GatewayTracer}: spans recorded as plain objects and exported in
 * batches over OTLP/HTTP to `/v1/traces`, as protobuf (otlp_protobuf.ts, the default) or as the
 * OTLP specification's JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`).
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
import { type Clock, deadline, systemClock, type TimerHandle } from "../support/clock.ts";
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
import { encodeAttributes, encodeTraceRequest, type OtlpResource } from "./otlp_protobuf.ts";
import {
  formatTraceparent,
  type ParentContext,
  parseTraceparent,
  randomHexId,
} from "./w3c_trace_context.ts";

/** OTLP SpanKind values. */
const KIND = { internal: 1, server: 2, client: 3 } as const;

/** Spans buffered before new ones are dropped (an unreachable collector costs memory no further). */
const MAX_QUEUED_SPANS = 16_384;
/** Spans per export request. */
const BATCH_SPANS = 2048;
/** How long a span waits for its batch to fill before it is sent anyway. */
const BATCH_DELAY_MS = 1000;

/** One finished span, as it is exported. */
interface SpanRecord {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  /** performance.now() at start and end. */
  start: number;
  end: number;
  attributes: Record<string, SpanValue>;
  /** Attributes encoded once for many spans (a session's). */
  shared?: EncodedAttributes;
  error?: string;
}

/** {@link SharedAttributes} with their OTLP JSON fragment (and protobuf bytes, once needed). */
class EncodedAttributes implements SharedAttributes {
  readonly attributes: Readonly<Record<string, SpanValue>>;
  readonly json: string;
  #proto: Uint8Array | undefined;

  constructor(attributes: Record<string, SpanValue>) {
    this.attributes = { ...attributes };
    this.json = otlpAttributes(this.attributes);
  }

  /** The `Span.attributes` fields (number 9) as protobuf. */
  get proto(): Uint8Array {
    return this.#proto ??= encodeAttributes(9, this.attributes);
  }
}

/** The spans of one gateway, batched to an OTLP/HTTP JSON endpoint. */
export class OtlpTracer implements GatewayTracer {
  readonly #config: TracingConfig;
  readonly #log: Logger;
  readonly #sample: (traceId: string, parent: ParentContext | undefined) => boolean;
  /** The export body around the spans, serialized once (JSON). */
  readonly #head: string;
  readonly #resource: OtlpResource;
  #queue: SpanRecord[] = [];
  readonly #clock: Clock;
  #timer: TimerHandle | undefined;
  #pending = new Set<Promise<void>>();
  #failing = false;
  #dropped = 0;
  #stopped = false;

  /** `clock` times the batch delay and each export's timeout. */
  constructor(config: TracingConfig, logger: Logger, clock: Clock = systemClock) {
    this.#config = config;
    this.#log = logger;
    this.#clock = clock;
    this.#sample = sampler(config);
    const resource = {
      ...config.resourceAttributes,
      "service.name": config.serviceName,
      "service.version": GATEWAY_INFO.version,
      "telemetry.sdk.name": GATEWAY_INFO.name,
      "telemetry.sdk.language": "js",
    };
    this.#resource = {
      attributes: resource,
      scope: { name: GATEWAY_INFO.name, version: GATEWAY_INFO.version },
    };
    this.#head = `{"resourceSpans":[{"resource":{"attributes":[${
      otlpAttributes(resource)
    }]},"scopeSpans":[{"scope":${
      JSON.stringify({ name: GATEWAY_INFO.name, version: GATEWAY_INFO.version })
    },"spans":`;
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
    const traceId = parent?.traceId ?? randomHexId(16);
    const span = new RecordingSpan(
      this,
      name,
      KIND.server,
      traceId,
      parent?.spanId,
      parent?.tracestate,
      this.#sample(traceId, parent),
      attributes,
    );
    // Made by shared(): this tracer's own class.
    span.share(shared as EncodedAttributes);
    return span;
  }

  /** Queues a finished span; sends a batch when it is full, or after the batch delay. */
  record(span: SpanRecord): void {
    if (this.#stopped) return;
    if (this.#queue.length >= MAX_QUEUED_SPANS) {
      this.#dropped++;
      return;
    }
    this.#queue.push(span);
    if (this.#queue.length >= BATCH_SPANS) this.#send();
    else this.#timer ??= this.#clock.setTimeout(() => this.#send(), BATCH_DELAY_MS);
  }

  async flush(): Promise<void> {
    while (this.#queue.length > 0) this.#send();
    await Promise.allSettled([...this.#pending]);
  }

  async shutdown(): Promise<void> {
    await this.flush();
    this.#stopped = true;
  }

  #send(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    const spans = this.#queue.splice(0, BATCH_SPANS);
    if (spans.length === 0) return;
    if (this.#queue.length > 0) this.#timer = this.#clock.setTimeout(() => this.#send(), 0);
    const json = this.#config.protocol === "http/json";
    const body = json ? `${this.#head}[${spans.map(otlpSpan).join(",")}]}]}]}` : encodeTraceRequest(
      this.#resource,
      spans.map((span) => ({
        ...span,
        startTimeUnixNano: bigNanos(span.start),
        endTimeUnixNano: bigNanos(span.end),
      })),
    ) as Uint8Array<ArrayBuffer>;
    const limit = deadline(this.#clock, this.#config.timeoutMs);
    const sent = fetch(this.#config.endpoint, {
      method: "POST",
      headers: {
        ...this.#config.headers,
        "content-type": json ? "application/json" : "application/x-protobuf",
      },
      body,
      signal: limit.signal,
    }).then(async (response) => {
      await response.body?.cancel();
      if (!response.ok) throw new Error(`the collector answered HTTP ${response.status}`);
      if (this.#failing) this.#log.info(`trace export to ${this.#config.endpoint} works again`);
      this.#failing = false;
    }).catch((error: unknown) => {
      // Logged once until an export works again: a collector that is down must not flood the log.
      if (!this.#failing) {
        this.#log.warn(
          `trace export to ${this.#config.endpoint} failed (${describe(error)}); spans are ` +
            "dropped until it works: check OTEL_EXPORTER_OTLP_ENDPOINT and the collector",
        );
      }
      this.#failing = true;
    }).finally(() => {
      limit.cancel();
      this.#pending.delete(sent);
      if (this.#dropped > 0) {
        this.#log.warn(`${this.#dropped} spans dropped: more than ${MAX_QUEUED_SPANS} were queued`);
        this.#dropped = 0;
      }
    });
    this.#pending.add(sent);
  }
}

/** The caller's context: `_meta.traceparent` first (what MCP clients send), then the HTTP headers. */
function parentOf(inbound: InboundContext): ParentContext | undefined {
  const meta = inbound.meta as Record<string, unknown> | null | undefined;
  if (meta !== null && typeof meta === "object") {
    const parent = parseTraceparent(meta.traceparent, meta.tracestate);
    if (parent) return parent;
  }
  const headers = inbound.headers;
  if (headers === undefined) return undefined;
  return parseTraceparent(first(headers.traceparent), first(headers.tracestate));
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

class RecordingSpan implements TraceSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly #tracer: OtlpTracer;
  readonly #record: SpanRecord | undefined;
  readonly #sampled: boolean;
  readonly #tracestate: string | undefined;

  constructor(
    tracer: OtlpTracer,
    name: string,
    kind: number,
    traceId: string,
    parentSpanId: string | undefined,
    tracestate: string | undefined,
    sampled: boolean,
    attributes: Record<string, SpanValue> | undefined,
  ) {
    this.#tracer = tracer;
    this.traceId = traceId;
    this.spanId = randomHexId(8);
    this.#sampled = sampled;
    this.#tracestate = tracestate;
    // An unsampled span still has ids (its children and upstreams carry them) but records nothing.
    this.#record = sampled
      ? {
        traceId,
        spanId: this.spanId,
        ...(parentSpanId === undefined ? {} : { parentSpanId }),
        ...(tracestate === undefined ? {} : { traceState: tracestate }),
        name,
        kind,
        start: performance.now(),
        end: 0,
        // Callers pass a fresh object per span: it is kept, not copied.
        attributes: attributes ?? {},
      }
      : undefined;
  }

  /** Adds attributes encoded once for many spans. */
  share(shared: EncodedAttributes): void {
    if (this.#record) this.#record.shared = shared;
  }

  set(key: string, value: SpanValue | undefined): void {
    if (value !== undefined && this.#record) this.#record.attributes[key] = value;
  }

  fail(code: string, message: string): void {
    if (!this.#record) return;
    this.#record.attributes["error.type"] = code;
    // An upstream's error text may quote anything: redacted like every diagnostic.
    this.#record.error = redact(message).slice(0, 256);
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
      this.traceId,
      this.spanId,
      this.#tracestate,
      this.#sampled,
      attributes,
    );
  }

  carrier(): TraceCarrier {
    const traceparent = formatTraceparent(this.traceId, this.spanId, this.#sampled);
    return this.#tracestate === undefined ? { traceparent } : {
      traceparent,
      tracestate: this.#tracestate,
    };
  }

  end(): void {
    const record = this.#record;
    if (!record || record.end !== 0) return;
    record.end = performance.now();
    this.#tracer.record(record);
  }
}

/** Decides at a trace's root; `parentbased_*` follows the caller's sampled flag when it sent one. */
function sampler(
  config: TracingConfig,
): (traceId: string, parent: ParentContext | undefined) => boolean {
  // The ratio samplers decide on the trace id (its last 8 hex digits), as the OTel SDKs do.
  const ratio = (traceId: string) =>
    parseInt(traceId.slice(24), 16) / 0x1_0000_0000 < config.samplerRatio;
  const root = config.sampler.endsWith("always_on")
    ? () => true
    : config.sampler.endsWith("always_off")
    ? () => false
    : ratio;
  if (!config.sampler.startsWith("parentbased_")) return (traceId) => root(traceId);
  return (traceId, parent) => parent === undefined ? root(traceId) : parent.sampled;
}

const ORIGIN_MS = performance.timeOrigin;

/** Unix epoch nanoseconds of a performance.now() reading, as the decimal string OTLP JSON uses. */
function unixNanos(now: number): string {
  const ms = ORIGIN_MS + now;
  const whole = Math.floor(ms);
  const nanos = Math.min(999_999, Math.round((ms - whole) * 1e6));
  return `${whole}${String(nanos).padStart(6, "0")}`;
}

/** Unix epoch nanoseconds of a performance.now() reading, for protobuf's fixed64. */
function bigNanos(now: number): bigint {
  const ms = ORIGIN_MS + now;
  const whole = Math.floor(ms);
  return BigInt(whole) * 1_000_000n + BigInt(Math.min(999_999, Math.round((ms - whole) * 1e6)));
}

/** One span as OTLP JSON, written as text (cheaper than building and stringifying objects). */
function otlpSpan(span: SpanRecord): string {
  let out = `{"traceId":"${span.traceId}","spanId":"${span.spanId}"`;
  if (span.parentSpanId !== undefined) out += `,"parentSpanId":"${span.parentSpanId}"`;
  if (span.traceState !== undefined) out += `,"traceState":${JSON.stringify(span.traceState)}`;
  out += `,"name":${JSON.stringify(span.name)},"kind":${span.kind},"startTimeUnixNano":"${
    unixNanos(span.start)
  }","endTimeUnixNano":"${unixNanos(span.end)}","attributes":[`;
  const own = otlpAttributes(span.attributes);
  out += span.shared === undefined
    ? `${own}]`
    : own === ""
    ? `${span.shared.json}]`
    : `${span.shared.json},${own}]`;
  // STATUS_CODE_ERROR = 2; an unset status is every other span's.
  out += span.error === undefined
    ? `,"status":{}}`
    : `,"status":{"code":2,"message":${JSON.stringify(span.error)}}}`;
  return out;
}

/** Attributes as OTLP JSON `KeyValue`s, comma-separated (the inside of the list). */
function otlpAttributes(attributes: Readonly<Record<string, SpanValue>>): string {
  let out = "";
  for (const key in attributes) {
    const value = attributes[key];
    const typed = typeof value === "string"
      ? `"stringValue":${JSON.stringify(value)}`
      : typeof value === "boolean"
      ? `"boolValue":${value}`
      : Number.isSafeInteger(value)
      ? `"intValue":"${value}"`
      : `"doubleValue":${Number.isFinite(value) ? value : JSON.stringify(String(value))}`;
    out += `${out === "" ? "" : ","}{"key":${JSON.stringify(key)},"value":{${typed}}}`;
  }
  return out;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
