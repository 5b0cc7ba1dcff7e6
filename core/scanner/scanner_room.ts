/**
 * The scanner inside the gateway as the settings configure it: the loaded scanner-rule plugins'
 * rules, the block and approval thresholds, the same plugin folders for its worker, and in
 * cluster mode the pins every replica shares.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { SwitchableEventBus } from "../bus/switchable_event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { ScannerRule } from "../plugin_api/mod.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { Logger } from "../support/logger.ts";
import { GatewayScanner, type GatewayScannerOptions } from "./gateway_scanner.ts";

/** Builds the gateway's scanner over `proxy`'s fleet. */
export function createScanner(
  config: GatewayConfig,
  deps: {
    proxy: ProxyManager;
    /** What each scanner-rule plugin created (a list of rules, or anything else to skip). */
    ruleSets: readonly unknown[];
    bus: SwitchableEventBus & EventBus;
    logger: Logger;
    pluginDirs: readonly string[];
    shared?: GatewayScannerOptions["shared"] | undefined;
  },
): GatewayScanner {
  return new GatewayScanner({
    proxy: deps.proxy,
    rules: deps.ruleSets.flatMap((r) => (Array.isArray(r) ? r as ScannerRule[] : [])),
    subscribe: (handler) => deps.bus.subscribeLocal(handler),
    bus: deps.bus,
    logger: deps.logger,
    blockAt: config.scannerBlock,
    approvalAt: config.scannerApproval,
    // The same plugin folders: the worker loads the same scanner rules.
    pluginDirs: deps.pluginDirs,
    ...(deps.shared ? { shared: deps.shared } : {}),
  });
}
