/**
 * UnreadOutput: a response body the gateway writes to while its client reads it, with what the
 * client has not read yet counted and bounded.
 *
 * A `ReadableStream` with a push source (`controller.enqueue` from `start`) never refuses a
 * chunk: its `desiredSize` just goes negative while the queue grows, so a client that never reads
 * grows the gateway's memory without limit. This stream is pulled with no buffer of its own
 * (`highWaterMark` 0): a chunk goes straight to a waiting reader, else into a queue counted in
 * bytes and chunks. Past either bound the queue is dropped, the stream errors (the connection is
 * cut, not left hanging) and `onoverflow` says what was waiting. One write costs a counter update.
 * @module
 */

/** How much may wait for a slow reader (MCP_SSE_MAX_QUEUE_BYTES, MCP_SSE_MAX_QUEUE_MESSAGES). */
export interface UnreadLimits {
  /** Bytes queued; one chunk larger than this still goes out when the queue is empty. */
  maxBytes: number;
  /** Chunks (messages) queued. */
  maxMessages: number;
}

/** What was waiting when a reader was cut off. */
export interface UnreadOverflow {
  queuedBytes: number;
  queuedMessages: number;
  limit: "bytes" | "messages";
}

/** Callbacks of one {@link UnreadOutput}. */
export interface UnreadOutputEvents {
  /** Called once when a write found the reader past a bound; the stream has errored. */
  onoverflow?: (overflow: UnreadOverflow) => void;
  /** Called once when the reader went away (the client disconnected). */
  oncancel?: () => void;
}

/** The setting that names each bound, for log lines and messages. */
export function unreadLimitName(limit: UnreadOverflow["limit"]): string {
  return limit === "bytes" ? "MCP_SSE_MAX_QUEUE_BYTES" : "MCP_SSE_MAX_QUEUE_MESSAGES";
}

/** One bounded response body. */
export class UnreadOutput {
  /** The body to hand to `new Response(...)`. */
  readonly stream: ReadableStream<Uint8Array>;

  #limits: UnreadLimits;
  #events: UnreadOutputEvents;
  #queue: Uint8Array[] = [];
  #queuedBytes = 0;
  /** The stream's reader is waiting for a chunk: the next write goes straight to it. */
  #waiting: ((chunk: Uint8Array | null) => void) | undefined;
  #ended = false;
  #controller!: ReadableStreamDefaultController<Uint8Array>;

  constructor(limits: UnreadLimits, events: UnreadOutputEvents = {}) {
    this.#limits = limits;
    this.#events = events;
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => void (this.#controller = controller),
      pull: async (controller) => {
        const chunk = await this.#next();
        if (chunk === null) controller.close();
        else controller.enqueue(chunk);
      },
      cancel: () => {
        if (this.#ended) return;
        this.#end();
        this.#events.oncancel?.();
      },
    }, { highWaterMark: 0 });
  }

  /** Bytes and chunks written but not yet taken by the reader. */
  get queued(): { bytes: number; messages: number } {
    return { bytes: this.#queuedBytes, messages: this.#queue.length };
  }

  /** The stream ended: closed, cut off or cancelled. Writes are dropped from then on. */
  get ended(): boolean {
    return this.#ended;
  }

  /** Writes one chunk; false when the stream had ended or this write cut the reader off. */
  write(chunk: Uint8Array): boolean {
    if (this.#ended) return false;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting(chunk);
      return true;
    }
    const { maxBytes, maxMessages } = this.#limits;
    const overBytes = this.#queue.length > 0 && this.#queuedBytes + chunk.byteLength > maxBytes;
    if (overBytes || this.#queue.length >= maxMessages) {
      const overflow: UnreadOverflow = {
        queuedBytes: this.#queuedBytes,
        queuedMessages: this.#queue.length,
        limit: overBytes ? "bytes" : "messages",
      };
      this.#queue = [];
      this.#queuedBytes = 0;
      this.#end();
      try {
        this.#controller.error(new Error("the reader fell behind the unread-output bound"));
      } catch { /* already ended */ }
      this.#events.onoverflow?.(overflow);
      return false;
    }
    this.#queue.push(chunk);
    this.#queuedBytes += chunk.byteLength;
    return true;
  }

  /** Ends the stream; what is queued still goes out first. */
  close(): void {
    if (this.#ended) return;
    this.#end();
  }

  #end(): void {
    this.#ended = true;
    this.#waiting?.(null);
    this.#waiting = undefined;
  }

  #next(): Promise<Uint8Array | null> {
    const chunk = this.#queue.shift();
    if (chunk !== undefined) {
      this.#queuedBytes -= chunk.byteLength;
      return Promise.resolve(chunk);
    }
    if (this.#ended) return Promise.resolve(null);
    return new Promise((resolve) => this.#waiting = resolve);
  }
}
