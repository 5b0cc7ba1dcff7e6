/**
 * What the OTLP encoders take: a finished span as the tracer holds it, and the batch each
 * encoding (protobuf, JSON) writes spans into as they end, so a finished span is encoded at once
 * and nothing of it outlives the call (spans kept until export outlived V8's young generation,
 * and the old-generation collections they caused cost more than the encoding).
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import type { TraceId } from "./span_ids.ts";

/** Attributes that many spans share, with each encoding's form made once when first needed. */
export interface EncodedShared {
  readonly attributes: Readonly<Record<string, SpanValue>>;
  /** The `Span.attributes` fields (number 9) as protobuf. */
  readonly proto: Uint8Array;
  /** The OTLP JSON `KeyValue`s, comma-separated. */
  readonly json: string;
}

/** A span once it has ended. */
export interface FinishedSpan {
  readonly trace: TraceId;
  /** The span id's high and low 32-bit words. */
  readonly idHi: number;
  readonly idLo: number;
  /** The parent span id's words; both 0 for a root span (an all-zero id is invalid in W3C). */
  readonly parentHi: number;
  readonly parentLo: number;
  readonly traceState: string | undefined;
  readonly name: string;
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  readonly kind: number;
  /** performance.now() at start and end. */
  readonly startMs: number;
  readonly endMs: number;
  /**
   * The span's own attributes as parallel lists, each key once: a span sets attributes as a
   * call goes (verdict, upstream, outcome), and adding properties one by one to objects of many
   * shapes made every set a megamorphic store through V8's runtime (~1,000 instructions each).
   */
  readonly keys: readonly string[];
  readonly values: readonly SpanValue[];
  readonly shared: EncodedShared | undefined;
  /** A failed span's status message (status code ERROR); undefined leaves the status unset. */
  readonly error: string | undefined;
}

/** The resource and scope every export request carries around its spans. */
export interface OtlpResource {
  attributes: Record<string, SpanValue>;
  scope: { name: string; version: string };
}

/** Spans encoded as they end, taken as one export request body. */
export interface SpanBatch {
  readonly contentType: string;
  /** Spans added since the last {@link SpanBatch.take}. */
  readonly count: number;
  add(span: FinishedSpan): void;
  /** The `ExportTraceServiceRequest` of the spans added so far; starts the next batch. */
  take(): Uint8Array<ArrayBuffer> | string;
}

/** performance.timeOrigin, read once: it is a getter call in Deno, and it never changes. */
export const TIME_ORIGIN: number = performance.timeOrigin;

/** Unix epoch nanoseconds of a performance.now() reading as [low, high] 32-bit words. */
export function unixNanoWords(now: number): [number, number] {
  const ms = TIME_ORIGIN + now;
  const whole = Math.floor(ms);
  const nanos = Math.min(999_999, Math.round((ms - whole) * 1e6));
  // whole·10⁶ + nanos exceeds 2⁵³: split whole at 2²⁰ so every product stays an exact double.
  const q = Math.floor(whole / 1_048_576);
  const x = q * 1_000_000; // times 2²⁰ below
  const y = (whole - q * 1_048_576) * 1_000_000 + nanos;
  const xHigh = Math.floor(x / 4096); // x·2²⁰ = xHigh·2³² + (x mod 2¹²)·2²⁰
  let low = (x - xHigh * 4096) * 1_048_576 + y;
  const carry = Math.floor(low / 4_294_967_296);
  low -= carry * 4_294_967_296;
  return [low, xHigh + carry];
}
