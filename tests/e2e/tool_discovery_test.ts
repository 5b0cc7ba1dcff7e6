/**
 * Progressive tool discovery (search mode) with real upstreams from npm: a short first list,
 * search that respects policy, activation with list_changed, independent sessions.
 */
import assert from "node:assert/strict";
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { EVERYTHING, memoryServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

const POLICY = `
tenants:
  "*":
    discovery: search
    deny: ["everything__get-env"]
    effects: { "memory__delete_*": destructive }
`;

/** Natural queries and the tool each should find in the top 3. */
const QUERIES: [string, string][] = [
  ["echo a message back to me", "everything__echo"],
  ["add two numbers together", "everything__get-sum"],
  ["get a small image", "everything__get-tiny-image"],
  ["compress a file with gzip", "everything__gzip-file-as-resource"],
  ["run a long operation that reports progress", "everything__trigger-long-running-operation"],
  ["return structured content with an output schema", "everything__get-structured-content"],
  ["message with annotations", "everything__get-annotated-message"],
  ["create new entities in the knowledge graph", "memory__create_entities"],
  ["delete relations between entities", "memory__delete_relations"],
  ["search the graph for nodes", "memory__search_nodes"],
  ["read the whole knowledge graph", "memory__read_graph"],
  ["add observations to an entity", "memory__add_observations"],
  ["open specific nodes by name", "memory__open_nodes"],
  ["link two entities with a relation", "memory__create_relations"],
];

async function withSearchGateway(fn: (gateway: TestGateway) => Promise<void>): Promise<void> {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  const policyDir = await Deno.makeTempDir({ prefix: "agent33-policy-" });
  await Deno.writeTextFile(`${policyDir}/policy.yaml`, POLICY);
  const fleet = await writeFleet(`
proxy_servers:
  - id: everything
    command: ["deno", "run", "${EVERYTHING}", "stdio"]
    sandbox: deno
    permissions:
      env: [GZIP_MAX_FETCH_SIZE, GZIP_MAX_FETCH_TIME_MILLIS, GZIP_ALLOWED_DOMAINS]
${memoryServer(dataDir)}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(policyDir, { recursive: true });
    await Deno.remove(dataDir, { recursive: true });
  }
}

async function search(client: Client, query: string, k = 3) {
  const result = await client.callTool({ name: "tool_search", arguments: { query, k } });
  return (result.structuredContent as {
    results: { name: string; server?: string; description: string; effect: string }[];
  }).results;
}

Deno.test("In search mode the first tools/list is short: the native tools and the meta-tools", async () => {
  await withSearchGateway(async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const names = (await client.listTools()).tools.map((t) => t.name);
      assert.deepEqual(names, ["system_status", "tool_search", "tool_activate", "tool_deactivate"]);
      const legacyCount = gateway.kernel.proxy.aggregated.tools().length;
      assert.ok(legacyCount > 20, `the fleet has ${legacyCount} tools, none listed yet`);
    } finally {
      await client.close();
    }
  });
});

Deno.test("tool_search finds the right tool in the top 3 for natural queries", async () => {
  await withSearchGateway(async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const misses: string[] = [];
      for (const [query, expected] of QUERIES) {
        const names = (await search(client, query)).map((r) => r.name);
        if (!names.includes(expected)) {
          misses.push(`"${query}" → ${names.join(", ")} (wanted ${expected})`);
        }
      }
      const hitRate = (QUERIES.length - misses.length) / QUERIES.length;
      // Recorded in docs/governance.md; a drop below it is a regression.
      assert.ok(
        hitRate >= 0.9,
        `top-3 hit rate ${hitRate.toFixed(2)}; misses:\n${misses.join("\n")}`,
      );
      const [first] = await search(client, "echo a message back to me", 1);
      assert.deepEqual(
        { server: first?.server, effect: first?.effect },
        // echo's readOnlyHint is server-everything's own claim: no trusted_annotations here.
        { server: "everything", effect: "write" },
      );
      assert.ok(first!.description.length > 0 && !first!.description.includes("\n"));
    } finally {
      await client.close();
    }
  });
});

Deno.test("tool_search never returns a tool the tenant may not call", async () => {
  await withSearchGateway(async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      const results = await search(client, "print all environment variables env", 20);
      assert.ok(!results.some((r) => r.name === "everything__get-env"));
      await assert.rejects(
        client.callTool({ name: "tool_activate", arguments: { names: ["everything__get-env"] } }),
        /Cannot activate "everything__get-env"/,
      );
    } finally {
      await client.close();
    }
  });
});

Deno.test("tool_activate adds the tool with list_changed, the call succeeds, and sessions stay independent", async () => {
  await withSearchGateway(async (gateway) => {
    const alice = await connectHttp(gateway);
    const bob = await connectHttp(gateway);
    try {
      const changed = Promise.withResolvers<void>();
      alice.setNotificationHandler(ToolListChangedNotificationSchema, () => changed.resolve());
      await alice.ping();
      await alice.callTool({ name: "tool_activate", arguments: { names: ["everything__echo"] } });
      await changed.promise;
      const aliceTools = (await alice.listTools()).tools.map((t) => t.name);
      assert.ok(aliceTools.includes("everything__echo"));
      const echo = await alice.callTool({
        name: "everything__echo",
        arguments: { message: "found" },
      });
      assert.deepEqual(echo.content, [{ type: "text", text: "Echo: found" }]);

      const bobTools = (await bob.listTools()).tools.map((t) => t.name);
      assert.ok(
        !bobTools.includes("everything__echo"),
        "another session's activations are its own",
      );
      // A client that remembers a name may call it without activating it.
      const direct = await bob.callTool({
        name: "everything__echo",
        arguments: { message: "known" },
      });
      assert.deepEqual(direct.content, [{ type: "text", text: "Echo: known" }]);

      await alice.callTool({ name: "tool_deactivate", arguments: { names: ["everything__echo"] } });
      assert.ok(!(await alice.listTools()).tools.some((t) => t.name === "everything__echo"));
    } finally {
      await alice.close();
      await bob.close();
    }
  });
});
