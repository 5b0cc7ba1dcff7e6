/**
 * Builds the transport to each upstream: the adapter plugin for its fleet transport plans a
 * sandboxed worker, and a WorkerTransport relays JSON-RPC through it.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type { UpstreamAdapter, UpstreamPlan } from "../plugin_api/mod.ts";
import type { FleetServer } from "./fleet_config.ts";
import { WorkerTransport } from "./worker_transport.ts";

/** Environment variables a child process gets from the gateway (plus its configured `env`). */
export const BASE_ENV_NAMES = [
  "PATH",
  "HOME",
  "USER",
  "LANG",
  "TMPDIR",
  "DENO_DIR",
  "XDG_CACHE_HOME",
  "NPM_CONFIG_REGISTRY",
  // Certificates and proxies, so a child can still fetch packages behind a corporate TLS proxy.
  "DENO_CERT",
  "NODE_EXTRA_CA_CERTS",
  "DENO_TLS_CA_STORE",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "HTTPS_PROXY",
  "HTTP_PROXY",
  "NO_PROXY",
  "https_proxy",
  "http_proxy",
  "no_proxy",
  "SystemRoot",
  "LOCALAPPDATA",
] as const;

/** The base environment of every stdio child: the {@link BASE_ENV_NAMES} of the gateway's `env`. */
export function baseEnv(env: Readonly<Record<string, string | undefined>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of BASE_ENV_NAMES) {
    const value = env[name];
    if (value !== undefined) out[name] = value;
  }
  return out;
}

/** What every upstream transport is built with. */
export interface UpstreamTransportsOptions {
  maxMessageBytes: number;
  baseEnv: Record<string, string>;
  logger: Logger;
  /** Times each worker's start and stop; the real clock by default. */
  clock?: Clock;
}

/** Plans and creates upstream transports from the loaded adapter plugins. */
export class UpstreamTransports {
  #adapters = new Map<string, UpstreamAdapter>();
  #options: UpstreamTransportsOptions;

  constructor(options: UpstreamTransportsOptions) {
    this.#options = options;
  }

  /** Registers an adapter; the first one for a transport wins. */
  add(adapter: UpstreamAdapter): void {
    if (!this.#adapters.has(adapter.transport)) this.#adapters.set(adapter.transport, adapter);
  }

  /** The sandbox plan of a server; `config_invalid` names the server when it cannot be planned. */
  plan(server: FleetServer): { adapter: UpstreamAdapter; plan: UpstreamPlan } {
    const adapter = this.#adapters.get(server.transport);
    if (!adapter) {
      throw new GatewayError(
        "config_invalid",
        `Upstream "${server.id}" uses transport "${server.transport}", but no upstream plugin provides it; ` +
          `loaded: ${[...this.#adapters.keys()].join(", ") || "none"}`,
        { server: server.id },
      );
    }
    const { maxMessageBytes, baseEnv } = this.#options;
    return { adapter, plan: adapter.plan(server, { maxMessageBytes, baseEnv }) };
  }

  /** A new worker-backed transport to the server. */
  create(server: FleetServer): Transport {
    const { adapter, plan } = this.plan(server);
    if (server.isolation === "inline" && !adapter.inlineRelay) {
      throw new GatewayError(
        "config_invalid",
        `Upstream "${server.id}" asks for isolation: inline, but the ${server.transport} adapter ` +
          "only relays through a worker; remove isolation",
        { server: server.id },
      );
    }
    return new WorkerTransport({
      workerUrl: adapter.workerUrl,
      plan,
      serverId: server.id,
      logger: this.#options.logger,
      startTimeoutMs: server.timeouts.connectMs,
      ...(this.#options.clock ? { clock: this.#options.clock } : {}),
      ...(server.isolation === "inline" && adapter.inlineRelay
        ? { inlineRelay: adapter.inlineRelay }
        : {}),
    });
  }
}
