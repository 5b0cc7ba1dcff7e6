/**
 * The encodings of span attributes whose string value repeats (a tool, an upstream, a verdict, a
 * method), each made once: most of a span's bytes, and most of an encoder's time. One cache per
 * encoding (protobuf, JSON), bounded like every cache here, whatever reaches the encoder.
 * @module
 */

const MAX_PAIR_KEYS = 256;
/** A key seen with more values than this (a request id) is never kept again. */
const MAX_VALUES_PER_KEY = 64;
const MAX_PAIR_VALUE = 256;

/** Encoded `key` = `value` attributes by key and value. */
export class PairCache<T> {
  readonly #pairs = new Map<string, Map<string, T> | null>();

  /**
   * The encoding of `key` = `value`, made by `make` the first time; undefined when the pair is
   * not one to keep (its key has too many values, its value is long, the cache is full), for the
   * caller to encode itself.
   */
  get(key: string, value: string, make: (key: string, value: string) => T): T | undefined {
    let values = this.#pairs.get(key);
    if (values === null || value.length > MAX_PAIR_VALUE) return undefined;
    if (values === undefined) {
      if (this.#pairs.size >= MAX_PAIR_KEYS) return undefined;
      this.#pairs.set(key, values = new Map());
    }
    let encoded = values.get(value);
    if (encoded === undefined) {
      if (values.size >= MAX_VALUES_PER_KEY) {
        this.#pairs.set(key, null);
        return undefined;
      }
      encoded = make(key, value);
      values.set(value, encoded);
    }
    return encoded;
  }
}
