/**
 * The binary protobuf encoding of an OTLP `ExportTraceServiceRequest` (opentelemetry-proto
 * `collector/trace/v1`), for `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`: only the fields the
 * gateway's spans use. Each span is written, as it ends, straight into one buffer that is reused
 * batch after batch; an export copies it once behind the resource and scope. A span's fields
 * that repeat from call to call of the same kind (its name, kind and every attribute but the
 * request id) are copied from a template encoded once per shape, and its session's attributes
 * from their own encoding, so a span costs its ids, times and request id, and two copies
 * (protobuf takes fields in any order).
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import type { OtlpResource, SpanBatch } from "./span_batch.ts";
import { MAX_ATTRIBUTES, REQUEST_ID, type SpanStore, WORDS } from "./span_store.ts";
import {
  NAMES,
  ProtoWriter,
  putVarint,
  SPAN_ATTRIBUTE,
  stringField,
  varintSize,
} from "./proto_writer.ts";

/** Attributes as `KeyValue` fields numbered `field`, for spans to embed (a session's: `EncodedShared`). */
export function encodeAttributes(
  field: number,
  values: Readonly<Record<string, SpanValue>>,
): Uint8Array {
  const w = new ProtoWriter(256);
  w.attributes(field * 8 + 2, values);
  return w.buf.slice(0, w.pos);
}

/**
 * A template's value that is the span's target (a tool's name is the span's name and its
 * `gen_ai.tool.name`): compared by identity with the span's own target, which the template's key
 * lookup has already compared, rather than by content (a client's tool name is a new string each
 * call).
 */
const TARGET = Symbol("target");

/**
 * A span's repeating fields (name, kind, own attributes), encoded. Not the
 * session's attributes: a template serves every session (a client that opens a session per call
 * would otherwise miss every time), and those are one copy of their own.
 */
interface Template {
  readonly name: string;
  readonly target: string | undefined;
  readonly kind: number;
  readonly dropped: number;
  readonly keys: readonly string[];
  readonly values: readonly (SpanValue | typeof TARGET)[];
  readonly bytes: Uint8Array;
}

/** Templates by the span's target (else its name), a few per key; bounded like every cache here. */
const TEMPLATES = new Map<string, Template[]>();
const MAX_TEMPLATE_KEYS = 1024;
const TEMPLATES_PER_KEY = 4;
const MAX_TEMPLATE_VALUE = 256;

/**
 * Whether `template` is the encoding of `slot`'s repeating fields. Its key (the target, else the
 * name) has matched: with a target, the template's name and the target's presence are checked.
 */
function matches(template: Template, store: SpanStore, slot: number, first: number, end: number) {
  const target = store.targets[slot];
  if (
    template.name !== store.names[slot] ||
    (template.target === undefined) !== (target === undefined) ||
    template.kind !== store.kinds[slot] ||
    template.dropped !== store.dropped[slot]
  ) return false;
  const { keys, values } = store;
  const expected = template.keys;
  const known = template.values;
  let j = 0;
  for (let i = first; i < end; i++) {
    const key = keys[i];
    const value = values[i];
    if (expected[j] !== key) return false;
    const was = known[j];
    if (was === TARGET ? value !== target : was !== value) return false;
    j++;
  }
  return j === expected.length;
}

/** The repeating fields of `slot` encoded (and kept as a template when every value is short). */
function templateOf(store: SpanStore, slot: number, first: number, end: number): Uint8Array {
  const key = store.targets[slot] ?? store.names[slot]!;
  const known = TEMPLATES.get(key);
  if (known !== undefined) {
    for (let i = 0; i < known.length; i++) {
      if (matches(known[i]!, store, slot, first, end)) return known[i]!.bytes;
    }
  }
  const w = new ProtoWriter(256);
  const name = store.names[slot]!;
  const target = store.targets[slot];
  if (target === undefined) w.bytes(stringField(NAMES, 0x2a, name));
  else w.pair(0x2a, name, target);
  w.byte(0x30); // kind
  w.byte(store.kinds[slot]!);
  const keys: string[] = [];
  const values: (SpanValue | typeof TARGET)[] = [];
  let short = name.length <= MAX_TEMPLATE_VALUE &&
    (target === undefined || target.length <= MAX_TEMPLATE_VALUE);
  for (let i = first; i < end; i++) {
    const k = store.keys[i]!;
    const value = store.values[i]!;
    if (typeof value === "string" && value.length > MAX_TEMPLATE_VALUE) short = false;
    keys.push(k);
    values.push(target !== undefined && value === target ? TARGET : value);
    w.attribute(SPAN_ATTRIBUTE, k, value);
  }
  const dropped = store.dropped[slot]!;
  if (dropped > 0) {
    w.byte(0x50); // dropped_attributes_count
    w.varint(dropped);
  }
  const bytes = w.buf.slice(0, w.pos);
  if (short && (known !== undefined || TEMPLATES.size < MAX_TEMPLATE_KEYS)) {
    const template = {
      name,
      target,
      kind: store.kinds[slot]!,
      dropped,
      keys,
      values,
      bytes,
    };
    if (known === undefined) TEMPLATES.set(key, [template]);
    else if (known.length < TEMPLATES_PER_KEY) known.push(template);
    else known[(known.length + slot) % TEMPLATES_PER_KEY] = template;
  }
  return bytes;
}

