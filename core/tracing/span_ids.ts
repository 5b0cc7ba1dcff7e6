/**
 * Trace and span ids as 32-bit words: drawn in bulk, written to protobuf as bytes without a
 * detour through hex, and turned into hex only where text needs them (a `traceparent`, OTLP
 * JSON), once per id. Building hex strings per span and parsing them back to bytes at export
 * was a fifth of the tracer's cost.
 * @module
 */

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/** A 32-bit word as 8 lower-case hex digits. */
export function hex32(word: number): string {
  return HEX[word >>> 24]! + HEX[(word >>> 16) & 0xff]! + HEX[(word >>> 8) & 0xff]! +
    HEX[word & 0xff]!;
}

/** The character codes of the hex digits. */
const DIGITS = Array.from("0123456789abcdef", (c) => c.charCodeAt(0));

/** The code of the hex digit of `word` at bit `shift`. */
const d = (word: number, shift: number) => DIGITS[(word >>> shift) & 15]!;

/**
 * A trace id's four big-endian words as 32 lower-case hex digits. Like {@link traceparent}, one
 * `String.fromCharCode` of the digits' codes: the cheapest flat string measured (joined hex
 * strings cost 2.5 times as much, `fromCharCode.apply` on a reused array or a TextDecoder more).
 */
export function traceHex(w0: number, w1: number, w2: number, w3: number): string {
  // deno-fmt-ignore
  return String.fromCharCode(
    d(w0, 28), d(w0, 24), d(w0, 20), d(w0, 16), d(w0, 12), d(w0, 8), d(w0, 4), d(w0, 0),
    d(w1, 28), d(w1, 24), d(w1, 20), d(w1, 16), d(w1, 12), d(w1, 8), d(w1, 4), d(w1, 0),
    d(w2, 28), d(w2, 24), d(w2, 20), d(w2, 16), d(w2, 12), d(w2, 8), d(w2, 4), d(w2, 0),
    d(w3, 28), d(w3, 24), d(w3, 20), d(w3, 16), d(w3, 12), d(w3, 8), d(w3, 4), d(w3, 0),
  );
}

/**
 * The W3C `traceparent` (version 00) of a span: its trace id's words, its own id's words and
 * its sampled flag, as one flat string. Concatenated, it would be a V8 cons string, and a cons
 * string anywhere in a message sends `JSON.stringify` of the whole forwarded request down its
 * slow path (~5,000 instructions more per call, measured).
 */
export function traceparent(
  w0: number,
  w1: number,
  w2: number,
  w3: number,
  hi: number,
  lo: number,
  sampled: boolean,
): string {
  // deno-fmt-ignore
  return String.fromCharCode(
    0x30, 0x30, 0x2d,
    d(w0, 28), d(w0, 24), d(w0, 20), d(w0, 16), d(w0, 12), d(w0, 8), d(w0, 4), d(w0, 0),
    d(w1, 28), d(w1, 24), d(w1, 20), d(w1, 16), d(w1, 12), d(w1, 8), d(w1, 4), d(w1, 0),
    d(w2, 28), d(w2, 24), d(w2, 20), d(w2, 16), d(w2, 12), d(w2, 8), d(w2, 4), d(w2, 0),
    d(w3, 28), d(w3, 24), d(w3, 20), d(w3, 16), d(w3, 12), d(w3, 8), d(w3, 4), d(w3, 0),
    0x2d,
    d(hi, 28), d(hi, 24), d(hi, 20), d(hi, 16), d(hi, 12), d(hi, 8), d(hi, 4), d(hi, 0),
    d(lo, 28), d(lo, 24), d(lo, 20), d(lo, 16), d(lo, 12), d(lo, 8), d(lo, 4), d(lo, 0),
    0x2d, 0x30, sampled ? 0x31 : 0x30,
  );
}

/** Random words drawn in bulk: one `getRandomValues` per 256 spans rather than per id. */
const pool = new Uint32Array(512);
let used = pool.length;

/** A random 32-bit word. */
export function randomWord(): number {
  if (used === pool.length) {
    crypto.getRandomValues(pool);
    used = 0;
  }
  return pool[used++]!;
}
