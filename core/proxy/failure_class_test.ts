import assert from "node:assert/strict";
import { ErrorCode, McpError } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";
import {
  counted,
  DEFAULT_BREAKER_COUNT,
  failureClass,
  isFailedResult,
  isUpstreamFault,
} from "./failure_class.ts";

const upstreamError = (code: number) => new McpError(code, "backend unavailable");

Deno.test("Timeouts are class timeout, whether the SDK's, the raw table's or the gateway's", () => {
  assert.equal(
    failureClass(new McpError(ErrorCode.RequestTimeout, "Request timed out", { timeout: 5 })),
    "timeout",
  );
  assert.equal(failureClass(new GatewayError("timeout", "no answer")), "timeout");
});

Deno.test("A closed connection and errors the transport throws are class crash", () => {
  assert.equal(
    failureClass(new McpError(ErrorCode.ConnectionClosed, "Connection closed")),
    "crash",
  );
  assert.equal(failureClass(new GatewayError("upstream_error", "exited")), "crash");
  assert.equal(failureClass(new Error("write EPIPE")), "crash");
});

Deno.test("-32603 is internal_error; the rest of -32000…-32099 is server_error", () => {
  assert.equal(failureClass(upstreamError(-32603)), "internal_error");
  // An upstream's own -32000 is its server error, not a closed connection.
  for (const code of [-32000, -32050, -32099]) {
    assert.equal(failureClass(upstreamError(code)), "server_error", String(code));
  }
});

Deno.test("Answers about the request are no failure of the upstream", () => {
  for (const code of [-32700, -32600, -32601, -32602, -32002, -32042, -31999, -32100, 1]) {
    assert.equal(failureClass(upstreamError(code)), undefined, String(code));
  }
  assert.equal(failureClass(new GatewayError("invalid_arguments", "bad")), undefined);
  assert.equal(failureClass(new GatewayError("circuit_open", "open")), undefined);
});

Deno.test("By default timeouts, crashes, internal and server errors count; tool errors do not", () => {
  assert.deepEqual([...DEFAULT_BREAKER_COUNT], [
    "timeout",
    "crash",
    "internal_error",
    "server_error",
  ]);
  assert.equal(isUpstreamFault(upstreamError(-32603)), true);
  assert.equal(isUpstreamFault(upstreamError(-32001)), true);
  assert.equal(isUpstreamFault(upstreamError(-32602)), false);
  assert.equal(isFailedResult({ content: [], isError: true }), false);
});

Deno.test("A breaker.count list decides which classes count", () => {
  assert.equal(isUpstreamFault(upstreamError(-32603), ["timeout", "crash"]), false);
  assert.equal(isUpstreamFault(upstreamError(-32050), ["server_error"]), true);
  assert.equal(isFailedResult({ content: [], isError: true }, ["tool_error"]), true);
  assert.equal(isFailedResult({ content: [] }, ["tool_error"]), false);
  assert.equal(isFailedResult({ isError: "yes" }, ["tool_error"]), false);
  assert.equal(counted("crash", []), false);
  assert.equal(counted("crash"), true);
});
