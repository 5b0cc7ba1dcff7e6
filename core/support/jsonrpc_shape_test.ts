import assert from "node:assert/strict";
import { JSONRPCMessageSchema } from "@modelcontextprotocol/sdk/types.js";
import { isJsonRpcMessage } from "./jsonrpc_shape.ts";

const ACCEPTED: unknown[] = [
  { jsonrpc: "2.0", id: 1, method: "tools/call", params: { name: "x" } },
  { jsonrpc: "2.0", id: "a", method: "ping" },
  { jsonrpc: "2.0", method: "notifications/initialized" },
  { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 1 } },
  { jsonrpc: "2.0", id: 2, result: {} },
  { jsonrpc: "2.0", id: "b", result: { content: [] } },
  { jsonrpc: "2.0", id: 3, error: { code: -32601, message: "no" } },
  { jsonrpc: "2.0", id: 3, error: { code: -32601, message: "no", data: { x: 1 } } },
];

const REFUSED: unknown[] = [
  null,
  [],
  "x",
  {},
  { jsonrpc: "1.0", id: 1, method: "ping" },
  { jsonrpc: "2.0", id: 1, method: 5 },
  { jsonrpc: "2.0", id: 1.5, method: "ping" },
  { jsonrpc: "2.0", id: true, method: "ping" },
  { jsonrpc: "2.0", id: {}, method: "ping" },
  { jsonrpc: "2.0", id: 1, method: "ping", params: [1] },
  { jsonrpc: "2.0", id: 1, method: "ping", params: "x" },
  { jsonrpc: "2.0", id: 1 },
  { jsonrpc: "2.0", id: 1, result: 5 },
  { jsonrpc: "2.0", id: 1, result: [] },
  { jsonrpc: "2.0", result: {} },
  { jsonrpc: "2.0", id: 1, error: { code: "x", message: "m" } },
  { jsonrpc: "2.0", id: 1, error: { code: 1.5, message: "m" } },
  { jsonrpc: "2.0", id: 1, error: { code: 1 } },
];

Deno.test("isJsonRpcMessage accepts every MCP message shape", () => {
  for (const message of ACCEPTED) assert.ok(isJsonRpcMessage(message), JSON.stringify(message));
});

Deno.test("isJsonRpcMessage refuses what is not a JSON-RPC 2.0 message", () => {
  for (const value of REFUSED) assert.ok(!isJsonRpcMessage(value), JSON.stringify(value));
});

Deno.test("isJsonRpcMessage agrees with the SDK's JSONRPCMessageSchema on every case", () => {
  for (const value of [...ACCEPTED, ...REFUSED]) {
    assert.equal(
      isJsonRpcMessage(value),
      JSONRPCMessageSchema.safeParse(value).success,
      JSON.stringify(value),
    );
  }
});
