/**
 * The engine service: loads agent, skill and workflow definitions into the kernel's registries
 * (and keeps them in sync with the disk), indexes the knowledge corpus, and provides the native
 * tools `workflow_run`, `agent_invoke` and `rag_search`. Each feature is on only when its
 * directory is configured.
 * @module
 */
import type { DefinitionRegistry } from "../mcp/definition_registry.ts";
import { watchFile } from "../support/file_watcher.ts";
import { APPROVAL_TOKEN_META_KEY } from "../governance/tool_governance.ts";
import type { Logger } from "../support/logger.ts";
import type { ModelProvider, NativeTool } from "../plugin_api/mod.ts";
import { AgentRunner } from "./agent_runner.ts";
import { type DefinitionKind, loadDefinitions, syncRegistry } from "./definition_dirs.ts";
import { engineTools } from "./engine_tools.ts";
import { ModelRouter } from "./model_router.ts";
import { RAGPipeline } from "./rag_pipeline.ts";
import type { ToolInvoker } from "./tool_invoker.ts";

/** What the engine is built from. */
export interface EngineOptions {
  paths: { agents?: string; skills?: string; workflows?: string; knowledge?: string };
  /** `provider[:model]` for agents that name none. */
  defaultModel: string;
  registries: Record<DefinitionKind, DefinitionRegistry>;
  invoker: ToolInvoker;
  /** The loaded model provider plugins, read per run. */
  models: () => readonly ModelProvider[];
  logger: Logger;
}

/** Definitions, knowledge and the engine's tools. */
export class Engine {
  readonly rag: RAGPipeline | undefined;
  readonly agents: AgentRunner;
  #options: EngineOptions;
  #unwatch: (() => void)[] = [];

  constructor(options: EngineOptions) {
    this.#options = options;
    const { knowledge } = options.paths;
    this.rag = knowledge === undefined ? undefined : new RAGPipeline(knowledge);
    this.agents = new AgentRunner(
      new ModelRouter(options.models, options.defaultModel),
      options.invoker,
    );
  }

  /** Loads every configured directory; a bad definition file throws `config_invalid` (file:line). */
  async load(): Promise<void> {
    for (const kind of ["agents", "skills", "workflows"] as const) {
      const dir = this.#options.paths[kind];
      if (dir === undefined) continue;
      syncRegistry(this.#options.registries[kind], await loadDefinitions(kind, dir));
      this.#options.logger.info(`${kind}: ${this.#options.registries[kind].size} from ${dir}`);
    }
    if (this.rag) {
      await this.rag.refresh();
      this.#options.logger.info(`knowledge: ${this.rag.size} passages from ${this.rag.dir}`);
    }
  }

  /** Re-reads one kind of definition; a bad edit keeps the running definitions and is logged. */
  async reload(kind: DefinitionKind): Promise<void> {
    const dir = this.#options.paths[kind];
    if (dir === undefined) return;
    try {
      syncRegistry(this.#options.registries[kind], await loadDefinitions(kind, dir));
      this.#options.logger.info(`${kind} reloaded from ${dir}`);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.#options.logger.error(`${kind} not reloaded; the running ones stay: ${reason}`);
    }
  }

  /** Starts watching the configured directories. */
  watch(): void {
    const { paths, logger } = this.#options;
    for (const kind of ["agents", "workflows"] as const) {
      const path = paths[kind];
      if (path === undefined) continue;
      this.#unwatch.push(watchFile({
        path,
        logger: logger.child(kind),
        onChange: () => this.reload(kind),
      }));
    }
    if (paths.skills !== undefined) {
      this.#unwatch.push(watchFile({
        path: paths.skills,
        logger: logger.child("skills"),
        recursive: true,
        onChange: () => this.reload("skills"),
      }));
    }
    if (this.rag) {
      const rag = this.rag;
      this.#unwatch.push(watchFile({
        path: rag.dir,
        logger: logger.child("knowledge"),
        recursive: true,
        onChange: async () => {
          const { indexed, removed } = await rag.refresh();
          logger.info("knowledge reindexed", { indexed, removed });
        },
      }));
    }
  }

  /** The native tools of the configured features. */
  tools(): NativeTool[] {
    const { paths, registries, invoker } = this.#options;
    return engineTools({
      ...(paths.workflows === undefined ? {} : { workflows: registries.workflows }),
      ...(paths.agents === undefined ? {} : { agents: registries.agents, runner: this.agents }),
      ...(this.rag ? { rag: this.rag } : {}),
      invoker,
      tokenOf: (meta) => {
        const token = meta?.[APPROVAL_TOKEN_META_KEY];
        return typeof token === "string" ? token : undefined;
      },
    });
  }

  /** Stops every watcher. */
  stop(): void {
    for (const unwatch of this.#unwatch.splice(0)) unwatch();
  }
}
