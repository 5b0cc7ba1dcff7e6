/**
 * ToolCallLane: serves `tools/call` straight off a session's transport.
 *
 * `tools/call` is the gateway's hot path. Through the SDK `Server`, each call was schema-parsed on
 * the way in and its (relayed, already valid) result parsed again on the way out, which cost more
 * than everything else the gateway does per call. The lane takes well-formed `tools/call`
 * requests (and cancellations of them) before the SDK sees them and runs the bridge's own handler
 * with the same context the SDK would build: an abort signal, notifications and requests related
 * to the call (so Streamable HTTP routes them to the call's stream), and the caller's auth. The
 * reply is the SDK's reply byte for byte: a result, or `{ code, message, data }` from the error.
 * Everything else — the handshake, lists, malformed calls — still goes through the SDK `Server`.
 * The lane is the last stage of the session pipeline (core/mcp/session_pipeline.ts).
 * @module
 */
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import {
  type CallToolResult,
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type RequestId,
  type ServerNotification,
  type ServerRequest,
} from "@modelcontextprotocol/sdk/types.js";
import { isMeta, isObject, isRequestId } from "../support/jsonrpc_shape.ts";
import type { MessageExtra, Receive, SessionStage } from "../plugin_api/session_stage.ts";

/** The context a request handler receives (the SDK's type). */
export type HandlerExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** A `tools/call` request as the bridge's handler receives it. */
export interface ToolCallRequest {
  method: "tools/call";
  params: {
    name: string;
    arguments?: Record<string, unknown>;
    _meta?: { progressToken?: string | number; [key: string]: unknown };
    [key: string]: unknown;
  };
}

/** Handles one call; rejects with an error carrying a JSON-RPC `code` (and `data`) to refuse. */
export type ToolCallHandler = (
  request: ToolCallRequest,
  extra: HandlerExtra,
) => Promise<CallToolResult>;

/**
 * The lane on one session: the stage of its pipeline just before the SDK `Server`, which takes
 * `tools/call` (and cancellations of the calls it runs) to `handler` directly.
 */
export class ToolCallLane implements SessionStage {
  readonly #server: Server;
  readonly #handler: ToolCallHandler;
  readonly #controllers = new Map<RequestId, AbortController>();

  constructor(server: Server, handler: ToolCallHandler) {
    this.#server = server;
    this.#handler = handler;
  }

  /** Calls being served by the lane right now. */
  get inFlight(): number {
    return this.#controllers.size;
  }

  /** Aborts every call of the lane (the session closed); none of them is answered. */
  abortAll(): void {
    for (const controller of this.#controllers.values()) controller.abort("the session closed");
    this.#controllers.clear();
  }

  receive(message: JSONRPCMessage, info: MessageInfo, next: Receive): void {
    const m = message as { id?: unknown; method?: unknown; params?: unknown };
    if (m.method === "tools/call" && isRequestId(m.id) && !this.#controllers.has(m.id)) {
      if (isCallParams(m.params)) return this.#run(m.id, m.params, info);
    } else if (m.method === "notifications/cancelled" && m.id === undefined) {
      const requestId = (m.params as { requestId?: unknown } | undefined)?.requestId;
      const controller = isRequestId(requestId) ? this.#controllers.get(requestId) : undefined;
      if (controller) {
        this.#controllers.delete(requestId as RequestId);
        const reason = (m.params as { reason?: unknown }).reason;
        controller.abort(typeof reason === "string" ? reason : "cancelled by the client");
        return;
      }
    }
    // Everything else, including a call the lane cannot vouch for, gets the SDK's handling.
    next(message, info);
  }

  #run(id: RequestId, params: ToolCallRequest["params"], info: MessageInfo): void {
    const server = this.#server;
    // The Server's own transport: a reply leaves the way the Server's replies leave.
    const transport = server.transport!;
    const controllers = this.#controllers;
    const controller = new AbortController();
    controllers.set(id, controller);
    const { signal } = controller;
    // The call's notifications, once written: its reply goes out after them, never in one write.
    let notified: Promise<unknown> | undefined;
    const extra: HandlerExtra = {
      signal,
      requestId: id,
      ...(transport.sessionId === undefined ? {} : { sessionId: transport.sessionId }),
      ...(params._meta === undefined ? {} : { _meta: params._meta }),
      ...(info?.authInfo === undefined ? {} : { authInfo: info.authInfo }),
      ...(info?.requestInfo === undefined ? {} : { requestInfo: info.requestInfo }),
      ...(info?.closeSSEStream === undefined ? {} : { closeSSEStream: info.closeSSEStream }),
      ...(info?.closeStandaloneSSEStream === undefined
        ? {}
        : { closeStandaloneSSEStream: info.closeStandaloneSSEStream }),
      sendNotification: (notification) => {
        if (signal.aborted) return Promise.resolve();
        const sent = server.notification(notification, { relatedRequestId: id });
        const written = sent.catch(() => {});
        notified = notified ? Promise.all([notified, written]) : written;
        return sent;
      },
      sendRequest: (async (request, schema, options) => {
        if (signal.aborted) {
          throw new McpError(ErrorCode.ConnectionClosed, "Request was cancelled");
        }
        return await server.request(request, schema, { ...options, relatedRequestId: id });
      }) as HandlerExtra["sendRequest"],
    };
    const reply = (message: JSONRPCMessage) =>
      notified
        ? notified.then(() => signal.aborted ? undefined : transport.send(message))
        : transport.send(message);
    this.#handler({ method: "tools/call", params }, extra)
      .then(
        (result) => signal.aborted ? undefined : reply({ jsonrpc: "2.0", id, result }),
        (error) => signal.aborted ? undefined : reply({ jsonrpc: "2.0", id, error: wire(error) }),
      )
      .catch((error) => server.onerror?.(new Error(`Failed to send response: ${error}`)))
      .finally(() => {
        if (controllers.get(id) === controller) controllers.delete(id);
      });
  }
}

type MessageInfo = MessageExtra | undefined;

/** The SDK's error reply: the error's integer code (else InternalError), message and data. */
function wire(error: unknown): { code: number; message: string; data?: unknown } {
  const e = error as { code?: unknown; message?: unknown; data?: unknown } | null;
  return {
    code: Number.isSafeInteger(e?.code) ? e!.code as number : ErrorCode.InternalError,
    message: typeof e?.message === "string" ? e.message : "Internal error",
    ...(e?.data === undefined ? {} : { data: e.data }),
  };
}

/** What the SDK's CallToolRequestSchema would accept, checked without building a parse tree. */
function isCallParams(params: unknown): params is ToolCallRequest["params"] {
  if (!isObject(params) || typeof params.name !== "string") return false;
  if (params.arguments !== undefined && !isObject(params.arguments)) return false;
  // Task-augmented calls and unusual _meta keep the SDK's full handling.
  return params.task === undefined && isMeta(params._meta);
}
