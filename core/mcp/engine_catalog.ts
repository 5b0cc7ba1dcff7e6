/**
 * The engine's own MCP items: the system status and every agent, workflow and skill definition as
 * `agent33://` resources (with one URI template per kind), and skills and agents with a prompt
 * as prompts. Read from the definition registries on every request, so a reload shows at once.
 * @module
 */
import type { Prompt, Resource, ResourceTemplate } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../support/errors.ts";
import {
  AGENT_PROMPT_PREFIX,
  type Definition,
  type DefinitionRegistry,
} from "./definition_registry.ts";

/** URI of the system status resource. */
export const STATUS_URI = "agent33://system/status";

/** Counts served by the status resource and the `system_status` tool. */
export interface SystemStatus {
  gateway: { name: string; version: string; uptimeSeconds: number };
  agents: number;
  tools: number;
  skills: number;
  workflows: number;
  proxies: number;
  sessions: number;
}

/** The definition kinds exposed as resources, with their URI path segment. */
const DEFINITION_KINDS = [
  { kind: "agents", noun: "Agent" },
  { kind: "workflows", noun: "Workflow" },
  { kind: "skills", noun: "Skill" },
] as const;
type DefinitionKind = typeof DEFINITION_KINDS[number]["kind"];

/** The registries the engine's items come from. */
export interface EngineRegistries {
  agentRegistry: DefinitionRegistry;
  skillRegistry: DefinitionRegistry;
  workflowRegistry: DefinitionRegistry;
}

/** An engine prompt and the template `prompts/get` fills. */
export interface EnginePrompt {
  prompt: Prompt;
  template: string;
}

/** Lists and reads the engine's resources and prompts. */
export class EngineCatalog {
  #registries: EngineRegistries;
  #status: () => SystemStatus;

  constructor(registries: EngineRegistries, status: () => SystemStatus) {
    this.#registries = registries;
    this.#status = status;
  }

  /** The status resource and one resource per definition. */
  resources(): Resource[] {
    const resources: Resource[] = [{
      uri: STATUS_URI,
      name: "system-status",
      title: "System status",
      description: "Counts of agents, tools, skills, workflows, proxies and sessions",
      mimeType: "application/json",
    }];
    for (const { kind, noun } of DEFINITION_KINDS) {
      for (const d of this.#registry(kind).list()) {
        resources.push({
          uri: `agent33://${kind}/${encodeURIComponent(d.id)}`,
          // The name is the id its tool (workflow_run, agent_invoke) takes; the human name is the title.
          name: d.id,
          title: d.name,
          description: d.description || `${noun} ${d.id}`,
          mimeType: "application/json",
        });
      }
    }
    return resources;
  }

  /** One template per definition kind (`agent33://<kind>/{id}`). */
  resourceTemplates(): ResourceTemplate[] {
    return DEFINITION_KINDS.map(({ kind, noun }) => ({
      uriTemplate: templateUri(kind),
      name: `${kind.slice(0, -1)}-by-id`,
      title: `${noun} definition`,
      description: `${noun} definition by id or name`,
      mimeType: "application/json",
    }));
  }

  /** The JSON text of an engine resource; throws `not_found` naming what exists. */
  read(uri: string): string {
    if (uri === STATUS_URI) return JSON.stringify(this.#status(), null, 2);
    const match = /^agent33:\/\/(agents|workflows|skills)\/(.+)$/.exec(uri);
    if (match) {
      const kind = match[1] as DefinitionKind;
      const key = decodeURIComponent(match[2]!);
      const found = this.#registry(kind).find(key);
      if (found) return JSON.stringify(found.body, null, 2);
      throw new GatewayError(
        "not_found",
        `No ${kind.slice(0, -1)} with id or name "${key}"; list them with resources/list`,
        { uri },
      );
    }
    throw new GatewayError(
      "not_found",
      `Unknown resource "${uri}"; call resources/list and resources/templates/list for what exists`,
      { uri },
    );
  }

  /** The skills' and agents' prompts (an agent's under {@link AGENT_PROMPT_PREFIX}). */
  prompts(): EnginePrompt[] {
    const { skillRegistry, agentRegistry } = this.#registries;
    const out: EnginePrompt[] = [];
    const add = (name: string, d: Definition) => {
      if (!d.prompt) return;
      out.push({
        prompt: { name, description: d.description, arguments: d.prompt.arguments },
        template: d.prompt.template,
      });
    };
    for (const skill of skillRegistry.list()) add(skill.id, skill);
    for (const agent of agentRegistry.list()) add(`${AGENT_PROMPT_PREFIX}${agent.id}`, agent);
    return out;
  }

  /** The values an argument of an engine URI template may take (the ids of its `{id}`). */
  completionCandidates(uriTemplate: string, argument: string): string[] {
    const kind = DEFINITION_KINDS.find((k) => uriTemplate === templateUri(k.kind));
    return kind && argument === "id" ? this.#registry(kind.kind).list().map((d) => d.id) : [];
  }

  #registry(kind: DefinitionKind): DefinitionRegistry {
    const r = this.#registries;
    switch (kind) {
      case "agents":
        return r.agentRegistry;
      case "workflows":
        return r.workflowRegistry;
      case "skills":
        return r.skillRegistry;
    }
  }
}

function templateUri(kind: DefinitionKind): string {
  return `agent33://${kind}/{id}`;
}
