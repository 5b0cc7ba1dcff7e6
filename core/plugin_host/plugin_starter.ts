/**
 * The plugin starter: instantiates loaded plugins with their narrow context (their config slice,
 * checked against their schema; for transports, the session pipeline's `serve` and the stdio
 * streams), keeps the instances by kind, and reports every plugin that fails as `plugin.failed`.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../support/clock.ts";
import { GatewayError, serializeError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type {
  DiscoverySource,
  InboundTransport,
  NativeTool,
  PluginContext,
  PluginManifest,
  StdioStreams,
  TransportContext,
  TransportSettings,
} from "../plugin_api/mod.ts";
import { type LoadedPlugin, pluginConfigSlice, type PluginFailure } from "./plugin_loader.ts";
import { PluginInstances } from "./plugin_instances.ts";
import { processStdio } from "../support/stdio_pipes.ts";

/** What plugins are started with (besides the config). */
export interface PluginStarterOptions {
  logger: Logger;
  clock: Clock;
  bus: EventBus;
  /** The resolved environment plugins read. */
  env: Readonly<Record<string, string | undefined>>;
  registerTool: (tool: NativeTool) => () => void;
  /** Cluster mode: how a transport opens this replica's view of the shared session records. */
  sharedSessions: () => TransportContext["openSharedSessions"];
  /** The session pipeline's entry, for transports. */
  serve: TransportContext["serve"];
  /** Streams for the stdio transport; the process's (made on first use) by default. */
  stdio?: StdioStreams | undefined;
}

/** Starts plugins and keeps their instances and failures. */
export class PluginStarter {
  readonly instances = new PluginInstances();
  /** Plugins that failed to load or start. */
  readonly failures: PluginFailure[] = [];
  readonly #options: PluginStarterOptions;
  /** MCP_PLUGIN_<NAME>_* variables, sliced per plugin. */
  readonly #pluginEnv: Record<string, string>;
  readonly #settings: TransportSettings;
  /** The process's stdin/stdout streams, made on first use (one reader per fd). */
  #processStdio: StdioStreams | undefined;

