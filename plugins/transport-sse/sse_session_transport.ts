/**
 * SseSessionTransport: the server side of MCP's legacy HTTP+SSE transport (protocol 2024-11-05)
 * as an SDK `Transport` on web-standard streams, since the SDK's own version needs Node's http.
 *
 * The client opens `GET /sse`; the first event (`endpoint`) tells it where to POST its messages;
 * every server message is an SSE `message` event on that stream.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import { serializeMessage } from "../../core/plugin_api.ts";

const encoder = new TextEncoder();

/** One legacy SSE session: a long-lived event stream out, POSTed messages in. */
export class SseSessionTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;

  /** The session id the client sends back as `?sessionId=`. */
  readonly sessionId: string = crypto.randomUUID();
  /** The event stream to return as the GET /sse response body. */
  readonly stream: ReadableStream<Uint8Array>;

  #controller!: ReadableStreamDefaultController<Uint8Array>;
  #closed = false;
  #keepAlive: ReturnType<typeof setInterval> | undefined;

  constructor(endpoint: string, keepAliveMs = 15_000) {
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        this.#controller = controller;
        const url = `${endpoint}${endpoint.includes("?") ? "&" : "?"}sessionId=${this.sessionId}`;
        controller.enqueue(encoder.encode(`event: endpoint\ndata: ${url}\n\n`));
      },
      // The client went away: end the session.
      cancel: () => void this.close(),
    });
    if (keepAliveMs > 0) {
      // Comments keep idle proxies from cutting the stream.
      this.#keepAlive = setInterval(() => this.#write(": keep-alive\n\n"), keepAliveMs);
    }
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

  close(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    this.#closed = true;
    clearInterval(this.#keepAlive);
    try {
      this.#controller.close();
    } catch { /* already closed by the client */ }
    this.onclose?.();
    return Promise.resolve();
  }

  #write(text: string): void {
    if (this.#closed) return;
    try {
      this.#controller.enqueue(encoder.encode(text));
    } catch (error) {
      this.onerror?.(error as Error);
      void this.close();
    }
  }
}
