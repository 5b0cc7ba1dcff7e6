/**
 * A rate limit bounds every call it covers, attacked over real HTTP with real upstreams
 * (server-memory and server-everything from npm): calls whose arguments fail the tool's schema
 * count against the limit like any other, and one over the limit is refused before its arguments
 * are hashed or validated. Before, an invalid call took no token, so a caller could send them
 * without end, each costing the gateway its validation (up to MCP_MAX_SCHEMA_WORK, ~0.1 s) and a
 * hash of its arguments. Resource reads and prompt gets had no limit at all: each one an upstream
 * round trip a tenant could repeat without end, over ever new URIs.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { McpError } from "@modelcontextprotocol/sdk/types.js";
import type { GatewayEvent } from "../../core/bus/events.ts";
import { everythingServer, memoryServer } from "../support/fleet.ts";
import type { TestGateway } from "../support/gateway.ts";
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

/** An SDK client of `tenant` connected to the gateway over Streamable HTTP. */
async function flooder(gateway: TestGateway, tenant: string): Promise<Client> {
  const client = new Client({ name: "flooder", version: "1" });
  const token = await policyJwt(tenant, `${tenant}-agent`, "mcp");
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
      requestInit: { headers: { Authorization: `Bearer ${token}` } },
    }),
  );
  return client;
}

/** The denial (code and data) of a request that must be refused. */
async function refused(request: Promise<unknown>): Promise<Record<string, unknown>> {
  const error = await request.then(() => assert.fail("the request must be refused"), (e) => e);
  return (error as McpError).data as Record<string, unknown>;
}

Deno.test("a rate limit counts calls with invalid arguments and refuses the next before reading it", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  try {
    await withPolicyGateway(`proxy_servers:${memoryServer(dataDir)}`, POLICY, async (gateway) => {
      const client = await flooder(gateway, "acme");
      try {
        // 20,000 entities of the wrong shape: each one a schema error to find.
        const invalid = { entities: Array.from({ length: 20_000 }, (_, i) => ({ name: i })) };
        const codes: string[] = [];
        for (let i = 0; i < 5; i++) {
          const call = client.callTool({ name: "memory__create_entities", arguments: invalid });
          codes.push((await refused(call)).code as string);
        }
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

const ITEM_POLICY = `
tenants:
  "*":
    resources:
      rate_limits: { "proxy://everything/*": { per_minute: 3 } }
    prompts:
      rate_limits: { "everything__*": { per_minute: 2 } }
`;

Deno.test("resources: and prompts: rate limits bound reads and gets per tenant, over any URI", async () => {
  await withPolicyGateway(`proxy_servers:${everythingServer()}`, ITEM_POLICY, async (gateway) => {
    const decisions: GatewayEvent[] = [];
    gateway.kernel.bus.subscribe((e) =>
      void (e.type === "governance.decision" && decisions.push(e))
    );
    const acme = await flooder(gateway, "acme");
    const globex = await flooder(gateway, "globex");
    try {
      const uris = (await acme.listResources()).resources.map((r) => r.uri)
        .filter((uri) => uri.startsWith("proxy://everything/")).slice(0, 5);
      assert.equal(uris.length, 5, "server-everything lists its static resources");
      // Listing takes no token: three distinct reads pass, the fourth URI finds the bucket empty.
      for (const uri of uris.slice(0, 3)) {
        assert.ok((await acme.readResource({ uri })).contents.length > 0);
      }
      const over = await refused(acme.readResource({ uri: uris[3]! }));
      assert.equal(over.code, "rate_limited");
      assert.ok((over.retryAfterMs as number) > 0);
      assert.match(String(over.rule), /policy\.yaml:5 resources rate_limit proxy:\/\/everything/);
      assert.equal((await refused(acme.subscribeResource({ uri: uris[4]! }))).code, "rate_limited");
      assert.ok(
        decisions.some((e) =>
          e.type === "governance.decision" && e.surface === "resources/read" &&
          e.tenant === "acme" && e.code === "rate_limited"
        ),
        "the refused read is in the audit",
      );
      // Each tenant has its own bucket.
      assert.ok((await globex.readResource({ uri: uris[3]! })).contents.length > 0);

      const prompt = (await acme.listPrompts()).prompts.find((p) =>
        p.name.startsWith("everything__")
      )!;
      const args = Object.fromEntries((prompt.arguments ?? []).map((a) => [a.name, "x"]));
      await acme.getPrompt({ name: prompt.name, arguments: args });
      await acme.getPrompt({ name: prompt.name, arguments: args });
      const get = await refused(acme.getPrompt({ name: prompt.name, arguments: args }));
      assert.equal(get.code, "rate_limited");
    } finally {
      await acme.close();
      await globex.close();
    }
  });
});
