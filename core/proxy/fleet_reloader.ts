/**
 * The fleet reloader: loads the fleet at start, applies a new one without a restart (from the
 * fleet file when it changes, from the admin API, or from any other {@link FleetSource}), one
 * application at a time, and registers each fleet's secrets for redaction before anything can
 * fail with them.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import { DATA_DIR_VARIABLE } from "../config/data_dir.ts";
import { GatewayError } from "../support/errors.ts";
import { watchFile } from "../support/file_watcher.ts";
import type { Logger } from "../support/logger.ts";
import { forgetSecrets, registerSecrets, serverSecrets } from "../support/redact.ts";
import {
  type FleetConfig,
  type FleetServer,
  loadFleetConfig,
  parseFleetConfig,
} from "./fleet_config.ts";
import { fileFleetStore, type FleetStore } from "./fleet_store.ts";
import type { ProxyManager } from "./proxy_manager.ts";
import type { UpstreamTransports } from "./upstream_transports.ts";

/** What applying a fleet changed, by server id. */
export interface FleetDiff {
  added: string[];
  removed: string[];
  changed: string[];
}

/** Where a fleet comes from: the fleet file, or a shared store. */
export interface FleetSource {
  /** Names it in logs and events (`fleet.reloaded`, `fleet.reload_failed`). */
  readonly path: string;
  /** Reads and parses the fleet; throws `config_invalid` with every problem. */
  read(): Promise<FleetConfig>;
}

/** What the reloader is built from. */
export interface FleetReloaderOptions {
  /** MCP_PROXY_CONFIG_PATH, when a fleet file is configured. */
  path: string | undefined;
  proxy: ProxyManager;
  /** Checks each enabled server can be planned (its adapter loaded, its command allowed). */
  upstreams: Pick<UpstreamTransports, "plan">;
  /** The resolved environment fleet files interpolate (read at each load). */
  env: () => Record<string, string | undefined>;
  /** MCP_DATA_DIR, which fleet files may name as `${MCP_DATA_DIR}`. */
  dataDir: string;
  separator: string;
  healthIntervalSeconds: number;
  logger: Logger;
  bus: EventBus;
  /** True once the gateway stops: nothing is applied from then on. */
  stopping: () => boolean;
}

/** Loads, checks and applies fleets, one application at a time. */
export class FleetReloader {
  readonly #options: FleetReloaderOptions;
  #fleet: readonly FleetServer[] = [];
  /** Whether the last file read was refused: the fleet read after it is news, even unchanged. */
  #refused = false;
  // Applications (file watcher, admin API) run one at a time: two overlapping proxy.reload calls
  // would each see the other's half-applied members.
  #queue: Promise<unknown> = Promise.resolve();
  #unwatch: (() => void) | undefined;
  /** Owners of the registered secrets (core/support/redact.ts): this fleet's, the last one's. */
  #secrets = { fleet: {}, previousFleet: {} };

  constructor(options: FleetReloaderOptions) {
    this.#options = options;
  }

  /** The fleet as last applied, disabled servers included. */
  get fleet(): readonly FleetServer[] {
    return this.#fleet;
  }

  /** Where fleet edits go without a cluster: the fleet file, if one is configured. */
  get store(): FleetStore | undefined {
    const path = this.#options.path;
    return path === undefined ? undefined : fileFleetStore(path);
  }

