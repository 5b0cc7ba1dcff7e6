import assert from "node:assert/strict";
import { principalOf, type TokenPayload } from "../auth/token_payload.ts";
import type { ModelProvider, ToolCallContext } from "../plugin_api/mod.ts";
import type { AgentSpec } from "./agent_loader.ts";
import { AgentRunner, MAX_PAUSED, MAX_PAUSED_PER_CALLER } from "./agent_runner.ts";
import { ModelRouter } from "./model_router.ts";
import type { ToolInvoker } from "./tool_invoker.ts";

const AGENT: AgentSpec = {
  id: "cleaner",
  name: "Cleaner",
  description: "Deletes",
  system: "You delete.",
  model: "always-delete",
  tools: ["*"],
  maxSteps: 2,
  source: "agents/cleaner.yaml",
};

/** A model that asks for one destructive call, and a gate that wants an approval for each. */
function runner(): AgentRunner {
  const model: ModelProvider = {
    name: "always-delete",
    complete: () =>
      Promise.resolve({ text: "", toolCalls: [{ id: "1", name: "wipe", arguments: {} }] }),
  } as ModelProvider;
  const invoker = {
    tools: () => [{ name: "wipe", inputSchema: { type: "object" } }],
    invoke: () =>
      Promise.resolve({
        status: "approval_required",
        reason: "wipe is destructive",
        request: { id: "r" },
      }),
  } as unknown as ToolInvoker;
  return new AgentRunner(new ModelRouter(() => [model], "always-delete"), invoker);
}

function caller(tenant: string, subject: string): ToolCallContext {
  const auth: TokenPayload = {
    tenant,
    scopes: ["mcp"],
    subject,
    principal: principalOf("tokens_file", subject),
  };
  return { auth, signal: new AbortController().signal, progress: () => Promise.resolve() };
}

/** Pauses `n` runs for `context`; their ids, oldest first. */
async function pause(agents: AgentRunner, context: ToolCallContext, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const result = await agents.start(AGENT, "clean up", context);
    assert.equal(result.status, "approval_required");
    ids.push(result.run);
  }
  return ids;
}

/** Whether `context` can still resume run `id` (its paused state kept). */
async function kept(agents: AgentRunner, id: string, context: ToolCallContext): Promise<boolean> {
  try {
    await agents.resume(AGENT.id, id, "token", context);
    return true;
  } catch (error) {
    if ((error as { code?: string }).code === "not_found") return false;
    throw error;
  }
}

Deno.test("One caller's paused runs make room among their own: another caller's paused run is kept", async () => {
  const agents = runner();
  const victim = caller("globex", "bob");
  const flooder = caller("acme", "mallory");
  const [bobs] = await pause(agents, victim, 1);
  // More than all the runs kept in all: before, the oldest anyone had made room, bob's first.
  const mallorys = await pause(agents, flooder, MAX_PAUSED + 10);
  assert.ok(await kept(agents, bobs!, victim), "bob's run survives mallory's flood");
  assert.equal(await kept(agents, mallorys[0]!, flooder), false, "mallory's oldest made room");
  assert.ok(await kept(agents, mallorys.at(-1)!, flooder), "mallory's newest is kept");
});

Deno.test("Past the total bound, the caller holding the most paused runs gives up its oldest", async () => {
  const agents = runner();
  const callers = Array.from(
    { length: Math.ceil(MAX_PAUSED / MAX_PAUSED_PER_CALLER) },
    (_, i) => caller("acme", `user-${i}`),
  );
  const first: string[] = [];
  for (const context of callers) {
    first.push((await pause(agents, context, MAX_PAUSED_PER_CALLER))[0]!);
  }
  // Full: a newcomer's run pushes out the oldest of a caller holding the most, not its own.
  const [newcomers] = await pause(agents, caller("globex", "newcomer"), 1);
  assert.ok(await kept(agents, newcomers!, caller("globex", "newcomer")));
  assert.equal(await kept(agents, first[0]!, callers[0]!), false);
  assert.ok(await kept(agents, first[1]!, callers[1]!));
});