  constructor(config: GatewayConfig, options: PluginStarterOptions) {
    this.#options = options;
    this.#pluginEnv = config.pluginEnv;
    const { server } = config;
    this.#settings = {
      maxMessageBytes: server.maxMessageBytes,
      httpResponseMode: server.httpResponseMode,
      stdioTenant: server.stdioTenant,
      httpSessionIdleMs: server.httpSessionIdleMs,
      sseMaxQueueBytes: server.sseMaxQueueBytes,
      sseMaxQueueMessages: server.sseMaxQueueMessages,
      maxSessions: server.maxSessions,
    };
  }

  /** The loaded transports of one mode. */
  transports(mode: "stdio" | "http"): InboundTransport[] {
    return this.instances.of("transport").filter((t) => t.mode === mode);
  }

  /**
   * The stdio transport to start; throws `config_invalid` when the MCP interface is off (nothing
   * to serve) and `plugin_invalid` when no stdio transport loaded.
   */
  stdioTransport(enabled: boolean): InboundTransport & { start(): Promise<void> } {
    if (!enabled) {
      throw new GatewayError(
        "config_invalid",
        "MCP_SERVER_ENABLED=false leaves nothing to serve over stdio; enable it or use --transport http",
      );
    }
    const transport = this.transports("stdio")[0];
    if (!transport?.start) {
      throw new GatewayError(
        "plugin_invalid",
        "No stdio transport plugin loaded; see the plugin errors above",
      );
    }
    return transport as InboundTransport & { start(): Promise<void> };
  }

  /** Plugins loaded and failed. */
  counts(): { loaded: number; failed: number } {
    return { loaded: this.instances.all().length, failed: this.failures.length };
  }

  /** Every discovery plugin's source, named after its plugin. */
  discoverySources(): { plugin: string; source: DiscoverySource }[] {
    return this.instances.of("discovery").length === 0 ? [] : this.instances.all()
      .filter(({ plugin }) => plugin.manifest.kind === "discovery")
      .map(({ plugin, value }) => ({
        plugin: plugin.manifest.name,
        source: value as DiscoverySource,
      }));
  }

  /** Closes every instance that can be closed but those in `closed` (already closed). */
  async closeAll(closed: readonly unknown[]): Promise<void> {
    for (const { value, plugin } of this.instances.all()) {
      const closable = value as { close?: () => unknown } | undefined;
      if (typeof closable?.close !== "function" || closed.includes(value)) continue;
      try {
        await closable.close();
      } catch (error) {
        this.#options.logger.warn("plugin failed to close", {
          plugin: plugin.manifest.name,
          error: String(error),
        });
      }
    }
  }

  /** Reports plugins that failed to load (before any was started). */
  loadFailed(failures: readonly PluginFailure[]): void {
    this.failures.push(...failures);
    for (const failure of failures) this.#report(failure);
  }

  /** Instantiates `plugin` (its config slice plus `extra`); undefined when it failed, reported. */
  async instantiate(plugin: LoadedPlugin, extra: Record<string, unknown> = {}): Promise<unknown> {
    const o = this.#options;
    const manifest: PluginManifest = plugin.manifest;
    const logger = o.logger.child(manifest.name);
    const config = this.#config(plugin, extra);
    if (config === undefined) return undefined;
    const base: PluginContext = {
      logger,
      clock: o.clock,
      env: o.env,
      config,
      bus: o.bus,
      tools: { register: o.registerTool },
      models: () => this.instances.of("model"),
    };
    let value: unknown;
    try {
      value = await this.#create(plugin, base);
    } catch (error) {
      this.#fail(plugin, `factory threw: ${serializeError(error).message}`);
      return undefined;
    }
    o.bus.publish({
      type: "plugin.loaded",
      plugin: manifest.name,
      kind: manifest.kind,
      path: plugin.path,
    });
    logger.debug("plugin loaded", { kind: manifest.kind, path: plugin.path });
    return value;
  }

  /** The plugin's config slice, parsed by its schema; undefined (reported) when it is invalid. */
  #config(
    plugin: LoadedPlugin,
    extra: Record<string, unknown>,
  ): Record<string, unknown> | undefined {
    const manifest = plugin.manifest;
    const slice = { ...pluginConfigSlice(manifest.name, this.#pluginEnv), ...extra };
    if (!manifest.configSchema) return slice;
    // A schema that throws is a broken plugin like any other: report it, don't abort start().
    let parsed: ReturnType<NonNullable<PluginManifest["configSchema"]>["safeParse"]>;
    try {
      parsed = manifest.configSchema.safeParse(slice);
    } catch (error) {
      parsed = { success: false, error };
    }
    if (!parsed.success) {
      this.#fail(
        plugin,
        `invalid config slice (MCP_PLUGIN_${manifest.name.toUpperCase().replaceAll("-", "_")}_*): ${
          String((parsed.error as Error | undefined)?.message ?? parsed.error)
        }`,
      );
      return undefined;
    }
    // `data` is optional in the schema contract; without it the plugin gets the raw slice.
    return (parsed.data ?? slice) as Record<string, unknown>;
  }

  async #create(plugin: LoadedPlugin, base: PluginContext): Promise<unknown> {
    const manifest: PluginManifest = plugin.manifest;
    const instances = this.instances;
    switch (manifest.kind) {
      case "transport": {
        const stdio = () => this.#options.stdio ?? (this.#processStdio ??= processStdio());
        const shared = this.#options.sharedSessions();
        const ctx: TransportContext = {
          ...base,
          settings: this.#settings,
          serve: this.#options.serve,
          ...(shared ? { openSharedSessions: shared } : {}),
          // A getter: only the stdio transport takes the process's streams, and only once.
          get stdio() {
            return stdio();
          },
        };
        return instances.add("transport", plugin, await manifest.create(ctx));
      }
      case "bus":
        return instances.add("bus", plugin, await manifest.create(base));
      case "upstream":
        return instances.add("upstream", plugin, await manifest.create(base));
      case "discovery":
        return instances.add("discovery", plugin, await manifest.create(base));
      case "scanner-rule":
        return instances.add("scanner-rule", plugin, await manifest.create(base));
      case "model":
        return instances.add("model", plugin, await manifest.create(base));
      default: {
        const unreachable: never = manifest;
        throw new Error(`unknown plugin kind ${(unreachable as PluginManifest).kind}`);
      }
    }
  }

  #fail(plugin: LoadedPlugin, reason: string): void {
    const failure = { path: plugin.path, reason };
    this.failures.push(failure);
    this.#report(failure);
  }

  #report(failure: PluginFailure): void {
    this.#options.logger.error(`plugin skipped: ${failure.path}: ${failure.reason}`);
    this.#options.bus.publish({
      type: "plugin.failed",
      path: failure.path,
      reason: failure.reason,
    });
  }
}
