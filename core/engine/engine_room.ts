/**
 * The engine as the settings configure it: definitions from disk, the default model, and tool
 * calls through the gateway's one call path; its tools are registered with the native ones.
 * @module
 */
import type { GatewayConfig } from "../config/config.ts";
import type { CallPipeline } from "../mcp/call_pipeline.ts";
import type { DefinitionRegistry } from "../mcp/definition_registry.ts";
import type { ToolRegistry } from "../mcp/tool_registry.ts";
import type { ModelProvider } from "../plugin_api/mod.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { Logger } from "../support/logger.ts";
import { Engine } from "./engine.ts";
import { kernelInvoker } from "./kernel_invoker.ts";

/** Builds the engine and registers its tools in `deps.tools`. */
export function createEngine(
  config: GatewayConfig,
  deps: {
    registries: {
      agents: DefinitionRegistry;
      skills: DefinitionRegistry;
      workflows: DefinitionRegistry;
    };
    calls: CallPipeline;
    tools: ToolRegistry;
    proxy: ProxyManager;
    /** The loaded model provider plugins, read per run. */
    models: () => readonly ModelProvider[];
    logger: Logger;
  },
): Engine {
  const { engine: settings } = config;
  const engine = new Engine({
    paths: {
      agents: settings.agentsPath,
      skills: settings.skillsPath,
      workflows: settings.workflowsPath,
      knowledge: settings.knowledgePath,
    },
    defaultModel: settings.model,
    registries: deps.registries,
    invoker: kernelInvoker({ pipeline: deps.calls, tools: deps.tools, proxy: deps.proxy }),
    models: deps.models,
    logger: deps.logger,
  });
  for (const tool of engine.tools()) deps.tools.register(tool);
  return engine;
}
