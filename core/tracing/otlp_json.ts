/**
 * The OTLP specification's JSON encoding of an `ExportTraceServiceRequest`, for
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`: each span written as text when it ends (cheaper than
 * building objects and stringifying them), encoded as UTF-8 into the batch as it ends.
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import { type OtlpResource, type SpanBatch, unixNanoDecimal } from "./span_batch.ts";
import { PairCache } from "./pair_cache.ts";
import { ProtoWriter } from "./proto_writer.ts";
import { hex32, traceHex } from "./span_ids.ts";
import { MAX_ATTRIBUTES, REQUEST_ID, type SpanStore, WORDS } from "./span_store.ts";

const utf8 = new TextEncoder();

/** Spans encoded as OTLP JSON as they end. */
export class JsonBatch implements SpanBatch {
  readonly contentType = "application/json";
  /** The export body before and after the spans, encoded once. */
  readonly #head: Uint8Array;
  readonly #tail = utf8.encode("]}]}]}");
  /**
   * The spans so far, comma-separated, as UTF-8: written as each ends, so an export copies them
   * once (joined as one string, the body was flattened and then encoded again by `fetch`).
   */
  readonly #spans = new ProtoWriter(64 * 1024);
  #count = 0;

  constructor(resource: OtlpResource) {
    this.#head = utf8.encode(
      `{"resourceSpans":[{"resource":{"attributes":[${
        jsonAttributes(resource.attributes)
      }]},"scopeSpans":[{"scope":${JSON.stringify(resource.scope)},"spans":[`,
    );
    // The head is written once, before the spans: an export is a view of this buffer.
    this.#spans.bytes(this.#head);
  }

  get count(): number {
    return this.#count;
  }

  add(store: SpanStore, slot: number): void {
    const span = jsonSpan(store, slot);
    const w = this.#spans;
    // UTF-8 takes at most 3 bytes per UTF-16 unit, and a comma.
    w.room(span.length * 3 + 1 + this.#tail.length);
    if (this.#count++ > 0) w.buf[w.pos++] = 0x2c;
    w.pos += utf8.encodeInto(span, w.buf.subarray(w.pos)).written;
  }

  take(): Uint8Array<ArrayBuffer> {
    const spans = this.#spans;
    // Room for the tail was made with the last span.
    spans.buf.set(this.#tail, spans.pos);
    const body = spans.buf.subarray(0, spans.pos + this.#tail.length);
    spans.pos = this.#head.length;
    this.#count = 0;
    return body;
  }
}

/** One span as OTLP JSON, from its slot in the span store. */
function jsonSpan(store: SpanStore, slot: number): string {
  const ids = store.ids;
  const at = slot * WORDS;
  const trace = traceHex(ids[at]!, ids[at + 1]!, ids[at + 2]!, ids[at + 3]!);
  let out = `{"traceId":"${trace}","spanId":"${hex32(ids[at + 4]!)}${hex32(ids[at + 5]!)}"`;
  if ((ids[at + 6]! | ids[at + 7]!) !== 0) {
    out += `,"parentSpanId":"${hex32(ids[at + 6]!)}${hex32(ids[at + 7]!)}"`;
  }
  const state = store.traceStates[slot];
  if (state !== undefined) out += `,"traceState":${JSON.stringify(state)}`;
  const target = store.targets[slot];
  const name = target === undefined ? store.names[slot]! : `${store.names[slot]} ${target}`;
  out += `,"name":${JSON.stringify(name)},"kind":${store.kinds[slot]},"startTimeUnixNano":"${
    unixNanoDecimal(store.times[slot * 2]!)
  }","endTimeUnixNano":"${unixNanoDecimal(store.times[slot * 2 + 1]!)}","attributes":[`;
  let own = "";
  const first = slot * MAX_ATTRIBUTES;
  for (let i = first, end = first + store.counts[slot]!; i < end; i++) {
    const key = store.keys[i]!;
    const value = store.values[i]!;
    const pair = (typeof value === "string" ? PAIRS.get(key, value, jsonKeyValue) : undefined) ??
      jsonKeyValue(key, value);
    own += own === "" ? pair : `,${pair}`;
  }
  const requestId = store.requestIds[slot];
  if (requestId !== undefined) {
    const pair = jsonKeyValue(REQUEST_ID, requestId);
    own += own === "" ? pair : `,${pair}`;
  }
  const shared = store.shared[slot];
  out += shared === undefined
    ? `${own}]`
    : own === ""
    ? `${shared.json}]`
    : `${shared.json},${own}]`;
  const dropped = store.dropped[slot]!;
  if (dropped > 0) out += `,"droppedAttributesCount":${dropped}`;
  // STATUS_CODE_ERROR = 2; an unset status is every other span's.
  const error = store.errors[slot];
  out += error === undefined
    ? `,"status":{}}`
    : `,"status":{"code":2,"message":${JSON.stringify(error)}}}`;
  return out;
}

/** Span attributes whose string value repeats, each `KeyValue` made once. */
const PAIRS = new PairCache<string>();

/** Attributes as OTLP JSON `KeyValue`s, comma-separated (the inside of the list). */
export function jsonAttributes(attributes: Readonly<Record<string, SpanValue>>): string {
  let out = "";
  for (const key in attributes) {
    const value = attributes[key];
    if (value !== undefined) out += `${out === "" ? "" : ","}${jsonKeyValue(key, value)}`;
  }
  return out;
}

/** One OTLP JSON `KeyValue`. */
function jsonKeyValue(key: string, value: SpanValue): string {
  const typed = typeof value === "string"
    ? `"stringValue":${JSON.stringify(value)}`
    : typeof value === "boolean"
    ? `"boolValue":${value}`
    : Number.isSafeInteger(value)
    ? `"intValue":"${value}"`
    : `"doubleValue":${Number.isFinite(value) ? value : JSON.stringify(String(value))}`;
  return `{"key":${JSON.stringify(key)},"value":{${typed}}}`;
}
