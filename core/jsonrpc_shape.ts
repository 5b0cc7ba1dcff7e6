/**
 * The JSON-RPC 2.0 message shapes MCP allows, checked structurally: a request (string `method`,
 * string or integer `id`), a notification (`method`, no `id`), a result (`id` and an object
 * `result`) or an error (`id` and `{ code: integer, message: string }`); `params` is an object
 * when present. It accepts what the SDK's `JSONRPCMessageSchema` accepts, without building a zod
 * parse per frame on the hot path.
 * @module
 */
import type { JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";

/** Whether `value` is a JSON-RPC 2.0 message in one of MCP's shapes. */
export function isJsonRpcMessage(value: unknown): value is JSONRPCMessage {
  if (!isObject(value) || value.jsonrpc !== "2.0") return false;
  const { id, method } = value;
  if (method !== undefined) {
    if (typeof method !== "string") return false;
    if (value.params !== undefined && !isObject(value.params)) return false;
    return id === undefined || isId(id);
  }
  if (!isId(id)) return false;
  if ("result" in value) return isObject(value.result);
  const error = value.error;
  return isObject(error) && Number.isInteger(error.code) && typeof error.message === "string";
}

function isId(id: unknown): boolean {
  return typeof id === "string" || Number.isInteger(id);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
