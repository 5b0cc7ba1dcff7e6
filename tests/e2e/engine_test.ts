/**
 * The engine through the gateway: definitions from temp dirs, server-memory as a real upstream.
 */
import assert from "node:assert/strict";
import { connectHttp, startGateway, type TestGateway } from "../support/gateway.ts";
import { memoryServer, writeFleet } from "../support/fleet.ts";

const ROOT = new URL("../../", import.meta.url).pathname;

async function withEngineGateway(
  fn: (gateway: TestGateway, dirs: { skills: string }) => Promise<void>,
) {
  const dataDir = await Deno.makeTempDir({ prefix: "agent33-mem-" });
  const defs = await Deno.makeTempDir({ prefix: "agent33-engine-" });
  const fleet = await writeFleet(`proxy_servers:${memoryServer(dataDir)}`);
  for (const d of ["agents", "skills/summarize", "workflows", "knowledge"]) {
    await Deno.mkdir(`${defs}/${d}`, { recursive: true });
  }
  await Deno.copyFile(`${ROOT}workflows/remember.yaml`, `${defs}/workflows/remember.yaml`);
  await Deno.copyFile(`${ROOT}skills/summarize/SKILL.md`, `${defs}/skills/summarize/SKILL.md`);
  await Deno.copyFile(`${ROOT}knowledge/gateway.md`, `${defs}/knowledge/gateway.md`);
  await Deno.copyFile(`${ROOT}knowledge/engine.md`, `${defs}/knowledge/engine.md`);
  await Deno.writeTextFile(
    `${defs}/agents/notes.yaml`,
    "id: notes\nname: Notes\ndescription: Keeps notes\nsystem: You keep notes.\nmodel: scripted\n" +
      'tools: ["memory__*"]\nmax_steps: 4\n',
  );
  await Deno.writeTextFile(
    `${defs}/script.yaml`,
    [
      "- tool_calls:",
      "    - name: memory__create_entities",
      "      arguments: { entities: [{ name: Ada, entityType: person, observations: [wrote notes] }] }",
      "    - name: system_status",
      "- tool_calls: [{ name: memory__read_graph }]",
      "- text: Ada is in the graph.",
      "",
    ].join("\n"),
  );
  const policyDir = await Deno.makeTempDir({ prefix: "agent33-policy-" });
  await Deno.writeTextFile(`${policyDir}/p.yaml`, 'tenants:\n  "*": {}\n');
  const gateway = await startGateway({
    MCP_PROXY_CONFIG_PATH: fleet.path,
    MCP_POLICY_PATH: policyDir,
    MCP_AGENTS_PATH: `${defs}/agents`,
    MCP_SKILLS_PATH: `${defs}/skills`,
    MCP_WORKFLOWS_PATH: `${defs}/workflows`,
    MCP_KNOWLEDGE_PATH: `${defs}/knowledge`,
    MCP_PLUGIN_MODEL_SCRIPTED_SCRIPT: `${defs}/script.yaml`,
  });
  try {
    await gateway.kernel.fleetStarted;
    assert.equal(gateway.kernel.proxy.get("memory")?.state, "READY");
    await fn(gateway, { skills: `${defs}/skills` });
  } finally {
    await gateway.stop();
    await fleet.remove();
    for (const dir of [dataDir, defs, policyDir]) await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("engine: workflows, skills, knowledge and agents through the gateway", async (t) => {
  await withEngineGateway(async (gateway) => {
    const client = await connectHttp(gateway);
    try {
      await t.step("workflow_run calls a proxied tool with templated arguments", async () => {
        const result = await client.callTool({
          name: "workflow_run",
          arguments: { workflow: "remember", inputs: { entity: "Grace", fact: "wrote COBOL" } },
        });
        const run = result.structuredContent as {
          status: string;
          steps: { id: string; status: string }[];
          output: string;
        };
        assert.equal(run.status, "completed", JSON.stringify(run));
        assert.deepEqual(run.steps.map((s) => [s.id, s.status]), [["save", "ok"], ["graph", "ok"]]);
        assert.match(run.output, /Grace/);
        assert.match(run.output, /wrote COBOL/);
      });

      await t.step("a missing workflow input is refused naming the input", async () => {
        await assert.rejects(
          client.callTool({
            name: "workflow_run",
            arguments: { workflow: "remember", inputs: {} },
          }),
          /needs the input "entity"/,
        );
      });

      await t.step("skills are listed as prompts and filled by prompts/get", async () => {
        const { prompts } = await client.listPrompts();
        assert.ok(prompts.some((p) => p.name === "summarize"));
        assert.ok(prompts.some((p) => p.name === "agent-notes"));
        const prompt = await client.getPrompt({
          name: "summarize",
          arguments: { text: "MCP is a protocol.", audience: "engineers" },
        });
        const text = (prompt.messages[0]?.content as { text: string }).text;
        assert.match(text, /for engineers\./);
        assert.match(text, /MCP is a protocol\./);
        const { resources } = await client.listResources();
        assert.ok(resources.some((r) => r.uri === "agent33://workflows/remember"));
      });

      await t.step("the name a resource or prompt lists is a name its tool accepts", async () => {
        const { resources } = await client.listResources();
        const remember = resources.find((r) => r.uri === "agent33://workflows/remember")!;
        assert.equal(remember.name, "remember");
        assert.equal(remember.title, "Remember a fact");
        for (const name of [remember.name, remember.title!, "Remember"]) {
          const result = await client.callTool({
            name: "workflow_run",
            arguments: { workflow: name, inputs: { entity: "Lin", fact: `named ${name}` } },
          });
          assert.equal((result.structuredContent as { status: string }).status, "completed", name);
        }
        const { prompts } = await client.listPrompts();
        const agentPrompt = prompts.find((p) => p.name.startsWith("agent-"))!;
        // No prompt: refused for that reason, so the agent was found by its prompt's name.
        await assert.rejects(
          client.callTool({ name: "agent_invoke", arguments: { agent: agentPrompt.name } }),
          /agent_invoke needs a prompt/,
        );
        await assert.rejects(
          client.callTool({ name: "workflow_run", arguments: { workflow: "nope" } }),
          /Unknown workflow "nope"; known workflows: remember \("Remember a fact"\)/,
        );
      });

      await t.step("rag_search returns the relevant passage with source and offset", async () => {
        const result = await client.callTool({
          name: "rag_search",
          arguments: { query: "how does an operator approve a destructive call", k: 2 },
        });
        const { passages } = result.structuredContent as {
          passages: { source: string; offset: number; heading: string; text: string }[];
        };
        assert.equal(passages[0]?.source, "gateway.md");
        assert.equal(passages[0]?.heading, "Approvals");
        const file = await Deno.readTextFile(`${ROOT}knowledge/gateway.md`);
        assert.equal(file.slice(passages[0]!.offset).startsWith(passages[0]!.text), true);
      });

      await t.step("agent_invoke runs the scripted model through governed tools", async () => {
        const result = await client.callTool({
          name: "agent_invoke",
          arguments: { agent: "notes", prompt: "Remember Ada" },
        });
        const run = result.structuredContent as {
          status: string;
          text: string;
          calls: { tool: string; status: string }[];
        };
        assert.equal(run.status, "completed", JSON.stringify(run));
        assert.equal(run.text, "Ada is in the graph.");
        assert.deepEqual(run.calls, [
          { tool: "memory__create_entities", status: "ok" },
          // Outside the agent's tool globs: refused before governance, and the run goes on.
          { tool: "system_status", status: "not_allowed" },
          { tool: "memory__read_graph", status: "ok" },
        ]);
      });
    } finally {
      await client.close();
    }
  });
});
