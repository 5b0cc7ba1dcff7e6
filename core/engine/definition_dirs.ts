/**
 * Reads a definition directory (agents, skills or workflows) whole: every problem in every file is
 * reported together as `file:line: …`, and a directory with any problem yields nothing, so a bad
 * edit never replaces good definitions.
 * @module
 */
import type { Definition, DefinitionRegistry } from "../mcp/definition_registry.ts";
import { GatewayError } from "../support/errors.ts";
import { parseYamlSource, ProblemList } from "../config/yaml_source.ts";
import { agentDefinition, type AgentSpec, readAgent } from "./agent_loader.ts";
import { readSkill, skillDefinition, type SkillSpec } from "./skill_loader.ts";
import { readWorkflow, workflowDefinition, type WorkflowSpec } from "./workflow_loader.ts";

/** The three kinds of definition directory. */
export type DefinitionKind = "agents" | "skills" | "workflows";

/** Reads every definition of one kind in `dir`; a missing directory is empty. Throws `config_invalid`. */
export async function loadDefinitions(kind: DefinitionKind, dir: string): Promise<Definition[]> {
  const problems = new ProblemList(`${kind.slice(0, -1)} definitions`, dir);
  const out: Definition[] = [];
  const entries = await listDir(dir);
  for (const entry of entries) {
    const path = `${dir}/${entry.name}`;
    if (kind === "skills") {
      if (!entry.isDirectory) continue;
      const file = `${path}/SKILL.md`;
      const text = await readIfExists(file);
      if (text === undefined) continue;
      const skill = readSkill(entry.name, text, file, problems);
      if (skill) out.push(skillDefinition(skill));
      continue;
    }
    if (!entry.isFile || !/\.ya?ml$/.test(entry.name)) continue;
    const source = parseYamlSource(await Deno.readTextFile(path), path, problems);
    if (!source) continue;
    if (kind === "agents") {
      const agent = readAgent(source, problems);
      if (agent) out.push(agentDefinition(agent));
    } else {
      const workflow = readWorkflow(source, problems);
      if (workflow) out.push(workflowDefinition(workflow));
    }
  }
  const seen = new Map<string, string>();
  for (const d of out) {
    const other = seen.get(d.id);
    const here = String(d.body.source);
    if (other) problems.addAt(here, 1, `repeats the id "${d.id}" of ${other}; ids must be unique`);
    seen.set(d.id, here);
  }
  problems.throwIfAny();
  return out;
}

/** Replaces a registry's contents with `definitions`, touching only what changed. */
export function syncRegistry(registry: DefinitionRegistry, definitions: Definition[]): void {
  const ids = new Set(definitions.map((d) => d.id));
  for (const old of registry.list()) if (!ids.has(old.id)) registry.delete(old.id);
  for (const d of definitions) {
    const old = registry.find(d.id);
    if (!old || old.id !== d.id || JSON.stringify(old) !== JSON.stringify(d)) registry.set(d);
  }
}

/** An agent's validated spec from its registry record. */
export function agentSpec(d: Definition): AgentSpec {
  return d.body as unknown as AgentSpec;
}

/** A skill's validated spec from its registry record. */
export function skillSpec(d: Definition): SkillSpec {
  return d.body as unknown as SkillSpec;
}

/** A workflow's validated spec from its registry record. */
export function workflowSpec(d: Definition): WorkflowSpec {
  return d.body as unknown as WorkflowSpec;
}

async function listDir(dir: string): Promise<Deno.DirEntry[]> {
  const entries: Deno.DirEntry[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) entries.push(entry);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw new GatewayError("config_invalid", `Cannot read the directory "${dir}": ${error}`);
  }
  return entries.sort((a, b) => a.name.localeCompare(b.name));
}

async function readIfExists(path: string): Promise<string | undefined> {
  try {
    return await Deno.readTextFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    throw error;
  }
}
