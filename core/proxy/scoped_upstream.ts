/**
 * ScopedUpstream: a fleet server with `scope: tenant` or `scope: session`, run as one instance
 * (a ChildServerHandle of its own: process or connection, health checks, breaker) per tenant or
 * per inbound session, so an instance only ever serves one caller's traffic and its server→client
 * requests and log lines have exactly one place to go.
 *
 * The catalog (what is listed, and the server's state in lists) comes from a template instance,
 * started with the entry's own `env` and `headers` and never given a call; callers' instances are
 * started on their first call: a tenant's with its `tenants.<name>` credentials over the entry's,
 * a session's with its caller's bearer token when `auth: passthrough`. Tenant instances run until
 * the fleet changes (the least recently used idle one makes room when `max_instances` are
 * running); session instances stop when their session ends.
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type {
  ChildServerHandle,
  HandleChange,
  HandleSnapshot,
  LifecycleState,
  UpstreamCallContext,
  UpstreamCatalog,
} from "./child_server_handle.ts";
import type { CircuitBreaker } from "./circuit_breaker.ts";
import { DEFAULT_MAX_INSTANCES, type FleetServer } from "./fleet_config.ts";
import type { UpstreamHandle } from "./upstream_handle.ts";

/** What a pool is built from. */
export interface ScopedUpstreamOptions {
  server: FleetServer & { scope: "tenant" | "session" };
  /** A handle for one instance; `instance` is its tenant or session, undefined for the template. */
  createHandle: (server: FleetServer, instance: string | undefined) => ChildServerHandle;
  logger: Logger;
}

interface Instance {
  handle: ChildServerHandle;
  lastUsed: number;
}

/** One scoped fleet server and its instances. */
export class ScopedUpstream implements UpstreamHandle {
  readonly id: string;
  readonly server: FleetServer & { scope: "tenant" | "session" };
  #options: ScopedUpstreamOptions;
  #template: ChildServerHandle;
  #instances = new Map<string, Instance>();
  #uses = 0;
  #stopped = false;
  /** Instances being stopped (session ended, evicted): stop() waits for them too. */
  #stopping = new Set<Promise<void>>();

  constructor(options: ScopedUpstreamOptions) {
    this.#options = options;
    this.server = options.server;
    this.id = options.server.id;
    this.#template = options.createHandle(options.server, undefined);
  }

  get breaker(): CircuitBreaker {
    return this.#template.breaker;
  }

  get state(): LifecycleState {
    return this.#template.state;
  }

  get serving(): boolean {
    return this.#template.serving;
  }

  get catalog(): UpstreamCatalog {
    return this.#template.catalog;
  }

  get serverDescription(): { instructions?: string; serverInfo?: Record<string, unknown> } {
    return this.#template.serverDescription;
  }

  get capabilities(): ReturnType<Client["getServerCapabilities"]> {
    return this.#template.capabilities;
  }

  /** The template's changes: they are what the lists show. */
  onChange(listener: (change: HandleChange) => void): () => void {
    return this.#template.onChange(listener);
  }

  /**
   * Never called: the bridge fans resource updates out by URI to every session subscribed to it,
   * which would tell one tenant about another's instance, so scoped servers relay none.
   */
  onResourceUpdated(_listener: (uri: string) => void): () => void {
    return () => {};
  }

  /** Starts the template; callers' instances start on their first call. */
  start(): Promise<void> {
    this.#stopped = false;
    return this.#template.start();
  }

