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

/** A 16-byte trace id as four big-endian words, shared by every span of the trace. */
export class TraceId {
  readonly w0: number;
  readonly w1: number;
  readonly w2: number;
  readonly w3: number;
  #hex: string | undefined;

  constructor(w0: number, w1: number, w2: number, w3: number, hex?: string) {
    this.w0 = w0;
    this.w1 = w1;
    this.w2 = w2;
    this.w3 = w3;
    this.#hex = hex;
  }

  /** A new random id, never all zero (an invalid id). */
  static random(): TraceId {
    for (;;) {
      const id = new TraceId(randomWord(), randomWord(), randomWord(), randomWord());
      if ((id.w0 | id.w1 | id.w2 | id.w3) !== 0) return id;
    }
  }

  /** The id a valid `traceparent` names (32 lower-case hex digits). */
  static fromHex(hex: string): TraceId {
    const word = (i: number) => parseInt(hex.slice(i, i + 8), 16);
    return new TraceId(word(0), word(8), word(16), word(24), hex);
  }

  /** 32 lower-case hex digits, made once. */
  get hex(): string {
    return this.#hex ??= hex32(this.w0) + hex32(this.w1) + hex32(this.w2) + hex32(this.w3);
  }
}
