/**
 * Loads scanner rules from `scanner-rule` plugins (the built-in folder plus MCP_PLUGIN_PATHS),
 * the same plugins the kernel loads.
 * @module
 */
import { systemClock } from "../support/clock.ts";
import { InProcessEventBus } from "../bus/event_bus.ts";
import { silentLogger } from "../support/logger.ts";
import type { PluginContext, ScannerRule } from "../plugin_api/mod.ts";
import { BUILTIN_PLUGIN_DIR, loadPlugins } from "../plugin_host/plugin_loader.ts";

/** Every rule of every scanner-rule plugin, and the plugins that failed to load. */
export function loadScannerRules(
  extraDirs: readonly string[] = [],
): Promise<{ rules: ScannerRule[]; problems: string[] }> {
  return loadScannerRulesFrom([BUILTIN_PLUGIN_DIR, ...extraDirs]);
}

/** The rules of the scanner-rule plugins in exactly these folders. */
export async function loadScannerRulesFrom(
  dirs: readonly string[],
): Promise<{ rules: ScannerRule[]; problems: string[] }> {
  const { plugins, failures } = await loadPlugins([...dirs]);
  const ctx: PluginContext = {
    logger: silentLogger,
    clock: systemClock,
    // Rules judge catalogs; none reads the environment.
    env: {},
    config: {},
    bus: new InProcessEventBus(silentLogger),
    tools: { register: () => () => {} },
  };
  const problems = failures.map((f) => `${f.path}: ${f.reason}`);
  const rules: ScannerRule[] = [];
  const ids = new Set<string>();
  for (const { manifest, path } of plugins) {
    if (manifest.kind !== "scanner-rule") continue;
    try {
      for (const rule of await manifest.create(ctx)) {
        // Rule ids key suppressions and SARIF; a duplicate would make both ambiguous.
        if (ids.has(rule.id)) problems.push(`${path}: rule "${rule.id}" is defined twice; skipped`);
        else {
          ids.add(rule.id);
          rules.push(rule);
        }
      }
    } catch (error) {
      problems.push(`${path}: factory threw: ${(error as Error).message}`);
    }
  }
  return { rules, problems };
}
