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
import {
  type Clock,
  every,
  serializeMessage,
  systemClock,
  type TimerHandle,
  type UnreadLimits,
  UnreadOutput,
  type UnreadOverflow,
} from "../../core/plugin_api/mod.ts";

const encoder = new TextEncoder();

/** How much may wait for a slow reader. */
export type SseQueueLimits = UnreadLimits;

/** What was queued when a session was ended for not reading. */
export type SseOverflow = UnreadOverflow;

/** How a session's keep-alive comments are timed. */
export interface SseKeepAlive {
  /** Milliseconds between comments; 0 sends none (default 15 000). */
  keepAliveMs?: number;
  /** The clock timing them; the real clock by default. */
  clock?: Clock;
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

  #out: UnreadOutput;
  #closed = false;
  #keepAlive: TimerHandle | undefined;

  constructor(endpoint: string, limits: SseQueueLimits, keepAlive: SseKeepAlive = {}) {
    const { keepAliveMs = 15_000, clock = systemClock } = keepAlive;
    const url = `${endpoint}${endpoint.includes("?") ? "&" : "?"}sessionId=${this.sessionId}`;
    // Every unread byte waits in the bounded output, counted; past it the session ends.
    this.#out = new UnreadOutput(limits, {
      onoverflow: (overflow) => {
        this.onoverflow?.(overflow);
        void this.close();
      },
      // The client went away: end the session.
      oncancel: () => void this.close(),
    });
    this.stream = this.#out.stream;
    this.#write(`event: endpoint\ndata: ${url}\n\n`);
    if (keepAliveMs > 0) {
      // Comments keep idle proxies from cutting the stream.
      this.#keepAlive = every(clock, keepAliveMs, () => this.#write(": keep-alive\n\n"));
    }
  }

  /** Bytes and messages written but not yet taken by the reader. */
  get queued(): { bytes: number; messages: number } {
    return this.#out.queued;
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
    this.#keepAlive?.cancel();
    this.#out.close();
    this.onclose?.();
    return Promise.resolve();
  }

  #write(text: string): void {
    if (!this.#closed) this.#out.write(encoder.encode(text));
  }
}
