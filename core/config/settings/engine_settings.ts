/**
 * The environment variables of the engine: agents, skills, workflows, knowledge: each declared once, with its
 * parser, default and meaning (core/config/settings/settings.ts joins the groups; docs are generated).
 * @module
 */
import { setting, text } from "./setting.ts";

/** The variables of the engine: agents, skills, workflows, knowledge. */
export const ENGINE_SETTINGS = {
  MCP_AGENTS_PATH: setting({
    group: "engine",
    schema: text,
    shownDefault: "none (`--demo`: the repository's `agents/`)",
    meaning: "Directory of agent definitions (`*.yaml`); enables `agent_invoke`",
  }),
  MCP_SKILLS_PATH: setting({
    group: "engine",
    schema: text,
    shownDefault: "none (`--demo`: the repository's `skills/`)",
    meaning: "Directory of skills (`<id>/SKILL.md`), served as prompts",
  }),
  MCP_WORKFLOWS_PATH: setting({
    group: "engine",
    schema: text,
    shownDefault: "none (`--demo`: the repository's `workflows/`)",
    meaning: "Directory of workflow definitions (`*.yaml`); enables `workflow_run`",
  }),
  MCP_KNOWLEDGE_PATH: setting({
    group: "engine",
    schema: text,
    shownDefault: "none (`--demo`: the repository's `knowledge/`)",
    meaning: "Directory of Markdown and text documents; enables `rag_search`",
  }),
  MCP_ENGINE_MODEL: setting({
    group: "engine",
    schema: text,
    default: "sampling",
    meaning: "Model (`provider[:model]`) of agents that name none",
  }),
};
