/**
 * DirectRequests: answers a POST that carries one request without the SDK transport's request
 * handling.
 *
 * For every POST the SDK's `handleRequest` re-validates the headers, copies them into a plain
 * object, zod-parses the message, opens a response stream or promise, and on the way out scans
 * every request in flight to find which ones share the HTTP response: for a `tools/call`, most of
 * the gateway's CPU per call. What MCP clients send after the handshake is almost always one
 * request per POST; such a POST goes straight into the session's pipeline where the SDK transport
 * would hand it (so the session gate, the tool-call lane and the SDK `Server` behind them see
 * exactly what they see otherwise), and the answer is written the way the SDK writes it: a JSON
 * body in JSON response mode, an SSE stream with the request's notifications and then its answer
 * in SSE mode. The handshake, batches, notifications, responses and unusual headers keep the
 * SDK's handling.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  ErrorCode,
  type JSONRPCMessage,
  type RequestId,
  SUPPORTED_PROTOCOL_VERSIONS,
} from "@modelcontextprotocol/sdk/types.js";
import {
  type Clock,
  isJsonRpcMessage,
  isObject,
  isRequestId,
  type MessageExtra,
  type Receive,
  type Send,
  serializeMessage,
  type SessionStage,
  type StageLink,
  type TimerHandle,
  type UnreadLimits,
  UnreadOutput,
  type UnreadOverflow,
} from "../../core/plugin_api/mod.ts";

/** How the answer is written: one JSON body, or an SSE stream. */
export type ResponseMode = "json" | "sse";

/** Where one direct request's messages go. */
interface Waiter {
  /** A notification or request related to it (SSE mode writes it; JSON mode has nowhere to). */
  related(message: JSONRPCMessage): void;
  /** Its answer; ends the HTTP response. */
  answer(message: JSONRPCMessage): void;
  /** The session closed first. */
  abandon(reason: string): void;
  /** The client cancelled it: the response ends with no answer (none will come). */
  cancelled(): void;
}

const SSE_HEADERS = {
  "Content-Type": "text/event-stream",
  "Cache-Control": "no-cache, no-transform",
  Connection: "keep-alive",
  "X-Accel-Buffering": "no",
};
/** The SDK's keep-alive comment interval on SSE responses (proxies drop silent streams). */
const KEEP_ALIVE_MS = 15_000;
/** How long an SSE-mode answer may hold back the response headers before its stream opens. */
const HOLD_MS = 1_000;
const encoder = new TextEncoder();

/** Called when a request's SSE stream was cut off because its client did not read it. */
export type CutOff = (id: RequestId, overflow: UnreadOverflow) => void;

/**
 * Direct requests of one session: a stage of its pipeline, transport side of the gateway's own
 * stages, which takes the messages that belong to a direct request on their way out.
 */
export class DirectRequests implements SessionStage {
  readonly #transport: Transport;
  readonly #mode: ResponseMode;
  readonly #clock: Clock;
  readonly #limits: UnreadLimits;
  readonly #cutOff: CutOff;
  readonly #waiters = new Map<RequestId, Waiter>();
  /** Where a direct request enters the session: the stages after this one. */
  #receive: Receive | undefined;

  /**
   * The direct requests of `transport`'s session; put it in the stages the session is served
   * with, before the gateway's, so the gateway's stages see every answer first. An SSE stream's
   * unread output is bounded by `limits`; past them the stream is cut and `cutOff` is called
   * (its waiter is gone by then: the caller cancels the request).
   */
  constructor(
    transport: Transport,
    mode: ResponseMode,
    clock: Clock,
    limits: UnreadLimits,
    cutOff: CutOff,
  ) {
    this.#transport = transport;
    this.#mode = mode;
    this.#clock = clock;
    this.#limits = limits;
    this.#cutOff = cutOff;
  }

  attach(link: StageLink): void {
    this.#receive = link.receive;
  }

  /** Takes an outbound message that belongs to a direct request; passes every other one on. */
  send(message: JSONRPCMessage, options: TransportSendOptions | undefined, next: Send) {
    const m = message as { id?: unknown; method?: unknown };
    const answer = m.method === undefined && isRequestId(m.id);
    const id = answer ? m.id as RequestId : options?.relatedRequestId;
    const waiter = id === undefined ? undefined : this.#waiters.get(id);
    if (!waiter) return next(message, options);
    if (answer) {
      this.#waiters.delete(id!);
      waiter.answer(message);
    } else waiter.related(message);
    return Promise.resolve();
  }

  /** Hands an inbound message to the session (the stages after this one), as the transport would. */
  deliver(message: JSONRPCMessage, extra?: MessageExtra): void {
    this.#receive?.(message, extra);
  }

  /** Direct requests not yet answered. */
  get size(): number {
    return this.#waiters.size;
  }

