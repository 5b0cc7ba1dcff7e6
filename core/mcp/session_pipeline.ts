/**
 * The session pipeline: how one inbound session is built, composed once.
 *
 * A session's messages pass through stages, transport side first: the transport plugin's own
 * (direct requests, response tracking), the session gate (admission, shutdown refusals, the
 * in-flight bound), the tool-call lane, and last the SDK `Server` of the bridge. {@link compose}
 * sets the transport's `onmessage`, `onclose` and `onerror` once and hands the `Server` a
 * {@link Transport} of its own whose `send` runs the outbound chain; nothing reassigns a slot
 * after that. {@link SessionPipeline} is where every transport plugin's `serve` lands: it admits
 * the session at the gate, then has the bridge build its `Server` behind the composed stages.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { MessageExtra, Receive, Send, SessionStage } from "../plugin_api/session_stage.ts";
import type { ServedSession, SessionInfo } from "../plugin_api/mod.ts";
import type { SessionGate } from "./session_gate.ts";

/** The transport the SDK `Server` connects to: the far end of the composed stages. */
class PipelineTransport implements Transport {
  onmessage?: (message: JSONRPCMessage, extra?: MessageExtra) => void;
  onclose?: () => void;
  onerror?: (error: Error) => void;
  readonly #inner: Transport;
  readonly #send: Send;

  constructor(inner: Transport, send: Send) {
    this.#inner = inner;
    this.#send = send;
  }

  start(): Promise<void> {
    return this.#inner.start();
  }

  send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    return this.#send(message, options);
  }

  close(): Promise<void> {
    return this.#inner.close();
  }

  get sessionId(): string | undefined {
    return this.#inner.sessionId;
  }

  setProtocolVersion(version: string): void {
    this.#inner.setProtocolVersion?.(version);
  }
}

/**
 * Composes `stages` (transport side first) over `transport` and returns the transport its
 * consumer (the SDK `Server`) connects to. Takes over `transport`'s `onmessage`, `onclose` and
 * `onerror` slots, once.
 */
export function compose(transport: Transport, stages: readonly SessionStage[]): Transport {
  let adapter: PipelineTransport | undefined = undefined;
  // receiveAt[i]: a message entering stage i; the last one reaches the consumer.
  const receiveAt: Receive[] = [];
  receiveAt[stages.length] = (message, extra) => adapter!.onmessage?.(message, extra);
  for (let i = stages.length - 1; i >= 0; i--) {
    const stage = stages[i]!;
    const next = receiveAt[i + 1]!;
    receiveAt[i] = stage.receive ? (message, extra) => stage.receive!(message, extra, next) : next;
  }
  // sendAt[i]: a message leaving through stages i-1 … 0; sendAt[0] is the transport itself.
  const sendAt: Send[] = [(message, options) => transport.send(message, options)];
  for (let i = 0; i < stages.length; i++) {
    const stage = stages[i]!;
    const next = sendAt[i]!;
    sendAt[i + 1] = stage.send ? (message, options) => stage.send!(message, options, next) : next;
  }
  adapter = new PipelineTransport(transport, sendAt[stages.length]!);
  stages.forEach((stage, i) => stage.attach?.({ receive: receiveAt[i + 1]!, send: sendAt[i]! }));
  const consumer = adapter;
  transport.onmessage = receiveAt[0]!;
  transport.onclose = () => {
    for (const stage of stages) stage.closed?.();
    consumer.onclose?.();
  };
  transport.onerror = (error) => {
    for (const stage of stages) stage.error?.(error);
    consumer.onerror?.(error);
  };
  return adapter;
}

/** Builds the bridge's session behind the composed stages (the bridge's `serve`). */
export type ServeComposed = (
  transport: Transport,
  info: SessionInfo,
  stages: readonly SessionStage[],
) => Promise<ServedSession>;

/** Where every inbound session is built: admitted at the gate, then served by the bridge. */
export class SessionPipeline {
  readonly #gate: SessionGate;
  readonly #serve: ServeComposed;

  /** `serve` is looked up on each session (the bridge's `serve`), so it can be replaced. */
  constructor(gate: SessionGate, serve: ServeComposed) {
    this.#gate = gate;
    this.#serve = serve;
  }

  /**
   * Serves a session over `transport` for an authenticated caller, the transport plugin's own
   * `stages` first; throws `session_limit` when the gate is full (before any `Server` is built).
   */
  async serve(
    transport: Transport,
    info: SessionInfo,
    stages: readonly SessionStage[] = [],
  ): Promise<ServedSession> {
    const gate = this.#gate.admit(info, transport);
    try {
      return await this.#serve(transport, info, [...stages, gate]);
    } catch (error) {
      gate.release();
      throw error;
    }
  }
}
