/**
 * RawRequests: requests to an upstream that bypass the SDK `Client`'s per-message schema work.
 *
 * A relayed `tools/call` result is only passed on: the inbound client validates it against the
 * tool's schemas anyway, so parsing it here with zod (and the SDK's dispatch guards) was most of
 * the gateway's per-call cost. This table shares the `Client`'s transport, as a stage before it:
 * it sends requests under ids of its own (strings, never the SDK's integers) and takes their
 * responses and progress notifications before the `Client` sees them; everything else flows to
 * the `Client` unchanged.
 * Timeouts, cancellation and a closed connection end a request with the same `McpError` codes the
 * SDK uses, so callers translate both paths alike.
 * @module
 */
import {
  ErrorCode,
  type JSONRPCMessage,
  McpError,
  type Progress,
} from "@modelcontextprotocol/sdk/types.js";
import { type Clock, systemClock, type TimerHandle } from "../support/clock.ts";
import { isObject } from "../support/jsonrpc_shape.ts";
import type {
  MessageExtra,
  Receive,
  SessionStage,
  StageLink,
} from "../plugin_api/session_stage.ts";

/** How one raw request is bounded and observed. */
export interface RawRequestOptions {
  /** Aborting sends `notifications/cancelled` upstream and rejects with the signal's reason. */
  signal: AbortSignal;
  /** Milliseconds without an answer (or progress) before the request fails with RequestTimeout. */
  timeout: number;
  /** Asks the upstream for progress and receives it; each notification restarts the timeout. */
  onprogress?: (progress: Progress) => void;
  /** Milliseconds the request may last in all, however much progress restarts `timeout`. */
  maxTotalTimeout?: number;
}

interface Pending {
  resolve(result: Record<string, unknown>): void;
  reject(error: unknown): void;
  onprogress?: (progress: Progress) => void;
  restartTimer(): void;
}

/**
 * Raw request/response correlation on one upstream connection: a stage of the connection's
 * pipeline, before the SDK `Client` (core/plugin_api/stage_pipeline.ts). It sends its requests
 * through the stages before it and takes their answers before the `Client` sees them.
 */
export class RawRequests implements SessionStage {
  readonly #clock: Clock;
  readonly #pending = new Map<string, Pending>();
  #link: StageLink | undefined;
  #next = 0;
  #closed = false;

  /** The timeouts run on `clock`. */
  constructor(clock: Clock = systemClock) {
    this.#clock = clock;
  }

  attach(link: StageLink): void {
    this.#link = link;
  }

  receive(message: JSONRPCMessage, extra: MessageExtra | undefined, next: Receive): void {
    if (!this.#take(message)) next(message, extra);
  }

  closed(): void {
    this.#closeAll();
  }

  /** Sends toward the transport (rejects until the pipeline is composed). */
  #send(message: JSONRPCMessage): Promise<void> {
    return this.#link?.send(message) ?? Promise.reject(closedError());
  }

  /** Requests in flight. */
  get size(): number {
    return this.#pending.size;
  }

  /** Sends `method` with `params` and resolves with the upstream's `result`, unparsed. */
  request(
    method: string,
    params: Record<string, unknown>,
    options: RawRequestOptions,
  ): Promise<Record<string, unknown>> {
    if (this.#closed) return Promise.reject(closedError());
    const { signal, timeout, onprogress, maxTotalTimeout } = options;
    if (signal.aborted) return Promise.reject(signal.reason);
    const id = `a33-${++this.#next}`;
    const { promise, resolve, reject } = Promise.withResolvers<Record<string, unknown>>();
    let timer: TimerHandle | undefined;
    let total: TimerHandle | undefined;
    const settle = () => {
      timer?.cancel();
      total?.cancel();
      signal.removeEventListener("abort", onAbort);
      this.#pending.delete(id);
    };
    const cancel = (reason: string) => {
      this.#send({
        jsonrpc: "2.0",
        method: "notifications/cancelled",
        params: { requestId: id, reason },
      }).catch(() => {/* the connection is going; its close ends the rest */});
    };
    const onAbort = () => {
      settle();
      cancel(String(signal.reason ?? "cancelled by the client"));
      reject(signal.reason);
    };
    const restartTimer = () => {
      timer?.cancel();
      timer = this.#clock.setTimeout(() => {
        settle();
        cancel(`no answer within ${timeout} ms`);
        reject(new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout }));
      }, timeout);
    };
    this.#pending.set(id, {
      resolve: (result) => (settle(), resolve(result)),
      reject: (error) => (settle(), reject(error)),
      ...(onprogress ? { onprogress } : {}),
      restartTimer,
    });
    signal.addEventListener("abort", onAbort, { once: true });
    restartTimer();
    if (maxTotalTimeout !== undefined) {
      total = this.#clock.setTimeout(() => {
        settle();
        cancel(`no answer within ${maxTotalTimeout} ms in all`);
        reject(
          new McpError(ErrorCode.RequestTimeout, "Maximum total timeout exceeded", {
            maxTotalTimeout,
          }),
        );
      }, maxTotalTimeout);
    }
    const sent = onprogress
      ? { ...params, _meta: { ...(params._meta as object | undefined), progressToken: id } }
      : params;
    this.#send({ jsonrpc: "2.0", id, method, params: sent } as JSONRPCMessage).catch(
      (error) => this.#pending.get(id)?.reject(error),
    );
    return promise;
  }

  /** Settles a response or progress of ours; false for everything the `Client` should see. */
  #take(message: JSONRPCMessage): boolean {
    const m = message as {
      id?: unknown;
      method?: unknown;
      result?: unknown;
      error?: unknown;
      params?: { progressToken?: unknown };
    };
    if (typeof m.id === "string" && m.method === undefined) {
      const pending = this.#pending.get(m.id);
      if (!pending) return false;
      if (isObject(m.result)) {
        pending.resolve(m.result);
      } else if (isObject(m.error)) {
        const error = m.error as { code?: unknown; message?: unknown; data?: unknown };
        pending.reject(
          new McpError(
            typeof error.code === "number" ? error.code : ErrorCode.InternalError,
            typeof error.message === "string" ? error.message : "Upstream error without a message",
            error.data,
          ),
        );
      } else {
        pending.reject(
          new McpError(ErrorCode.InternalError, "Upstream sent a response without a result object"),
        );
      }
      return true;
    }
    if (m.method === "notifications/progress" && typeof m.params?.progressToken === "string") {
      const pending = this.#pending.get(m.params.progressToken);
      if (!pending?.onprogress) return false;
      pending.restartTimer();
      const { progressToken: _, ...progress } = m.params as Record<string, unknown>;
      pending.onprogress(progress as Progress);
      return true;
    }
    return false;
  }

  #closeAll(): void {
    this.#closed = true;
    for (const pending of [...this.#pending.values()]) pending.reject(closedError());
  }
}

function closedError(): McpError {
  return new McpError(ErrorCode.ConnectionClosed, "Connection closed");
}
