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
import { preflightOf } from "../plugin_api/upstream_preflight.ts";
import type { FleetServer } from "./fleet_config.ts";
import type { ResolveHost } from "../support/private_address.ts";
import { urlPort } from "../support/url_port.ts";
import { EgressGuard } from "./egress_guard.ts";
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
  /** How the egress guard looks names up; the system's resolver by default. */
  resolveHost?: ResolveHost;
  /** `MCP_SYNC_ALLOW_PRIVATE=true`: the egress guard lets private addresses through (pinned). */
  allowPrivate?: boolean;
}

/** Plans and creates upstream transports from the loaded adapter plugins. */
export class UpstreamTransports {
  #adapters = new Map<string, UpstreamAdapter>();
  #options: UpstreamTransportsOptions;
  /** Made when the first entry a registry wrote is reached over HTTP. */
  #guard: EgressGuard | undefined;

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
    const plan = adapter.plan(server, { maxMessageBytes, baseEnv });
    return { adapter, plan: this.#guarded(server) ? this.#throughGuard(plan) : plan };
  }

  /** Whether the server is reached through the egress guard: an HTTP entry a registry wrote. */
  #guarded(server: FleetServer): boolean {
    return server.origin === "sync" && server.transport !== "stdio" && server.url !== undefined;
  }

  /** The plan with its worker sent through the egress guard, which alone may resolve the name. */
  #throughGuard(plan: UpstreamPlan): UpstreamPlan {
    const guard = this.#guard ??= new EgressGuard({
      logger: this.#options.logger.child("egress"),
      ...(this.#options.resolveHost ? { resolve: this.#options.resolveHost } : {}),
      ...(this.#options.clock ? { clock: this.#options.clock } : {}),
      ...(this.#options.allowPrivate ? { allowPrivate: true } : {}),
    });
    const url = new URL(plan.start.url!);
    guard.permit(url.hostname, urlPort(url));
    const net = plan.permissions.net;
    return {
      permissions: {
        ...plan.permissions,
        net: [...(Array.isArray(net) ? net : []), guard.address],
      },
      start: { ...plan.start, egressProxy: guard.proxyUrl },
    };
  }

  /** Refuses, with egress_refused, a registry's server whose host points into the gateway's network. */
  async #preflight(server: FleetServer): Promise<void> {
    const guard = this.#guard;
    if (guard === undefined) {
      throw new GatewayError("shutting_down", `Upstream "${server.id}": the gateway is stopping`);
    }
    const verdict = await guard.check(new URL(server.url!).hostname);
    if (!("refused" in verdict)) return;
    throw new GatewayError(
      "egress_refused",
      `Upstream "${server.id}" was written by registry sync, and its url host ${verdict.refused}; ` +
        "the gateway does not connect there. Set MCP_SYNC_ALLOW_PRIVATE=true to allow it, or " +
        "delete the entry's marker line to adopt it as your own",
      { server: server.id },
    );
  }

  /** The checks before each start: the egress guard's, then the adapter's own (e.g. stdio's module graph). */
  #preflights(
    server: FleetServer,
    adapter: UpstreamAdapter,
    plan: UpstreamPlan,
  ): { preflight?: () => Promise<void> } {
    const checks: (() => Promise<void>)[] = [];
    if (this.#guarded(server)) checks.push(() => this.#preflight(server));
    const own = preflightOf(adapter);
    if (own) checks.push(() => own(server, plan));
    if (checks.length === 0) return {};
    return {
      preflight: async () => {
        for (const check of checks) await check();
      },
    };
  }

  /** Stops the egress guard, once the upstreams it served have stopped. */
  async close(): Promise<void> {
    await this.#guard?.close();
    this.#guard = undefined;
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
      ...this.#preflights(server, adapter, plan),
      ...(server.isolation === "inline" && adapter.inlineRelay
        ? { inlineRelay: adapter.inlineRelay }
        : {}),
    });
  }
}
