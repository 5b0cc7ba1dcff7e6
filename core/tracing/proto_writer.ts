/**
 * A protobuf buffer written front to back, and the caches of the fields the gateway's spans
 * repeat (attribute keys, names, attribute pairs whose value repeats), each encoded once: what
 * the OTLP encoder (otlp_protobuf.ts) writes spans with. No per-span objects or BigInts (times
 * are written as two 32-bit words), ids as words not hex, and a nested message keeps one byte
 * for its length (the body moves only when it is longer than 127 bytes).
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";
import { PairCache } from "./pair_cache.ts";
import { unixNanoWords } from "./span_batch.ts";

const utf8 = new TextEncoder();

/** The bytes a varint of `value` takes. */
export function varintSize(value: number): number {
  let n = 1;
  // Shifts below 2³¹ (every length here); division above, where a shift would wrap.
  if (value < 0x8000_0000) { for (; value > 0x7f; value >>>= 7) n++; }
  else for (; value > 0x7f; value = Math.floor(value / 128)) n++;
  return n;
}

/** Writes `value` as a varint at `at` of `buf` (room made); returns the position after it. */
export function putVarint(buf: Uint8Array, at: number, value: number): number {
  for (; value >= 0x8000_0000; value = Math.floor(value / 128)) buf[at++] = (value & 0x7f) | 0x80;
  for (; value > 0x7f; value >>>= 7) buf[at++] = (value & 0x7f) | 0x80;
  buf[at++] = value;
  return at;
}

/**
 * A growing buffer written front to back (OTLP JSON's batch keeps its UTF-8 in one too). Tags are
 * written as one byte: every tag here is < 128.
 */
export class ProtoWriter {
  buf: Uint8Array<ArrayBuffer>;
  view: DataView;
  pos = 0;

  constructor(size: number) {
    this.buf = new Uint8Array(size);
    this.view = new DataView(this.buf.buffer);
  }

  room(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    const next = new Uint8Array(Math.max(this.buf.length * 2, this.pos + n));
    next.set(this.buf.subarray(0, this.pos));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }

  byte(value: number): void {
    this.room(1);
    this.buf[this.pos++] = value;
  }

  /** A varint; values up to 2⁵³ (8 bytes). */
  varint(value: number): void {
    this.room(8);
    this.pos = putVarint(this.buf, this.pos, value);
  }

  /** Starts a length-delimited field, keeping `reserve` bytes for the length; returns where it goes. */
  open(tag: number, reserve: number): number {
    this.room(1 + reserve);
    this.buf[this.pos++] = tag;
    const at = this.pos;
    this.pos += reserve;
    return at;
  }

  /** Writes the length of the field opened at `at`, moving the body if it needs other than `reserve` bytes. */
  close(at: number, reserve: number): void {
    const size = this.pos - at - reserve;
    const n = varintSize(size);
    if (n !== reserve) {
      this.room(n - reserve);
      this.buf.copyWithin(at + n, at + reserve, this.pos);
      this.pos += n - reserve;
    }
    putVarint(this.buf, at, size);
  }

  /** A string field; ASCII (nearly every string here) is copied unit by unit, the rest UTF-8 encoded. */
  string(tag: number, value: string): void {
    const start = this.pos;
    this.#header(tag, value.length);
    const pos = this.#ascii(value, this.pos);
    if (pos < 0) {
      this.pos = start;
      this.#utf8(tag, value);
    } else this.pos = pos;
  }

  /** A string field holding `first`, a space and `second`, written without joining them. */
  pair(tag: number, first: string, second: string): void {
    const start = this.pos;
    this.#header(tag, first.length + 1 + second.length);
    let pos = this.#ascii(first, this.pos);
    if (pos >= 0) {
      this.buf[pos++] = 0x20;
      pos = this.#ascii(second, pos);
    }
    if (pos < 0) {
      this.pos = start;
      this.#utf8(tag, `${first} ${second}`);
    } else this.pos = pos;
  }

