/**
 * Splits an SSE byte stream at event boundaries (an empty line; lines end in LF, CRLF or CR)
 * without decoding it, so each event can be passed on as the very bytes that came — or, for the
 * few a caller wants to change, replaced. An event larger than `limit` bytes is passed through as
 * it arrives, never buffered or offered for replacement: a response of many megabytes costs a
 * byte scan, not a decode, a parse and a re-encode.
 * @module
 */
import { concatBytes } from "../../core/plugin_api/bounded_body.ts";

const LF = 0x0a;
const CR = 0x0d;

/** A stream that offers each complete event (at most `limit` bytes) to `replace`. */
export function sseEventSplitter(
  /** The bytes to send instead of this event's, or undefined to send it unchanged. */
  replace: (event: Uint8Array) => Uint8Array | undefined,
  limit: number,
): TransformStream<Uint8Array, Uint8Array> {
  let pending: Uint8Array[] = [];
  let pendingBytes = 0;
  /** Past `limit`: the rest of this event is passed straight through. */
  let passing = false;
  const flushEvent = (controller: TransformStreamDefaultController<Uint8Array>) => {
    if (pending.length > 0) {
      const event = pending.length === 1 ? pending[0]! : concatBytes(pending, pendingBytes);
      controller.enqueue(passing ? event : replace(event) ?? event);
    }
    pending = [];
    pendingBytes = 0;
    passing = false;
  };
  const keep = (
    bytes: Uint8Array,
    controller: TransformStreamDefaultController<Uint8Array>,
  ) => {
    if (bytes.length === 0) return;
    if (passing) return controller.enqueue(bytes);
    pending.push(bytes);
    pendingBytes += bytes.length;
    if (pendingBytes > limit) {
      // Too large to offer: what is held goes now, the rest as it comes.
      for (const part of pending) controller.enqueue(part);
      pending = [];
      pendingBytes = 0;
      passing = true;
    }
  };

  const ends = new EventEnds();
  return new TransformStream({
    transform(chunk, controller) {
      let start = 0; // first byte of this chunk not yet kept
      ends.scan(chunk, (end) => {
        keep(chunk.subarray(start, end), controller);
        flushEvent(controller);
        start = end;
      });
      keep(chunk.subarray(start), controller);
    },
    flush(controller) {
      // A last event without its empty line: the reader drops it as the SDK would; sent as is.
      if (pending.length > 0) { for (const part of pending) controller.enqueue(part); }
    },
  });
}

/**
 * Finds where SSE events end in a byte stream fed chunk by chunk (an event ends after an empty
 * line; lines end in LF, CRLF or CR), keeping what it needs across chunk boundaries.
 */
export class EventEnds {
  /** The last byte seen ended a line, so a terminator now is an empty line. */
  #atLineStart = true;
  /** The last byte seen was CR, so an LF now completes it (CRLF is one terminator). */
  #afterCr = false;

  /** Calls `end(at)` for each event ending in `chunk`, `at` the index just past its empty line. */
  scan(chunk: Uint8Array, end: (at: number) => void): void {
    let pos = 0;
    // The next LF and CR at or after pos, each searched again only once passed (a chunk of
    // many LF-only events would otherwise be scanned to its end for a CR at every line).
    let lf = -2;
    let cr = -2;
    while (pos < chunk.length) {
      if (lf !== -1 && lf < pos) lf = chunk.indexOf(LF, pos);
      if (cr !== -1 && cr < pos) cr = chunk.indexOf(CR, pos);
      const t = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr);
      if (t === -1) {
        this.#atLineStart = false;
        this.#afterCr = false;
        return;
      }
      if (t > pos) {
        this.#atLineStart = false;
        this.#afterCr = false;
      }
      const byte = chunk[t];
      if (byte === LF && this.#afterCr && t === pos) {
        // The LF of a CRLF whose CR was the previous byte.
        this.#afterCr = false;
        pos = t + 1;
        continue;
      }
      this.#afterCr = byte === CR;
      pos = t + 1;
      if (this.#atLineStart) {
        // An empty line: the event ends here (with the LF of a CRLF, when it is in this chunk).
        if (byte === CR && chunk[pos] === LF) {
          pos++;
          this.#afterCr = false;
        }
        end(pos);
      }
      this.#atLineStart = true;
    }
  }
}
