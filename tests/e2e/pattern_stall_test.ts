/**
 * An upstream's schema pattern cannot stall the gateway: the gateway checks callers' arguments
 * against its tools' `inputSchema`, on its main thread, so a pattern with catastrophic
 * backtracking (`^(a+)+$`) and a caller's `aaaa…!` froze every session of every tenant. A real
 * gateway process, a real upstream process.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { spawnHttpChild } from "../support/child_gateway.ts";
import { faultServer, writeFleet } from "../support/fleet.ts";

/** `promise`, or a failure saying what did not answer within `ms`. */
async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} got no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, late]);
  } finally {
    clearTimeout(timer);
  }
}

Deno.test("A tool's pattern that backtracks catastrophically is checked in linear time: the hostile call is refused at once and every other call is answered", async () => {
  const fleet = await writeFleet(`proxy_servers:${faultServer("f")}`);
  const token = "pattern-stall-token";
  const gateway = await spawnHttpChild({
    MCP_SERVER_AUTH_TOKEN: token,
    MCP_PROXY_CONFIG_PATH: fleet.path,
  });
  const connect = async () => {
    const client = new Client({ name: "e2e", version: "1.0.0" });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${token}` } },
      }),
    );
    return client;
  };
  const attacker = await connect();
  const other = await connect();
  try {
    // V8 alone needs seconds for 26 a's and twice as long for each one more: hours for 48.
    const hostile = attacker.callTool({
      name: "f__match",
      arguments: { name: "a".repeat(48) + "!" },
    });
    const refused = await within(
      hostile.then(() => assert.fail("the call must be refused"), (e: McpError) => e),
      20_000,
      "the hostile call",
    );
    assert.equal((refused.data as { code?: string }).code, "invalid_arguments");
    assert.match(refused.message, /name must match pattern "\^\(a\+\)\+\$"/);
    const ok = await within(other.callTool({ name: "f__ok", arguments: {} }), 20_000, "f__ok");
    assert.deepEqual(ok.content, [{ type: "text", text: "ok" }]);
    const echoed = await within(
      attacker.callTool({ name: "f__match", arguments: { name: "aaa" } }),
      20_000,
      "a matching call",
    );
    assert.deepEqual(echoed.content, [{ type: "text", text: "aaa" }]);
  } finally {
    await attacker.close();
    await other.close();
    await gateway.close();
    await fleet.remove();
  }
});
