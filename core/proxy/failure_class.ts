/**
 * Failure classes: what an upstream call's outcome says about the upstream, so its circuit breaker
 * counts what a client would call a failure. A timeout, a crash or a JSON-RPC internal or server
 * error means the upstream (or its backend) is unwell; invalid params, an unknown method or a
 * missing resource mean the caller asked for something wrong, and say nothing about its health.
 * @module
 */
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";

/** Every class a fleet entry's `breaker.count` may list. */
export const FAILURE_CLASSES = [
  "timeout",
  "crash",
  "internal_error",
  "server_error",
  "tool_error",
] as const;

/** One class of failed upstream call. */
export type FailureClass = typeof FAILURE_CLASSES[number];

/** What the breaker counts when `breaker.count` is not set: everything but `tool_error`. */
export const DEFAULT_BREAKER_COUNT: readonly FailureClass[] = [
  "timeout",
  "crash",
  "internal_error",
  "server_error",
];

/** The JSON-RPC range reserved for implementation-defined server errors. */
const SERVER_ERROR_MIN = -32099;
const SERVER_ERROR_MAX = -32000;

/**
 * Codes in the server-error range that MCP gives to a caller's mistake or a request for user
 * action: resource not found (-32002) and URL elicitation required (-32042).
 */
const NOT_SERVER_FAULTS = new Set<number>([-32002, ErrorCode.UrlElicitationRequired]);

/**
 * The class of a call that failed with `error`, or undefined when the error is an answer about
 * the request (invalid params, unknown method, parse error, resource not found) or the gateway's
 * own refusal.
 */
export function failureClass(error: unknown): FailureClass | undefined {
  if (error instanceof McpError) {
    if (error.code === ErrorCode.RequestTimeout) return "timeout";
    // The SDK reports a closed connection as -32000 "Connection closed" without data; an upstream
    // answering -32000 itself is a server error.
    if (
      error.code === ErrorCode.ConnectionClosed && error.data === undefined &&
      error.message.endsWith("Connection closed")
    ) {
      return "crash";
    }
    if (error.code === ErrorCode.InternalError) return "internal_error";
    if (
      error.code >= SERVER_ERROR_MIN && error.code <= SERVER_ERROR_MAX &&
      !NOT_SERVER_FAULTS.has(error.code)
    ) {
      return "server_error";
    }
    return undefined;
  }
  if (error instanceof GatewayError) {
    if (error.code === "timeout") return "timeout";
    if (error.code === "upstream_error") return "crash";
    return undefined;
  }
  // Anything else was thrown by the transport under the call: the connection broke.
  return "crash";
}

/** Whether failures of class `failure` count against the breaker under `count`. */
export function counted(
  failure: FailureClass,
  count: readonly FailureClass[] = DEFAULT_BREAKER_COUNT,
): boolean {
  return count.includes(failure);
}

/** Whether a call that failed with `error` counts against the upstream's breaker. */
export function isUpstreamFault(
  error: unknown,
  count: readonly FailureClass[] = DEFAULT_BREAKER_COUNT,
): boolean {
  const failure = failureClass(error);
  return failure !== undefined && counted(failure, count);
}

/** Whether a call's result counts against the breaker: an `isError` tool result, if `tool_error` is counted. */
export function isFailedResult(
  result: unknown,
  count: readonly FailureClass[] = DEFAULT_BREAKER_COUNT,
): boolean {
  return counted("tool_error", count) && typeof result === "object" && result !== null &&
    (result as { isError?: unknown }).isError === true;
}
