/**
 * The binary protobuf encoding of an OTLP `ExportTraceServiceRequest` (opentelemetry-proto
 * `collector/trace/v1`), for `OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf`: only the fields the
 * gateway's spans use, written field by field (ids as bytes, times as fixed64, attributes as
 * `KeyValue`s).
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";

/** One span as the encoders take it. */
export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  traceState?: string;
  name: string;
  kind: number;
  startTimeUnixNano: bigint;
  endTimeUnixNano: bigint;
  attributes: Record<string, SpanValue>;
  /** More `attributes` fields, already encoded (see {@link encodeAttributes}). */
  shared?: { proto: Uint8Array };
  /** A failed span's status message (status code ERROR); undefined leaves the status unset. */
  error?: string;
}

/** What every request carries around its spans. */
export interface OtlpResource {
  attributes: Record<string, SpanValue>;
  scope: { name: string; version: string };
}

const encoder = new TextEncoder();

/**
 * One growable buffer written front to back. A submessage keeps five bytes for its length
 * ({@link Writer.begin}); {@link Writer.end} writes the length and moves the body up when the
 * length needs fewer, so nothing is allocated per message.
 */
class Writer {
  #buf = new Uint8Array(64 * 1024);
  #view = new DataView(this.#buf.buffer);
  length = 0;

  #room(n: number): void {
    if (this.length + n <= this.#buf.length) return;
    const next = new Uint8Array(Math.max(this.#buf.length * 2, this.length + n));
    next.set(this.#buf.subarray(0, this.length));
    this.#buf = next;
    this.#view = new DataView(next.buffer);
  }

  varint(value: number): void {
    this.#room(10);
    while (value > 0x7f) {
      this.#buf[this.length++] = (value & 0x7f) | 0x80;
      value = Math.floor(value / 128);
    }
    this.#buf[this.length++] = value;
  }

  tag(field: number, wire: number): void {
    this.varint(field * 8 + wire);
  }

  /** Starts a length-delimited field; returns where its length goes. */
  begin(field: number): number {
    this.tag(field, 2);
    this.#room(5);
    const at = this.length;
    this.length += 5;
    return at;
  }

  end(at: number): void {
    const size = this.length - at - 5;
    let n = 1;
    for (let v = size; v > 0x7f; v = Math.floor(v / 128)) n++;
    if (n < 5) this.#buf.copyWithin(at + n, at + 5, this.length);
    this.length = at;
    this.varint(size);
    this.length = at + n + size;
  }

  string(field: number, value: string): void {
    // ASCII (names, ids, codes: most strings here) is copied unit by unit; a call into the
    // runtime's encoder costs more than a short string's whole loop.
    const n = value.length;
    if (n < 128) {
      this.tag(field, 2);
      this.#room(1 + n);
      const at = this.length;
      let i = 0;
      for (; i < n; i++) {
        const c = value.charCodeAt(i);
        if (c >= 0x80) break;
        this.#buf[at + 1 + i] = c;
      }
      if (i === n) {
        this.#buf[at] = n;
        this.length = at + 1 + n;
        return;
      }
      this.length = at - 1; // not ASCII: undo the tag and encode below
      this.length -= field * 8 + 2 > 0x7f ? 1 : 0;
    }
    // At most 3 bytes per UTF-16 unit: under 43 units the length fits one byte.
    if (value.length < 43) {
      this.tag(field, 2);
      this.#room(1 + value.length * 3);
      const at = this.length++;
      const { written } = encoder.encodeInto(value, this.#buf.subarray(this.length));
      this.#buf[at] = written;
      this.length += written;
      return;
    }
    const at = this.begin(field);
    this.#room(value.length * 3);
    this.length += encoder.encodeInto(value, this.#buf.subarray(this.length)).written;
    this.end(at);
  }

  hex(field: number, hex: string): void {
    const n = hex.length >> 1;
    this.tag(field, 2);
    this.varint(n);
    this.#room(n);
    for (let i = 0; i < n; i++) {
      this.#buf[this.length++] = (nibble(hex.charCodeAt(2 * i)) << 4) |
        nibble(hex.charCodeAt(2 * i + 1));
    }
  }

  /** Bytes that are already encoded fields. */
  raw(bytes: Uint8Array): void {
    this.#room(bytes.length);
    this.#buf.set(bytes, this.length);
    this.length += bytes.length;
  }

  fixed64(field: number, value: bigint): void {
    this.tag(field, 1);
    this.#room(8);
    this.#view.setBigUint64(this.length, value, true);
    this.length += 8;
  }

  double(field: number, value: number): void {
    this.tag(field, 1);
    this.#room(8);
    this.#view.setFloat64(this.length, value, true);
    this.length += 8;
  }

  finish(): Uint8Array {
    return this.#buf.subarray(0, this.length);
  }
}

/** A lower-case hex digit's value. */
function nibble(code: number): number {
  return code <= 57 ? code - 48 : code - 87;
}

/** Attributes as `KeyValue` fields numbered `field`, to embed with {@link OtlpSpan.shared}. */
export function encodeAttributes(
  field: number,
  values: Readonly<Record<string, SpanValue>>,
): Uint8Array {
  const w = new Writer();
  attributes(w, field, values);
  return w.finish().slice();
}

/** `KeyValue` entries (field `field` of the enclosing message). */
function attributes(
  w: Writer,
  field: number,
  attributes: Readonly<Record<string, SpanValue>>,
): void {
  for (const key in attributes) {
    const value = attributes[key]!;
    const kv = w.begin(field);
    w.string(1, key);
    const any = w.begin(2);
    if (typeof value === "string") w.string(1, value);
    else if (typeof value === "boolean") {
      w.tag(2, 0);
      w.varint(value ? 1 : 0);
    } else if (Number.isSafeInteger(value) && value >= 0) {
      w.tag(3, 0);
      w.varint(value);
    } else w.double(4, value);
    w.end(any);
    w.end(kv);
  }
}

/** The request's bytes. */
export function encodeTraceRequest(resource: OtlpResource, spans: OtlpSpan[]): Uint8Array {
  const w = new Writer();
  const resourceSpans = w.begin(1);
  const r = w.begin(1);
  attributes(w, 1, resource.attributes);
  w.end(r);
  const scopeSpans = w.begin(2);
  const scope = w.begin(1);
  w.string(1, resource.scope.name);
  w.string(2, resource.scope.version);
  w.end(scope);
  for (const span of spans) {
    const s = w.begin(2);
    w.hex(1, span.traceId);
    w.hex(2, span.spanId);
    if (span.traceState !== undefined) w.string(3, span.traceState);
    if (span.parentSpanId !== undefined) w.hex(4, span.parentSpanId);
    w.string(5, span.name);
    w.tag(6, 0);
    w.varint(span.kind);
    w.fixed64(7, span.startTimeUnixNano);
    w.fixed64(8, span.endTimeUnixNano);
    if (span.shared) w.raw(span.shared.proto);
    attributes(w, 9, span.attributes);
    if (span.error !== undefined) {
      const status = w.begin(15);
      w.string(2, span.error);
      w.tag(3, 0);
      w.varint(2); // STATUS_CODE_ERROR
      w.end(status);
    }
    w.end(s);
  }
  w.end(scopeSpans);
  w.end(resourceSpans);
  return w.finish();
}
