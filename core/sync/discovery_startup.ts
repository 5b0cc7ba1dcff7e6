/**
 * Starts the discovery kept running (MCP_DISCOVERY) from the loaded discovery plugins: a name
 * with no loaded plugin stops the start, naming what is loaded.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import { DiscoveryService, type NamedSource } from "./discovery_service.ts";

/** What discovery starts from. */
export interface DiscoveryStartup {
  /** MCP_DISCOVERY (plugin names, with or without `discovery-`), its timeout and interval. */
  settings: GatewayConfig["discovery"];
  /** Every loaded discovery plugin's source. */
  loaded: readonly NamedSource[];
  clock: Clock;
  logger: Logger;
  bus: EventBus;
}

/** The running discovery, or undefined when MCP_DISCOVERY names none. */
export function startDiscovery(options: DiscoveryStartup): DiscoveryService | undefined {
  const { settings, loaded, logger } = options;
  const wanted = settings.sources;
  if (wanted.length === 0) return undefined;
  const named = (l: NamedSource, name: string) =>
    l.plugin === name || l.plugin === `discovery-${name}`;
  const unknown = wanted.filter((name) => !loaded.some((l) => named(l, name)));
  if (unknown.length > 0) {
    throw new GatewayError(
      "config_invalid",
      `MCP_DISCOVERY names ${unknown.join(", ")}, but no such discovery plugin is loaded; ` +
        `loaded: ${loaded.map((l) => l.plugin).join(", ") || "none"} (see the plugin errors above)`,
    );
  }
  const sources = loaded.filter((l) => wanted.some((name) => named(l, name)));
  const discovery = new DiscoveryService(sources, {
    clock: options.clock,
    timeoutMs: settings.timeoutMs,
    intervalMs: settings.intervalMs,
    onEvent: (event) => {
      if (event.type === "discovery.source_error") {
        logger.warn(event.reason, event.retryInMs > 0 ? { retryInMs: event.retryInMs } : {});
      } else logger.info(event.type, { plugin: event.plugin, id: event.id });
      options.bus.publish(event);
    },
  });
  discovery.start();
  logger.info(`discovery running: ${discovery.plugins.join(", ")}`);
  return discovery;
}
