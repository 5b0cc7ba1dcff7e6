/**
 * The engine's native tools: `workflow_run`, `agent_invoke` and `rag_search`.
 * @module
 */
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { AGENT_PROMPT_PREFIX, type DefinitionRegistry } from "../mcp/definition_registry.ts";
import { GatewayError } from "../support/errors.ts";
import type { NativeTool } from "../plugin_api/mod.ts";
import type { AgentRunner } from "./agent_runner.ts";
import { agentSpec, workflowSpec } from "./definition_dirs.ts";
import type { RAGPipeline } from "./rag_pipeline.ts";
import type { ToolInvoker } from "./tool_invoker.ts";
import { runWorkflow } from "./workflow_runner.ts";

/** What the tools read; a feature's tool exists only when its part is given. */
export interface EngineToolsOptions {
  workflows?: DefinitionRegistry;
  agents?: DefinitionRegistry;
  runner?: AgentRunner;
  rag?: RAGPipeline;
  invoker: ToolInvoker;
  /** The approval token in a call's `_meta`, if any. */
  tokenOf(meta: Record<string, unknown> | undefined): string | undefined;
}

/** Builds the tools of the configured features. */
export function engineTools(o: EngineToolsOptions): NativeTool[] {
  const tools: NativeTool[] = [];
  if (o.workflows) {
    const workflows = o.workflows;
    tools.push({
      name: "workflow_run",
      description: "Run a workflow definition (agent33://workflows/{id}) with its inputs; " +
        "each step is a governed tool call",
      inputSchema: {
        type: "object",
        properties: {
          workflow: { type: "string", description: "Workflow id or name" },
          inputs: { type: "object", description: "The workflow's inputs" },
        },
        required: ["workflow"],
      },
      handler: async (args, ctx) => {
        const id = String(args.workflow);
        const found = workflows.find(id);
        if (!found) throw notFound("workflow", id, workflows);
        const token = o.tokenOf(ctx.meta);
        const result = await runWorkflow(
          workflowSpec(found),
          (args.inputs ?? {}) as Record<string, unknown>,
          o.invoker,
          ctx,
          token,
        );
        return structured(result, result.status === "failed");
      },
    });
  }
  if (o.agents && o.runner) {
    const agents = o.agents;
    const runner = o.runner;
    tools.push({
      name: "agent_invoke",
      description: "Run an agent (agent33://agents/{id}) on a prompt: its model calls governed " +
        "tools until it answers. A paused run resumes when called again with the approval token",
      inputSchema: {
        type: "object",
        properties: {
          agent: { type: "string", description: "Agent id or name" },
          prompt: { type: "string", description: "The task; omit when resuming" },
          run: { type: "string", description: "The paused run to resume (default: your latest)" },
        },
        required: ["agent"],
      },
      handler: async (args, ctx) => {
        const id = String(args.agent);
        // The agent's prompt name (agent-<id>) names it too.
        const found = agents.find(id) ??
          (id.startsWith(AGENT_PROMPT_PREFIX)
            ? agents.find(id.slice(AGENT_PROMPT_PREFIX.length))
            : undefined);
        if (!found) throw notFound("agent", id, agents);
        const token = o.tokenOf(ctx.meta);
        const run = typeof args.run === "string" ? args.run : undefined;
        const prompt = typeof args.prompt === "string" ? args.prompt : undefined;
        if (token !== undefined && (run !== undefined || prompt === undefined)) {
          return structured(await runner.resume(found.id, run, token, ctx));
        }
        if (prompt === undefined) {
          throw new GatewayError(
            "invalid_arguments",
            `agent_invoke needs a prompt (or, to resume a paused run, the approval token in ` +
              `_meta)`,
            { agent: id },
          );
        }
        return structured(await runner.start(agentSpec(found), prompt, ctx));
      },
    });
  }
  if (o.rag) {
    const rag = o.rag;
    tools.push({
      name: "rag_search",
      description: "Search the knowledge corpus; returns the best passages with their source " +
        "file and offset",
      annotations: { readOnlyHint: true },
      inputSchema: {
        type: "object",
        properties: {
          query: { type: "string", description: "What to look for" },
          k: { type: "integer", minimum: 1, maximum: 50, description: "How many passages (5)" },
        },
        required: ["query"],
      },
      handler: (args) => {
        const k = typeof args.k === "number" ? args.k : 5;
        const passages = rag.search(String(args.query), k);
        return Promise.resolve(structured({ passages }));
      },
    });
  }
  return tools;
}

function structured(value: object, isError = false): CallToolResult {
  return {
    content: [{ type: "text", text: JSON.stringify(value, null, 2) }],
    structuredContent: value as Record<string, unknown>,
    ...(isError ? { isError: true } : {}),
  };
}

function notFound(kind: string, id: string, registry: DefinitionRegistry): GatewayError {
  const known = registry.list().map((d) => d.name === d.id ? d.id : `${d.id} ("${d.name}")`);
  return new GatewayError(
    "not_found",
    `Unknown ${kind} "${id}"; known ${kind}s: ${known.join(", ") || "none"}`,
    { [kind]: id },
  );
}
