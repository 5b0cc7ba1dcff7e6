/**
 * Registries of engine definitions (agents, skills, workflows) that the bridge exposes as
 * resources and prompts. The engine services that load them from disk arrive with their own issue;
 * the shape the bridge reads is fixed here.
 * @module
 */

/** Agents are also prompts, named `agent-<id>` (a skill may have the same id as an agent). */
export const AGENT_PROMPT_PREFIX = "agent-";

/** What every definition has. */
export interface Definition {
  /** Stable id, used in resource URIs. */
  id: string;
  /** Human name, also accepted in lookups. */
  name: string;
  /** One line: what it is. */
  description: string;
  /** A prompt template exposed as an MCP prompt, if any. */
  prompt?: {
    template: string;
    arguments: { name: string; description?: string; required?: boolean }[];
  };
  /** The full definition as loaded. */
  body: Record<string, unknown>;
}

/** Definitions of one kind, found by id or by name. */
export class DefinitionRegistry<T extends Definition = Definition> {
  #byId = new Map<string, T>();
  #listeners = new Set<() => void>();

  /** Adds or replaces a definition. */
  set(definition: T): void {
    this.#byId.set(definition.id, definition);
    for (const listener of [...this.#listeners]) listener();
  }

  /** Removes a definition by id. */
  delete(id: string): void {
    if (this.#byId.delete(id)) { for (const listener of [...this.#listeners]) listener(); }
  }

  /**
   * The definition with this id, else the first with this name, else the one whose id or name
   * matches ignoring case: whatever a resource or prompt lists for it finds it.
   */
  find(idOrName: string): T | undefined {
    const all = [...this.#byId.values()];
    const folded = idOrName.toLowerCase();
    return this.#byId.get(idOrName) ?? all.find((d) => d.name === idOrName) ??
      all.find((d) => d.id.toLowerCase() === folded || d.name.toLowerCase() === folded);
  }

  /** Every definition, sorted by id. */
  list(): T[] {
    return [...this.#byId.values()].sort((a, b) => a.id.localeCompare(b.id));
  }

  /** Number of definitions. */
  get size(): number {
    return this.#byId.size;
  }

  /** Calls `listener` when the definitions change. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }
}

/** The engine's agents (the seed's AgentRegistry). */
export type AgentRegistry = DefinitionRegistry;
/** The engine's skills (the seed's SkillRegistry). */
export type SkillRegistry = DefinitionRegistry;
/** The engine's workflow definitions. */
export type WorkflowRegistry = DefinitionRegistry;
