/**
 * The batch each OTLP encoding (protobuf, JSON) writes spans into as they end, read from their
 * slots in the span store, so a finished span is encoded at once and its slot reused (spans kept
 * until export outlived V8's young generation, and the old-generation collections they caused
 * cost more than the encoding).
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import type { SpanStore } from "./span_store.ts";

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
  /** Encodes the finished span in `slot` of `store`. */
  add(store: SpanStore, slot: number): void;
  /**
   * The `ExportTraceServiceRequest` of the spans added so far, and the next batch started: a view
   * of the batch's own buffer, valid until the next {@link SpanBatch.add} (no copy per export;
   * `fetch` copies its body when called, so a post made at once may be given the view).
   */
  take(): Uint8Array<ArrayBuffer>;
}

/** performance.timeOrigin, read once: it is a getter call in Deno, and it never changes. */
export const TIME_ORIGIN: number = performance.timeOrigin;

/** The Unix epoch nanoseconds of `ms` (a Unix time in ms) as [low, high] 32-bit words, exactly. */
function epochNanoWords(ms: number): [number, number] {
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

/** The Unix nanoseconds of the time origin (performance.now() 0), once. */
const [ORIGIN_LOW, ORIGIN_HIGH] = epochNanoWords(TIME_ORIGIN);
const TWO_32 = 4_294_967_296;

/**
 * Unix epoch nanoseconds of a performance.now() reading as two 32-bit words, written to `out`
 * (low, high), no array made per timestamp: the time origin's nanoseconds plus the reading's
 * (an exact integer double for 104 days of uptime), rather than adding the reading to the
 * origin in milliseconds first, which rounds to a quarter microsecond and costs more.
 * (`performance.now()` is never negative; a negative reading counts as 0.)
 */
export function unixNanoWords(now: number, out: Uint32Array): void {
  // An integer double (exact below 2⁵³ ns, 104 days): split at 2³² by a power of two, exactly.
  const offset = Math.max(0, Math.round(now * 1e6));
  const offsetHigh = Math.floor(offset / TWO_32);
  let low = ORIGIN_LOW + (offset - offsetHigh * TWO_32);
  let high = ORIGIN_HIGH + offsetHigh;
  if (low >= TWO_32) {
    low -= TWO_32;
    high++;
  }
  out[0] = low;
  out[1] = high;
}

/**
 * The time origin's Unix nanoseconds as whole seconds and the nanoseconds past them, exactly, from
 * the same whole milliseconds and rounded rest as {@link epochNanoWords}: both forms agree.
 */
const ORIGIN_MS = Math.floor(TIME_ORIGIN);
const ORIGIN_SECONDS = Math.floor(ORIGIN_MS / 1000);
const ORIGIN_NANOS = (ORIGIN_MS - ORIGIN_SECONDS * 1000) * 1e6 +
  Math.min(999_999, Math.round((TIME_ORIGIN - ORIGIN_MS) * 1e6));

/**
 * Unix epoch nanoseconds of a performance.now() reading as a decimal string (OTLP JSON's form),
 * the same value as {@link unixNanoWords}: seconds and the nanoseconds past them, each an exact
 * double, with no BigInt made (two per span cost more than the rest of its JSON) for the first
 * 104 days of a process; past those, from the words.
 */
export function unixNanoDecimal(now: number): string {
  const offset = Math.max(0, Math.round(now * 1e6));
  if (offset >= MAX_EXACT_OFFSET) {
    unixNanoWords(now, DECIMAL_WORDS);
    return String((BigInt(DECIMAL_WORDS[1]!) << 32n) | BigInt(DECIMAL_WORDS[0]!));
  }
  const nanos = ORIGIN_NANOS + offset;
  let carry = Math.floor(nanos / 1e9);
  let rest = nanos - carry * 1e9;
  // The quotient can round across a whole second; the rest says which way.
  if (rest < 0) carry--, rest += 1e9;
  else if (rest >= 1e9) carry++, rest -= 1e9;
  return `${ORIGIN_SECONDS + carry}${String(rest).padStart(9, "0")}`;
}

/** Offsets below this keep `ORIGIN_NANOS + offset` an exact double. */
const MAX_EXACT_OFFSET = 2 ** 53 - 1e9;
const DECIMAL_WORDS = new Uint32Array(2);
