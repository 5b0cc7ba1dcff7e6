/**
 * SseSessionTransport: the server side of MCP's legacy HTTP+SSE transport (protocol 2024-11-05)
 * as an SDK `Transport` on web-standard streams, since the SDK's own version needs Node's http.
 *
 * The client opens `GET /sse`; the first event (`endpoint`) tells it where to POST its messages;
 * every server message is an SSE `message` event on that stream.
 *
 * What the client has not read yet waits in a bounded queue: a client that POSTs but never reads
 * its stream would otherwise grow the gateway's memory without limit. Past the bound (bytes or
 * messages) the session ends and `onoverflow` says why.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { serializeMessage } from "../../core/plugin_api.ts";

const encoder = new TextEncoder();

/** How much may wait for a slow reader. */
export interface SseQueueLimits {
  /** Bytes queued; one message larger than this still goes out when the queue is empty. */
  maxBytes: number;
  maxMessages: number;
}

/** What was queued when a session was ended for not reading. */
export interface SseOverflow {
  queuedBytes: number;
  queuedMessages: number;
  limit: "bytes" | "messages";
}

/** One legacy SSE session: a long-lived event stream out, POSTed messages in. */
export class SseSessionTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Called once, before the session closes, when a reader fell behind the queue's bound. */
  onoverflow?: (overflow: SseOverflow) => void;

  /** The session id the client sends back as `?sessionId=`. */
  readonly sessionId: string = crypto.randomUUID();
  /** The event stream to return as the GET /sse response body. */
  readonly stream: ReadableStream<Uint8Array>;

  #limits: SseQueueLimits;
  #queue: Uint8Array[] = [];
  #queuedBytes = 0;
  /** The stream's reader is waiting for a chunk: the next write goes straight to it. */
  #waiting: ((chunk: Uint8Array | null) => void) | undefined;
  #closed = false;
  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(endpoint: string, limits: SseQueueLimits, keepAliveMs = 15_000) {
    this.#limits = limits;
    const url = `${endpoint}${endpoint.includes("?") ? "&" : "?"}sessionId=${this.sessionId}`;
    this.#write(`event: endpoint\ndata: ${url}\n\n`);
    // Pulled, with no buffer of its own (highWaterMark 0): every unread byte is in #queue, counted.
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => void (this.#controller = controller),
      pull: async (controller) => {
        const chunk = await this.#next();
        if (chunk === null) controller.close();
        else controller.enqueue(chunk);
      },
      // The client went away: end the session.
      cancel: () => void this.close(),
    }, { highWaterMark: 0 });
    if (keepAliveMs > 0) {
      // Comments keep idle proxies from cutting the stream.
      this.#keepAlive = setInterval(() => this.#write(": keep-alive\n\n"), keepAliveMs);
    }
  }

  /** Bytes and messages written but not yet taken by the reader. */
  get queued(): { bytes: number; messages: number } {
    return { bytes: this.#queuedBytes, messages: this.#queue.length };
  }

  start(): Promise<void> {
    return Promise.resolve();
  }

  send(message: JSONRPCMessage): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("SSE session is closed"));
    this.#write(`event: message\ndata: ${serializeMessage(message)}\n\n`);
    return Promise.resolve();
  }

  /** Delivers a message POSTed by the client. */
  receive(message: JSONRPCMessage): void {
    this.onmessage?.(message);
  }

  /** Ends the session; what is queued still goes out (a last answer), then the stream ends. */
  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#keepAlive);
    this.#waiting?.(null);
    this.#waiting = undefined;
    this.onclose?.();
    return Promise.resolve();
  }

  #next(): Promise<Uint8Array | null> {
    const chunk = this.#queue.shift();
    if (chunk !== undefined) {
      this.#queuedBytes -= chunk.byteLength;
      return Promise.resolve(chunk);
    }
    if (this.#closed) return Promise.resolve(null);
    return new Promise((resolve) => this.#waiting = resolve);
  }

  #write(text: string): void {
    if (this.#closed) return;
    const chunk = encoder.encode(text);
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting(chunk);
      return;
    }
    const { maxBytes, maxMessages } = this.#limits;
    const overBytes = this.#queue.length > 0 && this.#queuedBytes + chunk.byteLength > maxBytes;
    if (overBytes || this.#queue.length >= maxMessages) {
      this.onoverflow?.({
        queuedBytes: this.#queuedBytes,
        queuedMessages: this.#queue.length,
        limit: overBytes ? "bytes" : "messages",
      });
      // Dropped, and the response aborted: the connection goes, not just the session.
      this.#queue = [];
      this.#queuedBytes = 0;
      try {
        this.#controller.error(new Error("SSE reader fell behind the queue bound"));
      } catch { /* already ended */ }
      void this.close();
      return;
    }
    this.#queue.push(chunk);
    this.#queuedBytes += chunk.byteLength;
  }
}
