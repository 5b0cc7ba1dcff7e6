/**
 * The OTLP specification's JSON encoding of an `ExportTraceServiceRequest`, for
 * `OTEL_EXPORTER_OTLP_PROTOCOL=http/json`: each span written as text when it ends (cheaper than
 * building objects and stringifying them), the batch joined at export.
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import { type FinishedSpan, type OtlpResource, type SpanBatch, TIME_ORIGIN } from "./span_batch.ts";
import { hex32 } from "./span_ids.ts";

/** Spans encoded as OTLP JSON as they end. */
export class JsonBatch implements SpanBatch {
  readonly contentType = "application/json";
  /** The export body around the spans, serialized once. */
  readonly #head: string;
  #spans: string[] = [];

  constructor(resource: OtlpResource) {
    this.#head = `{"resourceSpans":[{"resource":{"attributes":[${
      jsonAttributes(resource.attributes)
    }]},"scopeSpans":[{"scope":${JSON.stringify(resource.scope)},"spans":`;
  }

  get count(): number {
    return this.#spans.length;
  }

  add(span: FinishedSpan): void {
    this.#spans.push(jsonSpan(span));
  }

  take(): string {
    const body = `${this.#head}[${this.#spans.join(",")}]}]}]}`;
    this.#spans = [];
    return body;
  }
}

/** Unix epoch nanoseconds of a performance.now() reading, as the decimal string OTLP JSON uses. */
function unixNanos(now: number): string {
  const ms = TIME_ORIGIN + now;
  const whole = Math.floor(ms);
  const nanos = Math.min(999_999, Math.round((ms - whole) * 1e6));
  return `${whole}${String(nanos).padStart(6, "0")}`;
}

/** One span as OTLP JSON. */
function jsonSpan(span: FinishedSpan): string {
  let out = `{"traceId":"${span.trace.hex}","spanId":"${hex32(span.idHi)}${hex32(span.idLo)}"`;
  if ((span.parentHi | span.parentLo) !== 0) {
    out += `,"parentSpanId":"${hex32(span.parentHi)}${hex32(span.parentLo)}"`;
  }
  if (span.traceState !== undefined) out += `,"traceState":${JSON.stringify(span.traceState)}`;
  out += `,"name":${JSON.stringify(span.name)},"kind":${span.kind},"startTimeUnixNano":"${
    unixNanos(span.startMs)
  }","endTimeUnixNano":"${unixNanos(span.endMs)}","attributes":[`;
  let own = "";
  for (let i = 0; i < span.keys.length; i++) {
    own += `${own === "" ? "" : ","}${jsonKeyValue(span.keys[i]!, span.values[i]!)}`;
  }
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