  /** A field's tag and the varint of its `n` bytes, with room made for them and the bytes. */
  #header(tag: number, n: number): void {
    this.room(9 + n);
    this.buf[this.pos++] = tag;
    this.varint(n);
  }

  /** Copies ASCII `value` to `pos` (room made); the position after it, or -1 at a non-ASCII unit. */
  #ascii(value: string, pos: number): number {
    const buf = this.buf;
    for (let i = 0; i < value.length; i++) {
      const c = value.charCodeAt(i);
      if (c >= 0x80) return -1;
      buf[pos++] = c;
    }
    return pos;
  }

  #utf8(tag: number, value: string): void {
    const most = value.length * 3;
    const reserve = varintSize(most);
    const at = this.open(tag, reserve);
    this.room(most);
    this.pos += utf8.encodeInto(value, this.buf.subarray(this.pos)).written;
    this.close(at, reserve);
  }

  /** Bytes that are already encoded fields. */
  bytes(bytes: Uint8Array): void {
    const n = bytes.length;
    this.room(n);
    // One set() at any length: measured, a byte loop for fields up to 64 bytes (most of a
    // span's) cost more instructions in all than set() on every field.
    this.buf.set(bytes, this.pos);
    this.pos += n;
  }

  /**
   * A 32-bit word as 4 big-endian bytes (ids: their hex order). Byte stores, not DataView:
   * inside the gateway V8 left `setUint32` a builtin call (~80 instructions) at every use.
   */
  word(value: number): void {
    const buf = this.buf;
    const at = this.pos;
    buf[at] = value >>> 24;
    buf[at + 1] = value >>> 16;
    buf[at + 2] = value >>> 8;
    buf[at + 3] = value;
    this.pos = at + 4;
  }

  /** A 32-bit word as 4 little-endian bytes (fixed64 halves). */
  wordLE(value: number): void {
    const buf = this.buf;
    const at = this.pos;
    buf[at] = value;
    buf[at + 1] = value >>> 8;
    buf[at + 2] = value >>> 16;
    buf[at + 3] = value >>> 24;
    this.pos = at + 4;
  }

  /** A fixed64 field holding the Unix nanoseconds of a performance.now() reading. */
  nanos(tag: number, now: number): void {
    unixNanoWords(now, NANOS);
    this.room(9);
    this.buf[this.pos++] = tag;
    this.wordLE(NANOS[0]!);
    this.wordLE(NANOS[1]!);
  }

  /** One `KeyValue` (field tag `tag` of the enclosing message). */
  attribute(tag: number, key: string, value: SpanValue): void {
    if (tag === SPAN_ATTRIBUTE && typeof value === "string") {
      const encoded = PAIRS.get(key, value, encodedPair);
      if (encoded !== undefined) return this.bytes(encoded);
    }
    this.encodeAttribute(tag, key, value);
  }

  /** One `KeyValue`, encoded field by field. */
  encodeAttribute(tag: number, key: string, value: SpanValue): void {
    const kv = this.open(tag, 1);
    this.bytes(keyField(key));
    const any = this.open(0x12, 1); // KeyValue.value
    if (typeof value === "string") this.string(0x0a, value);
    else if (typeof value === "boolean") {
      this.byte(0x10);
      this.byte(value ? 1 : 0);
    } else if (Number.isSafeInteger(value) && value >= 0) {
      this.byte(0x18);
      this.varint(value);
    } else {
      this.byte(0x21); // double_value, fixed64
      this.room(8);
      this.view.setFloat64(this.pos, value, true);
      this.pos += 8;
    }
    this.close(any, 1);
    this.close(kv, 1);
  }

  /** `KeyValue` entries, in the object's order; undefined values are left out. */
  attributes(tag: number, values: Readonly<Record<string, SpanValue>>): void {
    for (const key in values) {
      const value = values[key];
      if (value !== undefined) this.attribute(tag, key, value);
    }
  }
}

/** The words of one timestamp being written (reused: no array per timestamp). */
const NANOS = new Uint32Array(2);

/** Attribute keys are the gateway's own constants: each is encoded once (bounded, in case). */
const KEYS = new Map<string, Uint8Array>();
/** Span names repeat too (a method and a tool): each `Span.name` field is encoded once. */
export const NAMES = new Map<string, Uint8Array>();
/** Entries per cache, and the longest text kept: a bound, whatever reaches the encoder. */
const MAX_FIELDS = 1024;
const MAX_FIELD_TEXT = 256;

/** The string field `tag` holding `text`, encoded once into `cache` (bounded). */
export function stringField(cache: Map<string, Uint8Array>, tag: number, text: string): Uint8Array {
  let field = cache.get(text);
  if (field === undefined) {
    const w = new ProtoWriter(16 + text.length * 3);
    w.string(tag, text);
    field = w.buf.slice(0, w.pos);
    if (cache.size < MAX_FIELDS && text.length <= MAX_FIELD_TEXT) cache.set(text, field);
  }
  return field;
}

/** `KeyValue.key` (field 1) of `key`, encoded. */
function keyField(key: string): Uint8Array {
  return stringField(KEYS, 0x0a, key);
}

/** The field tag of `Span.attributes` (field 9, length-delimited). */
export const SPAN_ATTRIBUTE = 0x4a;
/** Span attributes whose string value repeats, each `KeyValue` encoded once. */
const PAIRS = new PairCache<Uint8Array>();

/** One span attribute's `KeyValue` on its own. */
function encodedPair(key: string, value: string): Uint8Array {
  const w = new ProtoWriter(32 + key.length * 3 + value.length * 3);
  w.encodeAttribute(SPAN_ATTRIBUTE, key, value);
  return w.buf.slice(0, w.pos);
}
