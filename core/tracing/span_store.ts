/**
 * Where spans live from their start until they are encoded: columns of typed arrays and lists,
 * one slot per span, reused. A span object with its ids, times and attribute lists was ~400
 * bytes of young-generation garbage (every 32-bit id word above 2³⁰ and every time a boxed
 * number, two growing lists per span), and the collections of it, on the main thread and on V8's
 * helpers, cost more than recording and encoding together; a slot costs no allocation at all.
 * @module
 */
import type { SpanValue } from "./gateway_tracer.ts";

/** Attributes a span keeps; more are counted in OTLP's `dropped_attributes_count`. */
export const MAX_ATTRIBUTES = 16;
/** Spans open or waiting at once; a span started beyond this is not recorded. */
export const MAX_SLOTS = 65_536;

/**
 * The one attribute whose value differs from call to call: kept in a column of its own, so the
 * attributes that repeat match their encoded template without skipping it, and it is encoded
 * after the template.
 */
export const REQUEST_ID = "jsonrpc.request.id";

/** Words per slot in {@link SpanStore.ids}: trace id (4), span id (2), parent span id (2). */
export const WORDS = 8;

/** Attributes shared by many spans, with each encoding's form made once when first needed. */
export interface EncodedShared {
  readonly attributes: Readonly<Record<string, SpanValue>>;
  /** The `Span.attributes` fields (number 9) as protobuf. */
  readonly proto: Uint8Array;
  /** The OTLP JSON `KeyValue`s, comma-separated. */
  readonly json: string;
}

/** The columns of every recorded span in progress (an unsampled span takes no slot). */
export class SpanStore {
  /** Per slot: trace id words 0–3, span id high and low, parent span id high and low (0 for a root). */
  ids = new Uint32Array(0);
  /** Per slot: performance.now() at start and at end. */
  times = new Float64Array(0);
  /** OTLP SpanKind: 1 internal, 2 server, 3 client. */
  kinds = new Uint8Array(0);
  /** Attributes set, and attributes dropped beyond {@link MAX_ATTRIBUTES}. */
  counts = new Uint8Array(0);
  dropped = new Uint16Array(0);
  /** Bumped when a slot is freed: a span's handle holds the generation it was started in. */
  generations = new Uint32Array(0);
  /** The span's name, and what follows it after a space (a tool), kept apart: no string built. */
  readonly names: (string | undefined)[] = [];
  readonly targets: (string | undefined)[] = [];
  readonly traceStates: (string | undefined)[] = [];
  /** A failed span's status message; undefined leaves the status unset. */
  readonly errors: (string | undefined)[] = [];
  readonly shared: (EncodedShared | undefined)[] = [];
  /** The span's {@link REQUEST_ID}, when it has one. */
  readonly requestIds: (SpanValue | undefined)[] = [];
  /** {@link MAX_ATTRIBUTES} per slot, each key once, in the order set. */
  readonly keys: (string | undefined)[] = [];
  readonly values: (SpanValue | undefined)[] = [];
  #free = new Int32Array(0);
  #top = 0;
  #size = 0;

  /** Slots made so far (in use or free). */
  get size(): number {
    return this.#size;
  }

  /** A free slot, or -1 when {@link MAX_SLOTS} are taken (a span never ended, or a flood). */
  alloc(): number {
    if (this.#top === 0 && !this.#grow()) return -1;
    return this.#free[--this.#top]!;
  }

  /**
   * Returns a slot, its generation bumped so a late handle sees it gone. Its strings are left
   * until the slot is next used, when every field is written again: at most {@link MAX_SLOTS}
   * of each are held (with --trace-gc, clearing them made no difference to the collections
   * that could be told from the runs' noise).
   */
  free(slot: number): void {
    this.generations[slot]!++;
    this.counts[slot] = 0;
    this.dropped[slot] = 0;
    this.requestIds[slot] = undefined;
    this.#free[this.#top++] = slot;
  }

  /** Sets `key` on `slot` (replacing its value if set before). */
  set(slot: number, key: string, value: SpanValue): void {
    if (key === REQUEST_ID) {
      this.requestIds[slot] = value;
      return;
    }
    const keys = this.keys;
    const base = slot * MAX_ATTRIBUTES;
    const end = base + this.counts[slot]!;
    // The keys are the gateway's constants: a scan compares pointers, cheaper than any map.
    for (let i = base; i < end; i++) {
      if (keys[i] === key) {
        this.values[i] = value;
        return;
      }
    }
    if (end === base + MAX_ATTRIBUTES) {
      this.dropped[slot]!++;
      return;
    }
    keys[end] = key;
    this.values[end] = value;
    this.counts[slot]!++;
  }

  #grow(): boolean {
    const size = this.#size;
    if (size >= MAX_SLOTS) return false;
    const next = size === 0 ? 64 : Math.min(MAX_SLOTS, size * 2);
    this.ids = grown(this.ids, new Uint32Array(next * WORDS));
    this.times = grown(this.times, new Float64Array(next * 2));
    this.kinds = grown(this.kinds, new Uint8Array(next));
    this.counts = grown(this.counts, new Uint8Array(next));
    this.dropped = grown(this.dropped, new Uint16Array(next));
    this.generations = grown(this.generations, new Uint32Array(next));
    for (let i = size; i < next; i++) {
      this.names.push(undefined);
      this.targets.push(undefined);
      this.traceStates.push(undefined);
      this.errors.push(undefined);
      this.shared.push(undefined);
      this.requestIds.push(undefined);
    }
    for (let i = size * MAX_ATTRIBUTES; i < next * MAX_ATTRIBUTES; i++) {
      this.keys.push(undefined);
      this.values.push(undefined);
    }
    const free = new Int32Array(next);
    free.set(this.#free.subarray(0, this.#top));
    // Lower slots first out: the columns in use stay together.
    for (let i = next - 1; i >= size; i--) free[this.#top++] = i;
    this.#free = free;
    this.#size = next;
    return true;
  }
}

function grown<T extends Uint8Array | Uint16Array | Uint32Array | Float64Array>(
  old: T,
  next: T,
): T {
  next.set(old as never);
  return next;
}
