/**
 * The JSON-RPC 2.0 message shapes MCP allows, checked structurally: a request (string `method`,
 * string or integer `id`), a notification (`method`, no `id`), a result (`id` and an object
 * `result`) or an error (`{ code: integer, message: string }`, with or without an `id`); `params`
 * is an object when present, a `_meta` in it (or in a result) is an object with a well-formed
 * progress token and related task, and no other top-level members are allowed. It accepts what the
 * SDK's `JSONRPCMessageSchema` accepts, without building a zod parse per frame on the hot path. A
 * frame let through here that the schema refuses would reach the SDK's `Protocol`, which drops it
 * without an answer (a stdio client would wait for one until it timed out).
 * @module
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

const REQUEST = new Set(["jsonrpc", "id", "method", "params"]);
const NOTIFICATION = new Set(["jsonrpc", "method", "params"]);
const RESULT = new Set(["jsonrpc", "id", "result"]);
const ERROR = new Set(["jsonrpc", "id", "error"]);
const RELATED_TASK = "io.modelcontextprotocol/related-task";

/** Whether `value` is a JSON-RPC 2.0 message in one of MCP's shapes. */
export function isJsonRpcMessage(value: unknown): value is JSONRPCMessage {
  if (!isObject(value) || value.jsonrpc !== "2.0") return false;
  const { id, method } = value;
  if (method !== undefined) {
    if (typeof method !== "string") return false;
    const params = value.params;
    if (params !== undefined && !(isObject(params) && isMeta(params._meta))) return false;
    if (id === undefined) return hasOnly(value, NOTIFICATION);
    return isRequestId(id) && hasOnly(value, REQUEST);
  }
  if ("result" in value) {
    return isRequestId(id) && isObject(value.result) && isMeta(value.result._meta) &&
      hasOnly(value, RESULT);
  }
  if (id !== undefined && !isRequestId(id)) return false; // an error may lack an id, as in the SDK
  const error = value.error;
  return isObject(error) && Number.isSafeInteger(error.code) &&
    typeof error.message === "string" && hasOnly(value, ERROR);
}

/** A string or an integer (the SDK's ids and progress tokens). */
export function isRequestId(id: unknown): id is string | number {
  return typeof id === "string" || Number.isSafeInteger(id);
}

/** `_meta` as the SDK's schema takes it: absent, or an object with a valid token and task. */
export function isMeta(meta: unknown): boolean {
  if (meta === undefined) return true;
  if (!isObject(meta)) return false;
  if (meta.progressToken !== undefined && !isRequestId(meta.progressToken)) return false;
  const task = meta[RELATED_TASK];
  return task === undefined || (isObject(task) && typeof task.taskId === "string");
}

function hasOnly(value: Record<string, unknown>, members: Set<string>): boolean {
  for (const key in value) if (!members.has(key)) return false;
  return true;
}

/** A JSON object: not null, not an array. */
export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/**
 * The answer of an MCP endpoint to a request refused before it was read as one (too large, the
 * wrong type, no such session): a JSON-RPC error with `id` null, `-32600` and the gateway's
 * stable code in `data.code`, with the HTTP status that says why.
 */
export function jsonRpcRefusal(
  status: number,
  code: string,
  message: string,
  headers?: HeadersInit,
): Response {
  return Response.json(
    { jsonrpc: "2.0", id: null, error: { code: -32600, message, data: { code } } },
    { status, ...(headers === undefined ? {} : { headers }) },
  );
}