  /** The configured fleet file as a source, or undefined without one. */
  get file(): FleetSource | undefined {
    const path = this.#options.path;
    if (path === undefined) return undefined;
    return { path, read: () => loadFleetConfig(path, this.#env(), this.#defaults()) };
  }

  /**
   * Loads the fleet from `source` (the fleet file by default, if configured) and checks every
   * enabled server can be planned.
   */
  async load(source: FleetSource | undefined = this.file): Promise<FleetServer[]> {
    if (source === undefined) return [];
    const fleet = await source.read();
    this.#registerSecrets(fleet.servers);
    const servers = fleet.servers.filter((s) => s.enabled);
    this.#plan(servers);
    this.#fleet = fleet.servers;
    this.#options.logger.info(
      `fleet ${source.path}: ${servers.map((s) => s.id).join(", ") || "no enabled servers"}`,
    );
    return fleet.servers;
  }

  /** Parses fleet text and checks every enabled server can be planned; throws `config_invalid`. */
  check(text: string, path: string): FleetConfig {
    const fleet = parseFleetConfig(text, path, this.#env(), this.#defaults());
    this.#plan(fleet.servers.filter((s) => s.enabled));
    return fleet;
  }

  /** A fleet document's text as a source (a shared revision), named `origin`. */
  text(text: string, origin: string): FleetSource {
    return {
      path: origin,
      read: () => Promise.resolve(parseFleetConfig(text, origin, this.#env(), this.#defaults())),
    };
  }

  /** Applies a checked fleet without a restart (one application at a time), from `origin`. */
  apply(servers: readonly FleetServer[], origin?: string): Promise<FleetDiff> {
    return this.#enqueue(() => this.#apply(servers, origin));
  }

  /**
   * Re-reads `source` (the fleet file by default) and applies it; a bad fleet keeps the running
   * one, is logged and published as `fleet.reload_failed`, and throws why. `quietIfSame`
   * publishes nothing when the fleet read is the one in force and no file was refused since.
   */
  reload(
    source: FleetSource | undefined = this.file,
    options: { quietIfSame?: boolean } = {},
  ): Promise<FleetDiff> {
    if (source === undefined) {
      return Promise.reject(
        new GatewayError(
          "config_invalid",
          "No fleet file is configured; set MCP_PROXY_CONFIG_PATH",
        ),
      );
    }
    // Read inside the queue, so an older read is never applied after a newer application.
    return this.#enqueue(async () => {
      let servers: FleetServer[];
      try {
        servers = (await source.read()).servers;
        this.#plan(servers.filter((s) => s.enabled));
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        this.#options.logger.error(`fleet file not reloaded; the running fleet stays: ${reason}`);
        this.#options.bus.publish({ type: "fleet.reload_failed", path: source.path, reason });
        this.#refused = true;
        throw error;
      }
      const same = options.quietIfSame === true && !this.#refused &&
        JSON.stringify(servers) === JSON.stringify(this.#fleet);
      this.#refused = false;
      return await this.#apply(servers, source.path, same);
    });
  }

  /** Reloads the fleet file whenever it changes (a bad file is logged and refused). */
  watch(): void {
    const path = this.#options.path;
    if (path === undefined) return;
    this.#unwatch = watchFile({
      path,
      logger: this.#options.logger.child("fleet"),
      // reload logs and reports a refused file itself. The gateway's own write of the file (an
      // accepted proposal) is applied, then seen here: a second event for the same fleet would
      // tell an operator nothing. A diff cannot tell (a disabled entry added changes no running
      // server); the fleet's data can.
      onChange: () => this.reload(undefined, { quietIfSame: true }).then(() => {}, () => {}),
    });
  }

  /** Stops watching the fleet file. */
  unwatch(): void {
    this.#unwatch?.();
  }

  /** Resolves once the application in progress (if any) has finished. */
  async settled(): Promise<void> {
    await this.#queue;
  }

  /** Forgets the fleets' registered secrets (the gateway has stopped). */
  forgetSecrets(): void {
    for (const owner of Object.values(this.#secrets)) forgetSecrets(owner);
  }

  #enqueue<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#queue.then(fn, fn);
    this.#queue = run.catch(() => {});
    return run;
  }

  async #apply(
    servers: readonly FleetServer[],
    origin?: string,
    quiet = false,
  ): Promise<FleetDiff> {
    // Stopping: never start an upstream that proxy.stop() would miss.
    if (this.#options.stopping()) return { added: [], removed: [], changed: [] };
    this.#registerSecrets(servers);
    const diff = await this.#options.proxy.reload(servers);
    this.#fleet = servers;
    const path = origin ?? this.#options.path ?? "";
    if (quiet) {
      this.#options.logger.debug(`fleet from ${path} unchanged`);
      return diff;
    }
    this.#options.logger.info(`fleet reloaded from ${path}`, { ...diff });
    this.#options.bus.publish({ type: "fleet.reloaded", path, ...diff });
    return diff;
  }

  #plan(servers: readonly FleetServer[]): void {
    for (const server of servers) this.#options.upstreams.plan(server);
  }

  /** The variables a fleet file interpolates: the resolved environment, with the data directory. */
  #env(): Record<string, string | undefined> {
    return { ...this.#options.env(), [DATA_DIR_VARIABLE]: this.#options.dataDir };
  }

  #defaults() {
    return {
      separator: this.#options.separator,
      healthIntervalSeconds: this.#options.healthIntervalSeconds,
    };
  }

  /**
   * Registers the fleet's secret values for redaction before anything can fail with them; the
   * previous fleet's stay registered too, since its upstreams may still be stopping.
   */
  #registerSecrets(servers: readonly FleetServer[]): void {
    const { fleet, previousFleet } = this.#secrets;
    registerSecrets(previousFleet, this.#fleet.flatMap(serverSecrets));
    registerSecrets(fleet, servers.flatMap(serverSecrets));
  }
}