/** One `Span` (field 2 of `ScopeSpans`), from its slot in the span store. */
function writeSpan(w: ProtoWriter, store: SpanStore, slot: number): void {
  // A span of the gateway's is 150–400 bytes: two bytes of length, moved only beyond 16 KiB.
  const at = w.open(0x12, 2);
  w.room(66);
  const ids = store.ids;
  const id = slot * WORDS;
  const buf = w.buf;
  buf[w.pos++] = 0x0a; // trace_id, 16 bytes
  buf[w.pos++] = 16;
  w.word(ids[id]!);
  w.word(ids[id + 1]!);
  w.word(ids[id + 2]!);
  w.word(ids[id + 3]!);
  buf[w.pos++] = 0x12; // span_id, 8 bytes
  buf[w.pos++] = 8;
  w.word(ids[id + 4]!);
  w.word(ids[id + 5]!);
  const parentHi = ids[id + 6]!;
  const parentLo = ids[id + 7]!;
  if ((parentHi | parentLo) !== 0) {
    buf[w.pos++] = 0x22; // parent_span_id
    buf[w.pos++] = 8;
    w.word(parentHi);
    w.word(parentLo);
  }
  w.nanos(0x39, store.times[slot * 2]!);
  w.nanos(0x41, store.times[slot * 2 + 1]!);
  const state = store.traceStates[slot];
  if (state !== undefined) w.string(0x1a, state);
  const first = slot * MAX_ATTRIBUTES;
  const end = first + store.counts[slot]!;
  const shared = store.shared[slot];
  if (shared !== undefined) w.bytes(shared.proto);
  w.bytes(templateOf(store, slot, first, end));
  // Encoded field by field: a request id is never one of the pairs the cache keeps.
  const requestId = store.requestIds[slot];
  if (requestId !== undefined) w.encodeAttribute(SPAN_ATTRIBUTE, REQUEST_ID, requestId);
  const error = store.errors[slot];
  if (error !== undefined) {
    const status = w.open(0x7a, 1); // field 15
    w.string(0x12, error);
    w.byte(0x18);
    w.byte(2); // STATUS_CODE_ERROR
    w.close(status, 1);
  }
  w.close(at, 2);
}

/** Spans encoded as protobuf as they end. */
export class ProtobufBatch implements SpanBatch {
  readonly contentType = "application/x-protobuf";
  /** `ResourceSpans.resource` (field 1), whole. */
  readonly #resource: Uint8Array;
  /** `ScopeSpans.scope` (field 1), whole. */
  readonly #scope: Uint8Array;
  /**
   * Bytes kept before the spans for what encloses them (the resource, the scope, two tags and
   * three lengths of at most 5 bytes), so an export is a view of this buffer: no copy of its own.
   */
  readonly #headroom: number;
  readonly #spans: ProtoWriter;
  #count = 0;

  constructor(resource: OtlpResource) {
    const r = new ProtoWriter(1024);
    const at = r.open(0x0a, 2);
    r.attributes(0x0a, resource.attributes);
    r.close(at, 2);
    this.#resource = r.buf.slice(0, r.pos);
    const s = new ProtoWriter(256);
    const scope = s.open(0x0a, 1);
    s.string(0x0a, resource.scope.name);
    s.string(0x12, resource.scope.version);
    s.close(scope, 1);
    this.#scope = s.buf.slice(0, s.pos);
    this.#headroom = 12 + this.#resource.length + this.#scope.length;
    this.#spans = new ProtoWriter(64 * 1024);
    this.#spans.pos = this.#headroom;
  }

  get count(): number {
    return this.#count;
  }

  add(store: SpanStore, slot: number): void {
    writeSpan(this.#spans, store, slot);
    this.#count++;
  }

  take(): Uint8Array<ArrayBuffer> {
    const spans = this.#spans;
    const end = spans.pos;
    const scopeSpans = this.#scope.length + end - this.#headroom;
    const resourceSpans = this.#resource.length + 1 + varintSize(scopeSpans) + scopeSpans;
    // What encloses the spans, written right before them.
    const start = end - (1 + varintSize(resourceSpans) + resourceSpans);
    const out = spans.buf;
    out[start] = 0x0a; // ExportTraceServiceRequest.resource_spans
    let pos = putVarint(out, start + 1, resourceSpans);
    out.set(this.#resource, pos);
    pos += this.#resource.length;
    out[pos++] = 0x12; // ResourceSpans.scope_spans
    pos = putVarint(out, pos, scopeSpans);
    out.set(this.#scope, pos);
    spans.pos = this.#headroom;
    this.#count = 0;
    return out.subarray(start, end);
  }
}
