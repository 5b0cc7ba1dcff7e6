/**
 * `agents/*.yaml`: an agent is a system prompt, a model, the tools it may use (globs) and a step
 * budget. Each becomes a Definition whose prompt (`agent-<id>`) is the system prompt plus the task.
 * @module
 */
import type { Definition } from "../mcp/definition_registry.ts";
import { isMapping, type ProblemList, type YamlSource } from "../config/yaml_source.ts";
import { FieldReader, ID_PATTERN } from "./fields.ts";

/** A validated agent. */
export interface AgentSpec {
  id: string;
  name: string;
  description: string;
  system: string;
  /** `provider` or `provider:model`; the engine default when absent. */
  model?: string;
  /** Globs over tool names the agent may call; governance still applies to each call. */
  tools: string[];
  maxSteps: number;
  /** The file it was read from. */
  source: string;
}

const KEYS = ["id", "name", "description", "system", "model", "tools", "max_steps"] as const;

/** Validates one parsed agent file; problems are recorded, the result is undefined when any. */
export function readAgent(source: YamlSource, problems: ProblemList): AgentSpec | undefined {
  const before = problems.size;
  const root = source.root;
  if (!isMapping(root)) {
    problems.add(source, [], "must be a mapping with id, name, description and system");
    return undefined;
  }
  const f = new FieldReader(source, problems);
  f.keys(root, [], KEYS);
  const id = f.string(root, [], "id", "a lower-case id such as assistant");
  if (id !== undefined && !ID_PATTERN.test(id)) {
    problems.add(source, ["id"], `must match ${ID_PATTERN.source}, received "${id}"`);
  }
  const name = f.string(root, [], "name", "a human name");
  const description = f.string(root, [], "description", "one line saying what the agent does");
  const system = f.string(root, [], "system", "the agent's system prompt");
  const model = f.optionalString(root, [], "model");
  const tools = f.stringList(root, [], "tools");
  const maxSteps = f.integer(root, [], "max_steps", { min: 1, max: 50, fallback: 8 });
  if (problems.size > before) return undefined;
  return {
    id: id!,
    name: name!,
    description: description!,
    system: system!,
    ...(model === undefined ? {} : { model }),
    tools,
    maxSteps,
    source: source.path,
  };
}

/** The registry record of an agent. */
export function agentDefinition(agent: AgentSpec): Definition {
  return {
    id: agent.id,
    name: agent.name,
    description: agent.description,
    prompt: {
      template: `${agent.system.trim()}\n\nTask: {{task}}`,
      arguments: [{ name: "task", description: "What the agent should do", required: true }],
    },
    body: { ...agent },
  };
}
