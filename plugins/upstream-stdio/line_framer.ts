/**
 * LineFramer: splits a byte stream into newline-terminated lines with a size bound.
 *
 * A line longer than the bound is never buffered whole: the framer keeps a short preview, skips
 * to the next newline, reports the line once as oversized and carries on with the next line, so
 * one runaway line costs bounded memory and does not end the stream. No SDK import: it runs in
 * the lean stdio relay worker.
 * @module
 */

const NEWLINE = 0x0a;

/** Where {@link LineFramer} delivers lines. */
export interface LineSink {
  /** A complete line without its newline (a view that is valid only during the call). */
  line(bytes: Uint8Array): void;
  /**
   * A line over the bound: its first bytes, its total length (counted up to the newline) and its
   * last bytes (where a serialized JSON-RPC response usually carries its id).
   */
  oversized(preview: Uint8Array, totalBytes: number, tail: Uint8Array): void;
}

/** Splits chunks into lines of at most `maxBytes` bytes (newline excluded). */
export class LineFramer {
  readonly #maxBytes: number;
  readonly #previewBytes: number;
  readonly #sink: LineSink;
  #chunks: Uint8Array[] = [];
  #size = 0;
  /** Set while skipping the rest of an oversized line. */
  #skipping: { preview: Uint8Array; total: number; tail: Uint8Array } | undefined;

  constructor(maxBytes: number, sink: LineSink, previewBytes = 200) {
    if (!Number.isInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`maxBytes must be a positive integer, received ${maxBytes}`);
    }
    this.#maxBytes = maxBytes;
    this.#previewBytes = previewBytes;
    this.#sink = sink;
  }

  /** Feeds one chunk; complete lines are delivered before it returns. */
  push(chunk: Uint8Array): void {
    let start = 0;
    for (let i = chunk.indexOf(NEWLINE); i !== -1; i = chunk.indexOf(NEWLINE, start)) {
      const piece = chunk.subarray(start, i);
      start = i + 1;
      if (this.#skipping) {
        const { preview, total, tail } = this.#skipping;
        this.#skipping = undefined;
        this.#sink.oversized(
          preview,
          total + piece.length,
          lastBytes([tail, piece], this.#previewBytes),
        );
        continue;
      }
      if (this.#size + piece.length > this.#maxBytes) {
        const total = this.#size + piece.length;
        const preview = this.#preview(piece);
        const tail = lastBytes([...this.#chunks, piece], this.#previewBytes);
        this.#reset();
        this.#sink.oversized(preview, total, tail);
        continue;
      }
      const line = this.#chunks.length === 0 ? piece : this.#join(piece);
      this.#reset();
      this.#sink.line(line);
    }
    const rest = chunk.subarray(start);
    if (rest.length === 0) return;
    if (this.#skipping) {
      this.#skipping.total += rest.length;
      this.#skipping.tail = lastBytes([this.#skipping.tail, rest], this.#previewBytes);
      return;
    }
    if (this.#size + rest.length > this.#maxBytes) {
      this.#skipping = {
        preview: this.#preview(rest),
        total: this.#size + rest.length,
        tail: lastBytes([rest], this.#previewBytes),
      };
      this.#reset();
      return;
    }
    // Copied: the caller may reuse the chunk's buffer.
    this.#chunks.push(rest.slice());
    this.#size += rest.length;
  }

  /** Ends the stream: an unterminated last line is delivered (or reported oversized). */
  end(): void {
    if (this.#skipping) {
      const { preview, total, tail } = this.#skipping;
      this.#skipping = undefined;
      this.#sink.oversized(preview, total, tail);
      return;
    }
    if (this.#size === 0) return;
    const line = this.#join(new Uint8Array(0));
    this.#reset();
    this.#sink.line(line);
  }

  #reset(): void {
    this.#chunks = [];
    this.#size = 0;
  }

  #join(last: Uint8Array): Uint8Array {
    const out = new Uint8Array(this.#size + last.length);
    let offset = 0;
    for (const chunk of this.#chunks) {
      out.set(chunk, offset);
      offset += chunk.length;
    }
    out.set(last, offset);
    return out;
  }

  #preview(last: Uint8Array): Uint8Array {
    const out = new Uint8Array(Math.min(this.#previewBytes, this.#size + last.length));
    let offset = 0;
    for (const part of [...this.#chunks, last]) {
      if (offset >= out.length) break;
      const take = part.subarray(0, out.length - offset);
      out.set(take, offset);
      offset += take.length;
    }
    return out;
  }
}

/** The last `n` bytes of `parts` laid end to end, copied without joining the whole. */
function lastBytes(parts: Uint8Array[], n: number): Uint8Array {
  const size = parts.reduce((sum, part) => sum + part.length, 0);
  const out = new Uint8Array(Math.min(n, size));
  let end = out.length;
  for (let i = parts.length - 1; i >= 0 && end > 0; i--) {
    const part = parts[i]!;
    const take = part.subarray(Math.max(0, part.length - end));
    end -= take.length;
    out.set(take, end);
  }
  return out;
}
