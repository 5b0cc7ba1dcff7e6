/**
 * The tracer behind {@link GatewayTracer}: a sampled span is recorded in a slot of a
 * {@link SpanStore} (no object per span but a four-field handle) and encoded into the export batch
 * the moment it ends (otlp_exporter.ts), as protobuf (otlp_protobuf.ts, the default) or as the
 * OTLP specification's JSON encoding (`OTEL_EXPORTER_OTLP_PROTOCOL=http/json`); an unsampled one
 * is a {@link DetachedSpan} that only passes its context on.
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
import { redactCut } from "../support/redact.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import type {
  GatewayTracer,
  InboundRequestInfo,
  SharedAttributes,
  SpanValue,
  TraceCarrier,
  TraceSpan,
} from "./gateway_tracer.ts";
import type { TracingConfig } from "./tracing_config.ts";
import { jsonAttributes, JsonBatch } from "./otlp_json.ts";
import { encodeAttributes, ProtobufBatch } from "./otlp_protobuf.ts";
import { SpanExporter } from "./otlp_exporter.ts";
import type { OtlpResource } from "./span_batch.ts";
import { type EncodedShared, SpanStore, WORDS } from "./span_store.ts";
import { randomWord, traceHex, traceparent } from "./span_ids.ts";
import { type ParentContext, parseTraceparent } from "./w3c_trace_context.ts";

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
  readonly store = new SpanStore();
  readonly #sample: (traceLow: number, parent: ParentContext | undefined) => boolean;
  readonly #exporter: SpanExporter;
  #stopped = false;
  #lost = 0;
  readonly #log: Logger;

  constructor(config: TracingConfig, logger: Logger, clock: Clock = systemClock) {
    this.#sample = sampler(config);
    this.#log = logger;
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
    target: string | undefined,
    meta: unknown,
    requestInfo: InboundRequestInfo | undefined,
    shared: SharedAttributes,
    startedAt?: number,
  ): TraceSpan {
    const parent = parentOf(meta, requestInfo);
    const store = this.store;
    let w0: number, w1: number, w2: number, w3: number;
    if (parent === undefined) {
      do {
        w0 = randomWord(), w1 = randomWord(), w2 = randomWord(), w3 = randomWord();
      } while ((w0 | w1 | w2 | w3) === 0);
    } else {
      w0 = parent.t0, w1 = parent.t1, w2 = parent.t2, w3 = parent.t3;
    }
    // An unsampled request records nothing: ids to pass on in one small object, no slot.
    if (!this.#sample(w3, parent)) {
      return new DetachedSpan([w0, w1, w2, w3], false, parent?.tracestate);
    }
    const slot = store.alloc();
    if (slot < 0) return this.lostSpan(w0, w1, w2, w3, parent?.tracestate);
    const ids = store.ids;
    const at = slot * WORDS;
    ids[at] = w0, ids[at + 1] = w1, ids[at + 2] = w2, ids[at + 3] = w3;
    if (parent === undefined) {
      ids[at + 6] = ids[at + 7] = 0;
      store.traceStates[slot] = undefined;
    } else {
      ids[at + 6] = parent.spanHi;
      ids[at + 7] = parent.spanLo;
      store.traceStates[slot] = parent.tracestate;
    }
    const span = this.open(slot, name, target, KIND.server, startedAt);
    // Made by shared(): this tracer's own class.
    store.shared[slot] = shared as EncodedAttributes;
    return span;
  }

  /**
   * Fills the rest of a slot whose trace and parent ids and trace state are written: its id,
   * name, kind, start; no shared attributes and no error yet (a freed slot keeps its old ones).
   */
  open(
    slot: number,
    name: string,
    target: string | undefined,
    kind: number,
    startedAt?: number,
  ): StoreSpan {
    const store = this.store;
    const ids = store.ids;
    const at = slot * WORDS;
    let hi = randomWord();
    let lo = randomWord();
    while ((hi | lo) === 0) hi = randomWord(), lo = randomWord();
    ids[at + 4] = hi;
    ids[at + 5] = lo;
    store.kinds[slot] = kind;
    store.names[slot] = name;
    store.targets[slot] = target;
    store.shared[slot] = undefined;
    store.errors[slot] = undefined;
    store.times[slot * 2] = startedAt ?? performance.now();
    return new StoreSpan(this, slot, store.generations[slot]!);
  }

  /** A sampled span that could not get a slot: it carries its ids on and records nothing. */
  lostSpan(w0: number, w1: number, w2: number, w3: number, state: string | undefined): TraceSpan {
    if (this.#lost++ === 0) {
      this.#log.warn(
        `a span was not recorded: more than ${this.store.size} spans are open or waiting ` +
          "(a span never ended, or a flood); its ids are still passed on",
      );
    }
    return new DetachedSpan([w0, w1, w2, w3], true, state);
  }

  /** Encodes a finished span for export and frees its slot. */
  record(slot: number): void {
    if (!this.#stopped) this.#exporter.add(this.store, slot);
    this.store.free(slot);
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
function parentOf(
  meta: unknown,
  info: InboundRequestInfo | undefined,
): ParentContext | undefined {
  if (meta !== null && typeof meta === "object") {
    const m = meta as Record<string, unknown>;
    const parent = parseTraceparent(m.traceparent, m.tracestate);
    if (parent) return parent;
  }
  if (info === undefined) return undefined;
  // Two headers, not all of them (copying a request's headers into an object was ~13 µs a call),
  // and `tracestate` only beside a `traceparent`: without one it means nothing.
  if (info.header) {
    const traceparent = info.header("traceparent");
    return traceparent === undefined
      ? undefined
      : parseTraceparent(traceparent, info.header("tracestate"));
  }
  const traceparent = first(info.headers?.traceparent);
  return traceparent === undefined
    ? undefined
    : parseTraceparent(traceparent, first(info.headers?.tracestate));
}

function first(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/**
 * A recorded span's handle: its slot and the generation it was started in, so a handle used after
 * its span ended (its slot freed, maybe reused) changes nothing.
 */
class StoreSpan implements TraceSpan {
  readonly #tracer: OtlpTracer;
  readonly #store: SpanStore;
  readonly #slot: number;
  readonly #generation: number;

  constructor(tracer: OtlpTracer, slot: number, generation: number) {
    this.#tracer = tracer;
    this.#store = tracer.store;
    this.#slot = slot;
    this.#generation = generation;
  }

  /** Whether the span is still open (its slot not freed). */
  get recording(): boolean {
    return this.#store.generations[this.#slot] === this.#generation;
  }

  get traceId(): string {
    if (!this.recording) return "0".repeat(32);
    const at = this.#slot * WORDS;
    const ids = this.#store.ids;
    return traceHex(ids[at]!, ids[at + 1]!, ids[at + 2]!, ids[at + 3]!);
  }

  set(key: string, value: SpanValue | undefined): void {
    if (value !== undefined && this.recording) this.#store.set(this.#slot, key, value);
  }

  fail(code: string, message: string): void {
    if (!this.recording) return;
    const store = this.#store;
    store.set(this.#slot, "error.type", code);
    // An upstream's error text may quote anything: redacted like every diagnostic.
    store.errors[this.#slot] = redactCut(message, 256);
  }

  child(
    name: string,
    attributes?: Record<string, SpanValue>,
    kind: "internal" | "client" = "internal",
    target?: string,
  ): TraceSpan {
    // The parent ended first (work that outlived its request): a trace of its own.
    if (!this.recording) return new DetachedSpan(undefined, false, undefined);
    const tracer = this.#tracer;
    const store = this.#store;
    const parent = this.#slot;
    const slot = store.alloc();
    // After alloc(): growing the store replaces its columns.
    const ids = store.ids;
    const from = parent * WORDS;
    if (slot < 0) {
      const state = store.traceStates[parent];
      return tracer.lostSpan(ids[from]!, ids[from + 1]!, ids[from + 2]!, ids[from + 3]!, state);
    }
    const at = slot * WORDS;
    ids[at] = ids[from]!;
    ids[at + 1] = ids[from + 1]!;
    ids[at + 2] = ids[from + 2]!;
    ids[at + 3] = ids[from + 3]!;
    ids[at + 6] = ids[from + 4]!;
    ids[at + 7] = ids[from + 5]!;
    store.traceStates[slot] = store.traceStates[parent];
    const span = tracer.open(slot, name, target, KIND[kind]);
    if (attributes !== undefined) {
      for (const key in attributes) {
        const value = attributes[key];
        if (value !== undefined) store.set(slot, key, value);
      }
    }
    return span;
  }

  carrier(): TraceCarrier {
    if (!this.recording) return new DetachedSpan(undefined, false, undefined).carrier();
    const store = this.#store;
    const slot = this.#slot;
    const at = slot * WORDS;
    const ids = store.ids;
    // deno-fmt-ignore
    const parent = traceparent(
      ids[at]!, ids[at + 1]!, ids[at + 2]!, ids[at + 3]!, ids[at + 4]!, ids[at + 5]!, true,
    );
    return carrierOf(parent, store.traceStates[slot]);
  }

  end(at?: number): void {
    if (!this.recording) return;
    const slot = this.#slot;
    this.#store.times[slot * 2 + 1] = at ?? performance.now();
    this.#tracer.record(slot);
  }
}

/**
 * A span that records nothing but has ids, so what it sends carries a valid context: an unsampled
 * request's (the common case under a ratio sampler, so it costs one object and one `traceparent`
 * at most), or a sampled one that found no free slot or outlived its parent. Its children are
 * itself: with nothing recorded, one span id serves them all.
 */
class DetachedSpan implements TraceSpan {
  readonly recording = false;
  /** Trace id words 0–3, then this span's id words: random unless the trace is given. */
  readonly #ids: readonly number[];
  readonly #sampled: boolean;
  readonly #state: string | undefined;
  #carrier: TraceCarrier | undefined;

  constructor(trace: readonly number[] | undefined, sampled: boolean, state: string | undefined) {
    const [w0, w1, w2, w3] = trace ?? [randomWord() | 1, randomWord(), randomWord(), randomWord()];
    this.#ids = [w0!, w1!, w2!, w3!, randomWord() | 1, randomWord()];
    this.#sampled = sampled;
    this.#state = state;
  }

  get traceId(): string {
    const [w0, w1, w2, w3] = this.#ids as [number, number, number, number];
    return traceHex(w0, w1, w2, w3);
  }

  set(): void {}
  fail(): void {}
  end(): void {}

  child(): TraceSpan {
    return this;
  }

  carrier(): TraceCarrier {
    if (this.#carrier !== undefined) return this.#carrier;
    const [w0, w1, w2, w3, hi, lo] = this.#ids as [number, number, number, number, number, number];
    const parent = traceparent(w0, w1, w2, w3, hi, lo, this.#sampled);
    return this.#carrier = carrierOf(parent, this.#state);
  }
}

/** A span's context as requests carry it: its `traceparent`, and `tracestate` when there is one. */
function carrierOf(traceparent: string, tracestate: string | undefined): TraceCarrier {
  return tracestate === undefined ? { traceparent } : { traceparent, tracestate };
}

/** Decides at a trace's root; `parentbased_*` follows the caller's sampled flag when it sent one. */
function sampler(
  config: TracingConfig,
): (traceLow: number, parent: ParentContext | undefined) => boolean {
  // The ratio samplers decide on the trace id's last 8 hex digits, as the OTel SDKs do.
  const ratio = (traceLow: number) => traceLow / 0x1_0000_0000 < config.samplerRatio;
  const root = config.sampler.endsWith("always_on")
    ? () => true
    : config.sampler.endsWith("always_off")
    ? () => false
    : ratio;
  if (!config.sampler.startsWith("parentbased_")) return (traceLow) => root(traceLow);
  return (traceLow, parent) => parent === undefined ? root(traceLow) : parent.sampled;
}