  /**
   * The message, when `request` and its parsed `body` can be answered directly: one well-formed
   * request other than `initialize`, with the headers the SDK would accept. Undefined sends it
   * the SDK's way.
   */
  qualifies(request: Request, body: unknown): JSONRPCMessage | undefined {
    if (!isObject(body) || typeof body.method !== "string" || body.method === "initialize") {
      return undefined;
    }
    if (!isRequestId(body.id)) return undefined;
    if (this.#waiters.has(body.id) || !isJsonRpcMessage(body)) return undefined;
    const accept = request.headers.get("accept");
    if (!accept?.includes("application/json") || !accept.includes("text/event-stream")) {
      return undefined;
    }
    const type = request.headers.get("content-type");
    if (type !== "application/json" && !type?.startsWith("application/json;")) return undefined;
    const version = request.headers.get("mcp-protocol-version");
    if (version !== null && !SUPPORTED_PROTOCOL_VERSIONS.includes(version)) return undefined;
    return body;
  }

  /** Hands `message` (from {@link qualifies}) to the session and answers the POST with its reply. */
  serve(request: Request, message: JSONRPCMessage & { id: RequestId }): Promise<Response> {
    const sessionId = this.#transport.sessionId;
    const requestInfo = lazyRequestInfo(request);
    if (this.#mode === "json") {
      return new Promise((resolve) => {
        this.#waiters.set(message.id, {
          related() {}, // as in the SDK's JSON mode: one JSON body has no room for them
          answer: (reply) => resolve(jsonResponse(reply, sessionId)),
          abandon: (reason) => resolve(jsonResponse(closedError(message.id, reason), sessionId)),
          cancelled: () => resolve(new Response(null, { status: 202 })),
        });
        this.deliver(message, { requestInfo });
      });
    }
    return new Promise((resolve) => this.#serveSse(message, sessionId, requestInfo, resolve));
  }

  /**
   * SSE mode. The answer usually comes before anything else: then the POST is answered with that
   * one event as a fixed body, which costs far less than a stream. The stream opens when a
   * notification or request related to the call comes first, or once the call has run
   * {@link HOLD_MS} (headers go out, and keep-alive comments every 15 s from then on).
   */
  #serveSse(
    message: JSONRPCMessage & { id: RequestId },
    sessionId: string | undefined,
    requestInfo: ReturnType<typeof lazyRequestInfo>,
    resolve: (response: Response) => void,
  ): void {
    const headers = sessionId === undefined
      ? SSE_HEADERS
      : { ...SSE_HEADERS, "mcp-session-id": sessionId };
    let stream: UnreadOutput | undefined;
    let timer: TimerHandle | undefined;
    let open = true;
    // The waiter stays until the answer (send() removes it): what the request still sends after
    // its client went away is dropped here, not handed to the SDK transport, which never knew it.
    const end = () => {
      open = false;
      timer?.cancel();
    };
    const write = (text: string) => {
      if (open && stream && !stream.write(encoder.encode(text))) end();
    };
    const tick = () => {
      write(": keepalive\n\n");
      if (open) timer = this.#clock.setTimeout(tick, KEEP_ALIVE_MS);
    };
    const openStream = () => {
      if (stream || !open) return;
      timer?.cancel();
      stream = new UnreadOutput(this.#limits, {
        // A disconnect is not a cancellation (the spec says so): the request runs on, unanswered.
        oncancel: end,
        // Not reading is: the output has nowhere to go but the gateway's memory.
        onoverflow: (overflow) => {
          end();
          if (this.#waiters.get(message.id) === waiter) this.#waiters.delete(message.id);
          this.#cutOff(message.id, overflow);
        },
      });
      resolve(new Response(stream.stream, { headers }));
      timer = this.#clock.setTimeout(tick, KEEP_ALIVE_MS);
    };
    const last = (event: string) => {
      if (!open) return;
      if (stream) {
        if (event) write(event);
        stream.close();
      } else resolve(new Response(event, { headers }));
      end();
    };
    const waiter: Waiter = {
      related: (related) => {
        openStream();
        write(sseEvent(related));
      },
      answer: (reply) => last(sseEvent(reply)),
      abandon: (reason) => last(sseEvent(closedError(message.id, reason))),
      cancelled: () => last(""),
    };
    this.#waiters.set(message.id, waiter);
    timer = this.#clock.setTimeout(openStream, HOLD_MS);
    this.deliver(message, { requestInfo });
  }

  /**
   * The client cancelled request `id`: its response ends now, without an answer (the spec says
   * none is sent), rather than its waiter and HTTP response being held forever.
   */
  cancel(id: RequestId): void {
    const waiter = this.#waiters.get(id);
    if (!waiter) return;
    this.#waiters.delete(id);
    waiter.cancelled();
  }

  /** Ends every waiting request's response with an error: the session is gone. */
  abandonAll(reason: string): void {
    const waiting = [...this.#waiters.values()];
    this.#waiters.clear();
    for (const waiter of waiting) waiter.abandon(reason);
  }
}

function jsonResponse(message: JSONRPCMessage, sessionId: string | undefined): Response {
  return new Response(serializeMessage(message), {
    headers: sessionId === undefined
      ? { "Content-Type": "application/json" }
      : { "Content-Type": "application/json", "mcp-session-id": sessionId },
  });
}

function sseEvent(message: JSONRPCMessage): string {
  return `event: message\ndata: ${serializeMessage(message)}\n\n`;
}

function closedError(id: RequestId, reason: string): JSONRPCMessage {
  return {
    jsonrpc: "2.0",
    id,
    error: { code: ErrorCode.ConnectionClosed, message: `The session closed (${reason})` },
  };
}

/**
 * The SDK's `requestInfo` (headers as a plain object, the URL), built only if a handler reads it;
 * `header(name)` reads one header without building the object (the tracer's `traceparent`).
 */
function lazyRequestInfo(
  request: Request,
): { headers: Record<string, string>; url: URL; header(name: string): string | undefined } {
  let headers: Record<string, string> | undefined;
  let url: URL | undefined;
  return {
    get headers() {
      return headers ??= Object.fromEntries(request.headers.entries());
    },
    get url() {
      return url ??= new URL(request.url);
    },
    header: (name) => request.headers.get(name) ?? undefined,
  };
}
