/**
 * A rate limit bounds every call it covers, attacked over real HTTP with a real upstream
 * (server-memory from npm): calls whose arguments fail the tool's schema count against the limit
 * like any other, and one over the limit is refused before its arguments are hashed or validated.
 * Before, an invalid call took no token, so a caller could send them without end, each costing
 * the gateway its validation (up to MCP_MAX_SCHEMA_WORK, ~0.1 s) and a hash of its arguments.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import { memoryServer } from "../support/fleet.ts";
import { policyJwt, withPolicyGateway } from "../support/policy_gateway.ts";

const POLICY = `
tenants:
  acme:
    rate_limits:
      "memory__create_entities": { per_minute: 3 }
connectors:
  memory:
    tenants: [acme]
    effects: [read, write]
`;

/** The denial code of a call that must be refused. */
async function refusal(client: Client, args: Record<string, unknown>): Promise<string> {
  const error = await client.callTool({ name: "memory__create_entities", arguments: args })
    .then(() => assert.fail("the call must be refused"), (e: McpError) => e);
  return (error.data as { code: string }).code;
}

Deno.test("a rate limit counts calls with invalid arguments and refuses the next before reading it", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  try {
    await withPolicyGateway(`proxy_servers:${memoryServer(dataDir)}`, POLICY, async (gateway) => {
      const client = new Client({ name: "flooder", version: "1" });
      const token = await policyJwt("acme", "acme-agent", "mcp");
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
          requestInit: { headers: { Authorization: `Bearer ${token}` } },
        }),
      );
      try {
        // 20,000 entities of the wrong shape: each one a schema error to find.
        const invalid = { entities: Array.from({ length: 20_000 }, (_, i) => ({ name: i })) };
        const codes: string[] = [];
        for (let i = 0; i < 5; i++) codes.push(await refusal(client, invalid));
        assert.deepEqual(codes, [
          "invalid_arguments",
          "invalid_arguments",
          "invalid_arguments",
          "rate_limited",
          "rate_limited",
        ]);
      } finally {
        await client.close();
      }
    });
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});
