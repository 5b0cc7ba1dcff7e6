import assert from "node:assert/strict";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError, type GatewayErrorCode, serializeError, toMcpError } from "./errors.ts";

Deno.test("GatewayError is an Error carrying its code, message and data", () => {
  const error = new GatewayError("not_found", 'No server "db"', { server: "db" });
  assert.ok(error instanceof Error);
  assert.equal(error.name, "GatewayError");
  assert.equal(error.code, "not_found");
  assert.equal(error.message, 'No server "db"');
  assert.deepEqual(error.data, { server: "db" });
  assert.deepEqual(new GatewayError("internal", "x").data, {});
});

Deno.test("GatewayError.toMcpError keeps the message and puts the code in data beside the details", () => {
  const wire = new GatewayError("invalid_arguments", 'Bad arguments for "add"', { tool: "add" })
    .toMcpError();
  assert.ok(wire instanceof McpError);
  assert.match(wire.message, /Bad arguments for "add"/);
  assert.deepEqual(wire.data, { code: "invalid_arguments", tool: "add" });
});

Deno.test("GatewayError.toMcpError maps each code to its JSON-RPC error number", () => {
  const expected: [GatewayErrorCode, number][] = [
    ["invalid_arguments", -32602],
    ["unknown_tool", -32602],
    ["invalid_cursor", -32602],
    ["internal", -32603],
    ["config_invalid", -32603],
    ["upstream_error", -32603],
    ["not_found", -32002],
    ["unauthorized", -32600],
    ["timeout", ErrorCode.RequestTimeout],
  ];
  for (const [code, number] of expected) {
    assert.equal(new GatewayError(code, "m").toMcpError().code, number, code);
  }
});

Deno.test("toMcpError turns a GatewayError into its wire error", () => {
  const wire = toMcpError(new GatewayError("not_found", "gone", { id: 1 }));
  assert.equal(wire.code, -32002);
  assert.deepEqual(wire.data, { code: "not_found", id: 1 });
});

Deno.test("toMcpError turns a plain Error into -32603 with data.code internal", () => {
  const wire = toMcpError(new RangeError("index out of range"));
  assert.equal(wire.code, ErrorCode.InternalError);
  assert.equal(wire.code, -32603);
  assert.match(wire.message, /Internal error: index out of range/);
  assert.deepEqual(wire.data, { code: "internal" });
});

Deno.test("toMcpError turns a thrown non-Error into -32603 with its text", () => {
  const wire = toMcpError("boom");
  assert.equal(wire.code, -32603);
  assert.match(wire.message, /boom/);
  assert.deepEqual(wire.data, { code: "internal" });
});

Deno.test("toMcpError passes an McpError through unchanged", () => {
  const original = new McpError(ErrorCode.MethodNotFound, "no such method");
  assert.equal(toMcpError(original), original);
});

Deno.test("serializeError gives a plain object for a GatewayError", () => {
  const serialized = serializeError(new GatewayError("forbidden", "no", { scope: "admin" }));
  assert.equal(Object.getPrototypeOf(serialized), Object.prototype);
  assert.deepEqual(serialized, { code: "forbidden", message: "no", data: { scope: "admin" } });
  assert.deepEqual(structuredClone(serialized), serialized);
});

Deno.test("serializeError gives code internal for anything else", () => {
  const fromError = serializeError(new TypeError("bad"));
  assert.equal(Object.getPrototypeOf(fromError), Object.prototype);
  assert.deepEqual(fromError, { code: "internal", message: "bad" });
  assert.deepEqual(serializeError(42), { code: "internal", message: "42" });
});
