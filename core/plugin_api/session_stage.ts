/**
 * A stage of a session's pipeline: the shape in which a transport plugin, the session gate and the
 * tool-call lane each see a session's messages, composed once when the session is built
 * (core/mcp/session_pipeline.ts), instead of each reassigning the transport's `send`, `onmessage`
 * and `onclose` slots.
 * @module
 */
import type {
  Transport,
  TransportSendOptions,
} from "@modelcontextprotocol/sdk/shared/transport.js";
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** What a transport hands along with an inbound message (auth, request info, stream controls). */
export type MessageExtra = Parameters<NonNullable<Transport["onmessage"]>>[1];

/** Passes an inbound message on, toward the SDK `Server`. */
export type Receive = (message: JSONRPCMessage, extra?: MessageExtra) => void;

/** Passes an outbound message on, toward the transport. */
export type Send = (message: JSONRPCMessage, options?: TransportSendOptions) => Promise<void>;

/** The pipeline just past one stage, in both directions. */
export interface StageLink {
  /** Delivers an inbound message to the stages after this one (and the `Server` behind them). */
  receive: Receive;
  /** Sends an outbound message through the stages before this one (and the transport). */
  send: Send;
}

/**
 * One stage between a session's transport (first) and its SDK `Server` (last). Every hook is
 * optional; a stage without one passes that traffic on untouched.
 */
export interface SessionStage {
  /** Called once, when the pipeline is composed: how this stage originates messages. */
  attach?(link: StageLink): void;
  /** An inbound message: call `next` to pass it on, or answer it through the link instead. */
  receive?(message: JSONRPCMessage, extra: MessageExtra | undefined, next: Receive): void;
  /** An outbound message: return `next(message, options)` to pass it on, or take it here. */
  send?(
    message: JSONRPCMessage,
    options: TransportSendOptions | undefined,
    next: Send,
  ): Promise<void>;
  /** The transport closed; stages hear it transport side first, the `Server` last. */
  closed?(): void;
  /** The transport reported an error (a bad frame); the `Server` hears it after the stages. */
  error?(error: Error): void;
}
