/**
 * agent_invoke end to end: the inbound client's own model drives an agent through sampling, and a
 * destructive step pauses the run until an approval token resumes it.
 */
import assert from "node:assert/strict";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateMessageRequestSchema, type McpError } from "@modelcontextprotocol/sdk/types.js";
import { SignJWT } from "jose";
import { APPROVAL_TOKEN_META_KEY } from "../../core/governance/tool_governance.ts";
import { memoryServer, writeFleet } from "../support/fleet.ts";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";

interface Run {
  status: string;
  text: string;
  run?: string;
  calls: { tool: string; status: string }[];
  approval?: { tool: string; request: { id: string } };
}

async function withAgents(
  agents: Record<string, string>,
  extraEnv: Record<string, string>,
  fn: (gateway: TestGateway, defs: string) => Promise<void>,
): Promise<void> {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  const defs = await Deno.makeTempDir({ prefix: "agent33-agents-" });
  await Deno.mkdir(`${defs}/agents`);
  for (const [id, yaml] of Object.entries(agents)) {
    await Deno.writeTextFile(`${defs}/agents/${id}.yaml`, yaml);
  }
  await Deno.writeTextFile(
    `${defs}/policy.yaml`,
    'tenants:\n  "*":\n    effects: { "memory__delete_*": destructive }\n    approval: [destructive]\n',
  );
  const fleet = await writeFleet(`proxy_servers:${memoryServer(dataDir)}`);
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: `${defs}/policy.yaml`,
    MCP_AGENTS_PATH: `${defs}/agents`,
    MCP_APPROVAL_IN_BAND: "false",
    ...extraEnv,
  });
  try {
    await gateway.kernel.fleetStarted;
    await fn(gateway, defs);
  } finally {
    await gateway.stop();
    await fleet.remove();
    await Deno.remove(dataDir, { recursive: true });
    await Deno.remove(defs, { recursive: true });
  }
}

Deno.test("agent_invoke with the sampling provider: the client's own model calls a proxied tool", async () => {
  const agent = "id: sampler\nname: Sampler\ndescription: Uses the client's model\n" +
    'system: You keep notes.\nmodel: sampling\ntools: ["memory__*"]\nmax_steps: 4\n';
  await withAgents({ sampler: agent }, {}, async (gateway) => {
    const client = new Client({ name: "sampling-client", version: "1" }, {
      capabilities: { sampling: { tools: {} } },
    });
    const asked: unknown[] = [];
    client.setRequestHandler(CreateMessageRequestSchema, (request) => {
      asked.push(request.params);
      // Turn one: ask for a tool; turn two (after the tool result): answer.
      return (asked.length === 1
        ? {
          role: "assistant",
          model: "client-model",
          stopReason: "toolUse",
          content: [{
            type: "tool_use",
            id: "call-1",
            name: "memory__create_entities",
            input: { entities: [{ name: "Lin", entityType: "person", observations: ["sampled"] }] },
          }],
        }
        : {
          role: "assistant",
          model: "client-model",
          stopReason: "endTurn",
          content: { type: "text", text: "Lin is remembered." },
        }) as never;
    });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
        requestInit: { headers: { Authorization: `Bearer ${gateway.token}` } },
      }),
    );
    try {
      const result = await client.callTool({
        name: "agent_invoke",
        arguments: { agent: "sampler", prompt: "Remember Lin" },
      });
      const run = result.structuredContent as unknown as Run;
      assert.equal(run.status, "completed", JSON.stringify(run));
      assert.equal(run.text, "Lin is remembered.");
      assert.deepEqual(run.calls, [{ tool: "memory__create_entities", status: "ok" }]);
      assert.equal(asked.length, 2);
      assert.match(
        JSON.stringify(asked[0]),
        /memory__create_entities/,
        "the tools were offered to the model",
      );
      const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
      assert.match(JSON.stringify(graph.content), /sampled/);
    } finally {
      await client.close();
    }
  });
});

