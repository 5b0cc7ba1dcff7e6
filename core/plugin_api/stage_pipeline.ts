/**
 * Stages composed over a transport, once: the one way anything sits between a transport and the
 * SDK object that consumes it. An inbound session's stages (transport side first: the transport
 * plugin's own, the session gate, the tool-call lane) stand before its SDK `Server`; an upstream
 * connection's (send tracking, the raw request table) before its SDK `Client`. {@link compose}
 * sets the transport's `onmessage`, `onclose` and `onerror` once and hands the consumer a
 * {@link Transport} of its own whose `send` runs the outbound chain; nothing reassigns a slot
 * after that.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { MessageExtra, Receive, Send, SessionStage } from "./session_stage.ts";

/** The transport the consumer (an SDK `Server` or `Client`) connects to: the far end of the stages. */
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
 * consumer (an SDK `Server` or `Client`) connects to. Takes over `transport`'s `onmessage`, `onclose` and
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
