/**
 * Stable error codes and the one error type that carries them.
 *
 * Local errors carry a string `code` that callers and clients can match on; when an error crosses
 * the MCP wire it becomes a JSON-RPC error whose `data.code` is that same string.
 * @module
 */
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { redact, redactDeep } from "./redact.ts";

/** Every error code the gateway reports. Stable: clients match on these strings. */
export type GatewayErrorCode =
  | "config_invalid"
  | "plugin_invalid"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "unknown_tool"
  | "invalid_arguments"
  | "invalid_cursor"
  | "not_allowed"
  | "unknown_tenant"
  | "tool_denied"
  | "connector_denied"
  | "effect_not_allowed"
  | "policy_error"
  | "quarantined"
  | "approval_required"
  | "approval_invalid"
  | "approval_expired"
  | "approval_replayed"
  | "approval_mismatch"
  | "approval_pending"
  | "approval_denied"
  | "approval_not_pending"
  | "approval_queue_full"
  /** The requester of an approval tried to decide it. */
  | "self_approval"
  | "rate_limited"
  | "circuit_open"
  | "upstream_error"
  /** An upstream a registry chose points inside the gateway's own network (the egress guard). */
  | "egress_refused"
  | "timeout"
  | "shutting_down"
  | "session_limit"
  | "subscription_limit"
  /** A session sent a request past MCP_MAX_IN_FLIGHT_PER_SESSION unanswered ones. */
  | "too_many_requests"
  | "internal";

/** JSON-RPC error code for each gateway code (server-side failures are -32603, never -32700/-32602). */
const RPC_CODE: Record<GatewayErrorCode, number> = {
  config_invalid: ErrorCode.InternalError,
  plugin_invalid: ErrorCode.InternalError,
  unauthorized: ErrorCode.InvalidRequest,
  forbidden: ErrorCode.InvalidRequest,
  not_found: -32002,
  unknown_tool: ErrorCode.InvalidParams,
  invalid_arguments: ErrorCode.InvalidParams,
  invalid_cursor: ErrorCode.InvalidParams,
  not_allowed: ErrorCode.InvalidRequest,
  unknown_tenant: ErrorCode.InvalidRequest,
  tool_denied: ErrorCode.InvalidRequest,
  connector_denied: ErrorCode.InvalidRequest,
  effect_not_allowed: ErrorCode.InvalidRequest,
  policy_error: ErrorCode.InternalError,
  quarantined: ErrorCode.InvalidRequest,
  approval_required: ErrorCode.InvalidRequest,
  approval_invalid: ErrorCode.InvalidRequest,
  approval_expired: ErrorCode.InvalidRequest,
  approval_replayed: ErrorCode.InvalidRequest,
  approval_mismatch: ErrorCode.InvalidRequest,
  approval_pending: ErrorCode.InvalidRequest,
  approval_denied: ErrorCode.InvalidRequest,
  approval_not_pending: ErrorCode.InvalidRequest,
  approval_queue_full: ErrorCode.InvalidRequest,
  self_approval: ErrorCode.InvalidRequest,
  rate_limited: ErrorCode.InvalidRequest,
  circuit_open: ErrorCode.InternalError,
  upstream_error: ErrorCode.InternalError,
  egress_refused: ErrorCode.InternalError,
  timeout: ErrorCode.RequestTimeout,
  shutting_down: -32000,
  session_limit: -32000,
  subscription_limit: -32000,
  too_many_requests: -32000,
  internal: ErrorCode.InternalError,
};

/** An error a person can act on: a stable `code`, a message naming the thing and the fix. */
export class GatewayError extends Error {
  override readonly name = "GatewayError";
  /** The stable code. */
  readonly code: GatewayErrorCode;
  /** Structured details that travel with the error (never secrets). */
  readonly data: Record<string, unknown>;

  constructor(code: GatewayErrorCode, message: string, data: Record<string, unknown> = {}) {
    super(message);
    this.code = code;
    this.data = data;
  }

  /** The same error as the JSON-RPC error the SDK sends on the wire, redacted (core/support/redact.ts). */
  toMcpError(): McpError {
    const message = redact(this.message);
    return plainMessage(
      new McpError(RPC_CODE[this.code], message, redactDeep({ code: this.code, ...this.data })),
      message,
    );
  }
}

/**
 * Turns anything thrown into a wire error: gateway errors keep their code, others become -32603.
 * Messages and data are redacted: an upstream's own error, or a failure quoting a URL, may hold a
 * credential.
 */
export function toMcpError(error: unknown): McpError {
  if (error instanceof GatewayError) return error.toMcpError();
  if (error instanceof McpError) {
    const message = redact(error.message);
    const data = redactDeep(error.data);
    if (message === error.message && JSON.stringify(data) === JSON.stringify(error.data)) {
      return error; // nothing to hide: passed through unchanged
    }
    // The message already carries McpError's "MCP error <code>: " prefix; it is not doubled.
    return plainMessage(new McpError(error.code, message, data), message);
  }
  const message = redact(
    `Internal error: ${error instanceof Error ? error.message : String(error)}`,
  );
  return plainMessage(
    new McpError(ErrorCode.InternalError, message, { code: "internal" }),
    message,
  );
}

/**
 * McpError prefixes its message with "MCP error <code>: ", which then travels on the wire and
 * the receiving SDK prefixes it again; the wire message should be the plain sentence.
 */
function plainMessage(error: McpError, message: string): McpError {
  Object.defineProperty(error, "message", { value: message, enumerable: false });
  return error;
}

/** A plain `{ code, message, data }` for crossing a worker or process boundary. */
export interface SerializedError {
  code: GatewayErrorCode;
  message: string;
  data?: Record<string, unknown>;
}

/**
 * Serializes an error for postMessage or the bus, redacted; class instances never cross
 * boundaries.
 */
export function serializeError(error: unknown): SerializedError {
  if (error instanceof GatewayError) {
    return { code: error.code, message: redact(error.message), data: redactDeep(error.data) };
  }
  return {
    code: "internal",
    message: redact(error instanceof Error ? error.message : String(error)),
  };
}
