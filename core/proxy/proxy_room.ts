/**
 * The proxy room, built once from the settings: how each upstream is reached (the adapters'
 * sandboxed workers), the ProxyManager over the fleet, and the fleet reloader that loads and
 * applies it.
 * @module
 */
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayConfig } from "../config/config.ts";
import type { Clock } from "../support/clock.ts";
import type { Logger } from "../support/logger.ts";
import type { ResolveHost } from "../support/private_address.ts";
import { syncAllowsPrivate } from "./fleet_origin.ts";
import { FleetReloader } from "./fleet_reloader.ts";
import { ProxyManager } from "./proxy_manager.ts";
import { baseEnv, UpstreamTransports } from "./upstream_transports.ts";

/** The pieces of the proxy the gateway runs. */
export interface ProxyRoom {
  /** Takes the upstream adapter plugins once they are loaded. */
  upstreams: UpstreamTransports;
  proxy: ProxyManager;
  fleet: FleetReloader;
}

/** What the proxy room is built with besides the settings. */
export interface ProxyDeps {
  clock: Clock;
  bus: EventBus;
  logger: Logger;
  /** Whether a name is a native tool (an upstream's tool may not shadow it). */
  isNativeTool: (name: string) => boolean;
  /** The resolved environment: what fleet files interpolate and children take their base from. */
  env: Readonly<Record<string, string | undefined>>;
  /** True once the gateway stops. */
  stopping: () => boolean;
  /** How the egress guard looks names up; the system's resolver by default. */
  resolveHost?: ResolveHost | undefined;
}

/** Builds the proxy room. */
export function createProxy(
  config: GatewayConfig,
  deps: ProxyDeps,
): ProxyRoom {
  const { clock, bus, logger } = deps;
  const upstreams = new UpstreamTransports({
    maxMessageBytes: config.server.maxMessageBytes,
    baseEnv: baseEnv(deps.env),
    logger: logger.child("upstream"),
    clock,
    ...(deps.resolveHost ? { resolveHost: deps.resolveHost } : {}),
    ...(syncAllowsPrivate(deps.env) ? { allowPrivate: true } : {}),
  });
  const proxy = new ProxyManager({
    createTransport: (server) => upstreams.create(server),
    isNativeTool: deps.isNativeTool,
    separator: config.proxy.toolSeparator,
    clock,
    logger: logger.child("proxy"),
    bus,
    statusHint: config.server.transport === "stdio"
      ? () => "the gateway's log on stderr says why; it restarts failed servers by itself"
      : (id) =>
        `check GET /v1/operator/status, or restart it with POST /v1/mcp/proxy/servers/${id}/restart`,
  });
  const fleet = new FleetReloader({
    path: config.proxy.configPath,
    proxy,
    upstreams,
    env: () => deps.env,
    dataDir: config.dataDir,
    separator: config.proxy.toolSeparator,
    healthIntervalSeconds: config.proxy.healthCheckIntervalSeconds,
    logger,
    bus,
    stopping: deps.stopping,
  });
  return { upstreams, proxy, fleet };
}
