/**
 * ScopedUpstream: a fleet server with `scope: tenant` or `scope: session`, run as one instance
 * (a ChildServerHandle of its own: process or connection, health checks, breaker) per tenant or
 * per inbound session, so an instance only ever serves one caller's traffic and its server→client
 * requests and log lines have exactly one place to go.
 *
 * The catalog (what is listed, and the server's state in lists) comes from a template instance,
 * started with the entry's own `env` and `headers` and never given a call; callers' instances are
 * started on their first call: a tenant's with its `tenants.<name>` credentials over the entry's,
 * a session's with its caller's bearer token when `auth: passthrough`. An instance stops after
 * `idle_timeout` with no call in flight and no subscription (a session's also when its session
 * ends; the least recently used idle tenant instance makes room when `max_instances` are running).
 *
 * An instance's `resources/updated` notifications go only to its own tenant's or session's
 * subscribers (an audience on each update), never to every session subscribed to the URI.
 * @module
 */
import type { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { sha256, toHex } from "../auth/digest.ts";
import type { Clock, TimerHandle } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { Logger } from "../support/logger.ts";
import type {
  ChildServerHandle,
  HandleChange,
  HandleSnapshot,
  LifecycleState,
  UpstreamCallContext,
  UpstreamCatalog,
} from "./child_server_handle.ts";
import type { CircuitBreaker } from "./circuit_breaker.ts";
import {
  DEFAULT_IDLE_TIMEOUT_SECONDS,
  DEFAULT_MAX_INSTANCES,
  type FleetServer,
} from "./fleet_config.ts";
import type { ResourceAudience, UpstreamHandle } from "./upstream_handle.ts";

/** What a pool is built from. */
export interface ScopedUpstreamOptions {
  server: FleetServer & { scope: "tenant" | "session" };
  /**
   * A handle for one instance; `instance` names it in logs, events and status (the tenant, or
   * `session-` and a digest of the session id, never the id), undefined for the template.
   */
  createHandle: (server: FleetServer, instance: string | undefined) => ChildServerHandle;
  /** Times the idle timeout. */
  clock: Clock;
  logger: Logger;
}

interface Instance {
  handle: ChildServerHandle;
  lastUsed: number;
  /** Requests in flight through this pool (not the template's health checks). */
  inFlight: number;
  /** Subscriptions through this instance: `<session>\0<upstream uri>`. */
  subscriptions: Set<string>;
  idleTimer?: TimerHandle;
  offUpdate: () => void;
}

/**
 * How a session's instance is named where operators look: a short digest, because a session id
 * is bearer-like (it alone lets an HTTP client continue its session).
 */
export function sessionTag(sessionId: string): string {
  return `session-${toHex(sha256(sessionId)).slice(0, 12)}`;
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
  #updateListeners = new Set<(uri: string, audience: ResourceAudience) => void>();

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

  /** An instance's resource updates, each with the tenant or session it may reach. */
  onResourceUpdated(listener: (uri: string, audience: ResourceAudience) => void): () => void {
    this.#updateListeners.add(listener);
    return () => void this.#updateListeners.delete(listener);
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
      ...instances.map((i) => this.#retire(i)),
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
    return await this.#use(ctx, (handle) => handle.callTool(name, args, ctx));
  }

  async readResource(uri: string, ctx: UpstreamCallContext): ReturnType<Client["readResource"]> {
    return await this.#use(ctx, (handle) => handle.readResource(uri, ctx));
  }

  async getPrompt(
    name: string,
    args: Record<string, string>,
    ctx: UpstreamCallContext,
  ): ReturnType<Client["getPrompt"]> {
    return await this.#use(ctx, (handle) => handle.getPrompt(name, args, ctx));
  }

  async complete(
    params: Parameters<Client["complete"]>[0],
    ctx: UpstreamCallContext,
  ): ReturnType<Client["complete"]> {
    return await this.#use(ctx, (handle) => handle.complete(params, ctx));
  }

  /** Subscribes through the caller's instance, which then does not idle out until unsubscribed. */
  async subscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    return await this.#use(ctx, async (handle, instance) => {
      const result = await handle.subscribe(uri, ctx);
      instance.subscriptions.add(`${ctx.sessionId ?? ""}\u0000${uri}`);
      return result;
    });
  }

  /**
   * Unsubscribes the caller's instance, if it runs (one stopped meanwhile holds nothing). The
   * bridge sends this only once no session of the instance's tenant or session still wants it.
   */
  async unsubscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    const instance = this.#instances.get(this.#keyOf(ctx));
    if (!instance) return {};
    for (const key of [...instance.subscriptions]) {
      if (key.endsWith(`\u0000${uri}`)) instance.subscriptions.delete(key);
    }
    return await this.#use(ctx, (handle) => handle.unsubscribe(uri, ctx));
  }

  /** The template's snapshot, with the scope and every instance's own. */
  snapshot(): HandleSnapshot {
    return {
      ...this.#template.snapshot(),
      scope: this.server.scope,
      instances: [...this.#instances.values()].map((i) => i.handle.snapshot()),
    };
  }

  /**
   * Stops a session's instance when its session ends; a tenant instance forgets the session's
   * subscriptions, so one left open by a closed session does not keep it from idling out.
   */
  async endSession(sessionId: string): Promise<void> {
    if (this.server.scope !== "session") {
      for (const instance of this.#instances.values()) {
        const before = instance.subscriptions.size;
        for (const key of [...instance.subscriptions]) {
          if (key.startsWith(`${sessionId}\u0000`)) instance.subscriptions.delete(key);
        }
        if (instance.subscriptions.size < before) this.#armIdle(instance);
      }
      return;
    }
    const instance = this.#instances.get(sessionId);
    if (!instance) return;
    this.#instances.delete(sessionId);
    await this.#retire(instance);
  }

  /** Runs one request on the caller's instance; the idle timeout counts from its end. */
  async #use<T>(
    ctx: UpstreamCallContext,
    run: (handle: ChildServerHandle, instance: Instance) => Promise<T>,
  ): Promise<T> {
    const instance = this.#instanceFor(ctx);
    instance.inFlight++;
    instance.idleTimer?.cancel();
    try {
      await instance.handle.start();
      return await run(instance.handle, instance);
    } finally {
      instance.inFlight--;
      this.#armIdle(instance);
    }
  }

  /** Stops the instance after `idle_timeout` unless a request or a subscription keeps it. */
  #armIdle(instance: Instance): void {
    instance.idleTimer?.cancel();
    instance.idleTimer = undefined;
    if (instance.inFlight > 0 || instance.subscriptions.size > 0) return;
    const idleMs = this.server.idleTimeoutMs ?? DEFAULT_IDLE_TIMEOUT_SECONDS * 1000;
    instance.idleTimer = this.#options.clock.setTimeout(() => {
      instance.idleTimer = undefined;
      const entry = [...this.#instances.entries()].find(([, i]) => i === instance);
      if (!entry || instance.inFlight > 0 || instance.subscriptions.size > 0) return;
      this.#instances.delete(entry[0]);
      this.#options.logger.info(`stopping idle instance of upstream "${this.id}"`, {
        server: this.id,
        instance: this.#labelOf(entry[0]),
        idleMs,
      });
      void this.#retire(instance);
    }, idleMs);
  }

  /** Stops an instance that left the pool, tracked until it has. */
  async #retire(instance: Instance): Promise<void> {
    instance.idleTimer?.cancel();
    instance.offUpdate();
    const stopping = instance.handle.stop();
    this.#stopping.add(stopping);
    try {
      await stopping;
    } finally {
      this.#stopping.delete(stopping);
    }
  }

  /** The caller's instance, made (or made room for) when it has none yet; not yet started. */
  #instanceFor(ctx: UpstreamCallContext): Instance {
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
      const handle = this.#options.createHandle(server, this.#labelOf(key));
      const audience: ResourceAudience = this.server.scope === "tenant"
        ? { tenant: key }
        : { sessionId: key };
      const offUpdate = handle.onResourceUpdated((uri) => {
        for (const listener of [...this.#updateListeners]) listener(uri, audience);
      });
      instance = { handle, lastUsed: 0, inFlight: 0, subscriptions: new Set(), offUpdate };
      this.#instances.set(key, instance);
      this.#options.logger.info(`starting instance of upstream "${this.id}"`, {
        server: this.id,
        scope: this.server.scope,
        instance: this.#labelOf(key),
      });
    }
    instance.lastUsed = ++this.#uses;
    return instance;
  }

  /** What names an instance in logs, events and status. */
  #labelOf(key: string): string {
    return this.server.scope === "tenant" ? key : sessionTag(key);
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

  /**
   * At `max_instances`: a tenant pool stops its least recently used idle instance (one without
   * subscriptions first), else refuses.
   */
  #makeRoom(): void {
    const max = this.server.maxInstances ?? DEFAULT_MAX_INSTANCES;
    if (this.#instances.size < max) return;
    if (this.server.scope === "tenant") {
      const idle = [...this.#instances.entries()]
        .filter(([, i]) => !i.handle.busy && i.inFlight === 0)
        // One holding no subscription goes first: stopping a subscribed one ends its updates.
        .sort(([, a], [, b]) =>
          Number(a.subscriptions.size > 0) - Number(b.subscriptions.size > 0) ||
          a.lastUsed - b.lastUsed
        )[0];
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