  /** Stops the template and every instance. */
  async stop(): Promise<void> {
    this.#stopped = true;
    const instances = [...this.#instances.values()];
    this.#instances.clear();
    await Promise.all([
      this.#template.stop(),
      ...instances.map((i) => i.handle.stop()),
      ...this.#stopping,
    ]);
  }

  /** Restarts the template; the instances stop and start again on their next call. */
  async restart(): Promise<void> {
    const instances = [...this.#instances.values()];
    this.#instances.clear();
    await Promise.all(instances.map((i) => this.#retire(i)));
    await this.#template.restart();
  }

  async checkHealth(): Promise<void> {
    await Promise.all([
      this.#template.checkHealth(),
      ...[...this.#instances.values()].map((i) => i.handle.checkHealth()),
    ]);
  }

  async callTool(
    name: string,
    args: Record<string, unknown>,
    ctx: UpstreamCallContext,
  ): Promise<CallToolResult> {
    return await (await this.#instanceFor(ctx)).callTool(name, args, ctx);
  }

  async readResource(uri: string, ctx: UpstreamCallContext): ReturnType<Client["readResource"]> {
    return await (await this.#instanceFor(ctx)).readResource(uri, ctx);
  }

  async getPrompt(
    name: string,
    args: Record<string, string>,
    ctx: UpstreamCallContext,
  ): ReturnType<Client["getPrompt"]> {
    return await (await this.#instanceFor(ctx)).getPrompt(name, args, ctx);
  }

  async complete(
    params: Parameters<Client["complete"]>[0],
    ctx: UpstreamCallContext,
  ): ReturnType<Client["complete"]> {
    return await (await this.#instanceFor(ctx)).complete(params, ctx);
  }

  async subscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    return await (await this.#instanceFor(ctx)).subscribe(uri, ctx);
  }

  async unsubscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    return await (await this.#instanceFor(ctx)).unsubscribe(uri, ctx);
  }

  /** The template's snapshot, with the scope and every instance's own. */
  snapshot(): HandleSnapshot {
    return {
      ...this.#template.snapshot(),
      scope: this.server.scope,
      instances: [...this.#instances.values()].map((i) => i.handle.snapshot()),
    };
  }

  /** Stops a session's instance when its session ends. */
  async endSession(sessionId: string): Promise<void> {
    if (this.server.scope !== "session") return;
    const instance = this.#instances.get(sessionId);
    if (!instance) return;
    this.#instances.delete(sessionId);
    await this.#retire(instance);
  }

  /** Stops an instance that left the pool, tracked until it has. */
  async #retire(instance: Instance): Promise<void> {
    const stopping = instance.handle.stop();
    this.#stopping.add(stopping);
    try {
      await stopping;
    } finally {
      this.#stopping.delete(stopping);
    }
  }

  /** The caller's instance, started (or made room for) when it has none yet. */
  async #instanceFor(ctx: UpstreamCallContext): Promise<ChildServerHandle> {
    const key = this.#keyOf(ctx);
    let instance = this.#instances.get(key);
    if (!instance) {
      if (this.#stopped) {
        throw new GatewayError(
          "upstream_error",
          `Upstream "${this.id}" is STOPPED, so no instance can be started for this call`,
          { server: this.id },
        );
      }
      this.#makeRoom();
      const server = this.#serverFor(key, ctx);
      instance = { handle: this.#options.createHandle(server, key), lastUsed: 0 };
      this.#instances.set(key, instance);
      this.#options.logger.info(`starting instance of upstream "${this.id}"`, {
        server: this.id,
        scope: this.server.scope,
        ...(this.server.scope === "tenant" ? { tenant: key } : { session: key }),
      });
    }
    instance.lastUsed = ++this.#uses;
    await instance.handle.start();
    return instance.handle;
  }

  /** Whose instance a call uses: its tenant's or its session's. */
  #keyOf(ctx: UpstreamCallContext): string {
    const scope = this.server.scope;
    const key = scope === "tenant" ? ctx.tenant : ctx.sessionId;
    if (key === undefined) {
      throw new GatewayError(
        "not_allowed",
        `Upstream "${this.id}" has scope: ${scope}, so each call runs on its ${scope}'s own ` +
          `instance, but this call comes from no ${scope} (an agent or workflow run outside a ` +
          "session); call it from a client session, or give it scope: shared",
        { server: this.id, scope },
      );
    }
    if (scope === "tenant" && this.server.tenants && Object.keys(this.server.tenants).length > 0) {
      if (!Object.hasOwn(this.server.tenants, key)) {
        throw new GatewayError(
          "not_allowed",
          `Upstream "${this.id}" has credentials per tenant and none for tenant "${key}"; ` +
            `add tenants.${key} to its fleet entry (line ${this.server.line})`,
          { server: this.id, tenant: key },
        );
      }
    }
    return key;
  }

  /** The fleet entry one instance runs: the tenant's credentials, or the caller's bearer. */
  #serverFor(key: string, ctx: UpstreamCallContext): FleetServer {
    const server = this.server;
    if (server.scope === "tenant") {
      const own = server.tenants?.[key];
      return own
        ? {
          ...server,
          env: { ...server.env, ...own.env },
          headers: { ...server.headers, ...own.headers },
        }
        : server;
    }
    if (server.auth !== "passthrough") return server;
    if (ctx.bearerRefused !== undefined) {
      throw new GatewayError("not_allowed", ctx.bearerRefused, { server: this.id });
    }
    if (ctx.bearer === undefined) {
      throw new GatewayError(
        "not_allowed",
        `Upstream "${this.id}" forwards its caller's bearer token (auth: passthrough), but this ` +
          "session has none (it was opened without an Authorization: Bearer header)",
        { server: this.id },
      );
    }
    return { ...server, headers: { ...server.headers, Authorization: `Bearer ${ctx.bearer}` } };
  }

  /** At `max_instances`: a tenant pool stops its least recently used idle instance, else refuses. */
  #makeRoom(): void {
    const max = this.server.maxInstances ?? DEFAULT_MAX_INSTANCES;
    if (this.#instances.size < max) return;
    if (this.server.scope === "tenant") {
      const idle = [...this.#instances.entries()]
        .filter(([, i]) => !i.handle.busy)
        .sort(([, a], [, b]) => a.lastUsed - b.lastUsed)[0];
      if (idle) {
        this.#instances.delete(idle[0]);
        void this.#retire(idle[1]);
        return;
      }
    }
    throw new GatewayError(
      "rate_limited",
      `Upstream "${this.id}" already runs ${max} instances (max_instances, one per ` +
        `${this.server.scope}${this.server.scope === "tenant" ? ", all busy" : ""}); ` +
        `try again when a ${this.server.scope} ends, or raise max_instances in its fleet entry ` +
        `(line ${this.server.line})`,
      { server: this.id, maxInstances: max },
    );
  }
}