Deno.test("agent_invoke pauses at a destructive step and resumes with the approval token", async () => {
  const agent =
    "id: cleaner\nname: Cleaner\ndescription: Deletes notes\nsystem: You delete notes.\n" +
    'model: scripted\ntools: ["memory__*"]\nmax_steps: 4\n';
  const script = [
    "- tool_calls:",
    "    - name: memory__create_entities",
    "      arguments: { entities: [{ name: Old, entityType: note, observations: [stale] }] }",
    "- tool_calls: [{ name: memory__delete_entities, arguments: { entityNames: [Old] } }]",
    "- text: The old note is gone.",
    "",
  ].join("\n");
  const scriptFile = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(scriptFile, script);
  try {
    await withAgents(
      { cleaner: agent },
      { MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT: scriptFile },
      async (gateway) => {
        const client = await connectHttp(gateway);
        try {
          const first = await client.callTool({
            name: "agent_invoke",
            arguments: { agent: "cleaner", prompt: "Clean up" },
          });
          const paused = first.structuredContent as unknown as Run;
          assert.equal(paused.status, "approval_required", JSON.stringify(paused));
          assert.equal(paused.approval?.tool, "memory__delete_entities");
          const id = paused.approval!.request.id;

          const approved = await fetch(`${gateway.url}/v1/approvals/${id}/approve`, {
            method: "POST",
            headers: { Authorization: `Bearer ${gateway.adminToken}` },
          });
          const { token } = await approved.json();

          const resumed = await client.callTool({
            name: "agent_invoke",
            arguments: { agent: "cleaner" },
            _meta: { [APPROVAL_TOKEN_META_KEY]: token },
          });
          const done = resumed.structuredContent as unknown as Run;
          assert.equal(done.status, "completed", JSON.stringify(done));
          assert.equal(done.text, "The old note is gone.");
          assert.ok(
            done.calls.some((c) => c.tool === "memory__delete_entities" && c.status === "ok"),
          );
          const graph = await client.callTool({ name: "memory__read_graph", arguments: {} });
          assert.doesNotMatch(JSON.stringify(graph.content), /stale/);
        } finally {
          await client.close();
        }
      },
    );
  } finally {
    await Deno.remove(scriptFile);
  }
});

Deno.test("a JWT whose sub names the static token cannot resume the static token's paused run", async () => {
  const secret = "a-secret-of-at-least-thirty-two-bytes!!";
  const agent =
    "id: cleaner\nname: Cleaner\ndescription: Deletes notes\nsystem: You delete notes.\n" +
    'model: scripted\ntools: ["memory__*"]\nmax_steps: 4\n';
  const script = [
    "- tool_calls: [{ name: memory__delete_entities, arguments: { entityNames: [Old] } }]",
    "- text: Done.",
    "",
  ].join("\n");
  const scriptFile = await Deno.makeTempFile({ suffix: ".yaml" });
  await Deno.writeTextFile(scriptFile, script);
  try {
    await withAgents(
      { cleaner: agent },
      { MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT: scriptFile, MCP_AUTH_JWT_SECRET: secret },
      async (gateway) => {
        const client = await connectHttp(gateway); // the static token: identity static-token
        const impostorToken = await new SignJWT({
          tenant: "default",
          sub: "static-token",
          scope: "mcp",
        })
          .setProtectedHeader({ alg: "HS256" })
          .setExpirationTime("5m")
          .sign(new TextEncoder().encode(secret));
        const impostor = new Client({ name: "impostor", version: "1" });
        await impostor.connect(
          new StreamableHTTPClientTransport(new URL(`${gateway.url}/mcp`), {
            requestInit: { headers: { Authorization: `Bearer ${impostorToken}` } },
          }),
        );
        try {
          const first = await client.callTool({
            name: "agent_invoke",
            arguments: { agent: "cleaner", prompt: "Clean up" },
          });
          const paused = first.structuredContent as unknown as Run;
          assert.equal(paused.status, "approval_required", JSON.stringify(paused));

          const taken = await impostor.callTool({
            name: "agent_invoke",
            arguments: { agent: "cleaner", ...(paused.run ? { run: paused.run } : {}) },
            _meta: { [APPROVAL_TOKEN_META_KEY]: "not-the-token" },
          }).then((r) => JSON.stringify(r), (e: McpError) => e.message);
          assert.match(taken, /No paused run/, "another caller, though it bears the same name");

          const approved = await fetch(
            `${gateway.url}/v1/approvals/${paused.approval!.request.id}/approve`,
            { method: "POST", headers: { Authorization: `Bearer ${gateway.adminToken}` } },
          );
          const { token } = await approved.json();
          const resumed = await client.callTool({
            name: "agent_invoke",
            arguments: { agent: "cleaner" },
            _meta: { [APPROVAL_TOKEN_META_KEY]: token },
          });
          const done = resumed.structuredContent as unknown as Run;
          assert.equal(done.status, "completed", "the run is still its starter's to resume");
        } finally {
          await impostor.close();
          await client.close();
        }
      },
    );
  } finally {
    await Deno.remove(scriptFile);
  }
});
