/**
 * ChildServerHandle: one upstream MCP server, its lifecycle, health checks and circuit breaker.
 *
 * Lifecycle (the seed's, exactly): STOPPED → STARTING (start) → READY (handshake done) →
 * DEGRADED (health failing intermittently) → FAILED (failing consistently); FAILED → STARTING on
 * restart (automatic with backoff, or by request); any → STOPPED on graceful shutdown.
 * @module
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import {
  type CallToolResult,
  type ClientCapabilities,
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ErrorCode,
  ListRootsRequestSchema,
  LoggingMessageNotificationSchema,
  McpError,
  type Progress,
  PromptListChangedNotificationSchema,
  ResourceListChangedNotificationSchema,
  ResourceUpdatedNotificationSchema,
  ToolListChangedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import type { Clock, TimerHandle } from "../support/clock.ts";
import { catalogsDiffer, RefreshPacer } from "./refresh_pacer.ts";
import { GatewayError } from "../support/errors.ts";
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { LogRateWindow } from "../support/log_rate_window.ts";
import type { Logger } from "../support/logger.ts";
import { redactCut } from "../support/redact.ts";
import { GATEWAY_INFO } from "../support/version.ts";
import { CircuitBreaker } from "./circuit_breaker.ts";
import { counted, failureClass, isFailedResult, isUpstreamFault } from "./failure_class.ts";
import type { FleetServer } from "./fleet_config.ts";
import { RawRequests } from "./raw_requests.ts";
import { RecentOwners } from "./recent_owners.ts";
import { compose } from "../plugin_api/stage_pipeline.ts";
import type { SessionStage } from "../plugin_api/session_stage.ts";
import { takeRelated } from "./related_request.ts";
import type {
  HandleChange,
  HandleSnapshot,
  HealthSnapshot,
  LifecycleState,
  RelayedRequest,
  UpstreamCallContext,
  UpstreamHandle,
} from "./upstream_handle.ts";
import { withTimeout } from "./with_timeout.ts";
import { DEFAULT_CATALOG_LIMITS, fetchCatalog, type UpstreamCatalog } from "./catalog_fetch.ts";

// The handle's contract types are declared beside the UpstreamHandle interface (and the catalog
// beside its fetch), so those files import nothing back from here; re-exported for its users.
export type { UpstreamCatalog } from "./catalog_fetch.ts";
export type {
  HandleChange,
  HandleSnapshot,
  HealthSnapshot,
  LifecycleState,
  RelayedRequest,
  UpstreamCallContext,
} from "./upstream_handle.ts";

/** What a handle is built from. */
export interface ChildServerHandleOptions {
  server: FleetServer;
  /** A fresh transport to the upstream for each (re)start. */
  createTransport: () => Transport;
  clock: Clock;
  logger: Logger;
  bus: EventBus;
  /**
   * Who may receive server→client traffic that the transport does not tie to one call: calls of
   * one `session` (default) or of one `tenant` (a `scope: tenant` instance serves no one else).
   */
  correlateBy?: "session" | "tenant";
  /** Names the instance in logs, events and status (`<server>[<tenant or session>]`). */
  instance?: string;
  /**
   * Where to look when the server cannot serve, as the inbound transport allows: a stdio client
   * has no HTTP routes to call. Default: the gateway's log.
   */
  statusHint?: (id: string) => string;
}

/** How many times `timeouts.call` progress notifications may stretch one call to, at most. */
export const PROGRESS_EXTENSION = 10;
/** Upstream log messages that reach no caller logged per second at most; the rest are counted. */
export const UNRELAYED_LOGS_PER_SECOND = 20;
/** The longest `data` of such a message logged, in characters (as JSON). */
const UNRELAYED_LOG_CHARS = 2000;

const EMPTY_CATALOG: UpstreamCatalog = {
  tools: [],
  resources: [],
  resourceTemplates: [],
  prompts: [],
};
const CLIENT_CAPABILITIES: ClientCapabilities = {
  sampling: {},
  elicitation: {},
  roots: { listChanged: true },
};

/** One upstream server, owned by the ProxyManager. */
export class ChildServerHandle implements UpstreamHandle {
  readonly id: string;
  readonly server: FleetServer;
  readonly breaker: CircuitBreaker;

  #options: ChildServerHandleOptions;
  #log: Logger;
  #state: LifecycleState = "STOPPED";
  #client: Client | undefined;
  #catalog: UpstreamCatalog = EMPTY_CATALOG;
  #health: HealthSnapshot = { consecutiveFailures: 0 };
  /** Calls in flight, oldest first. */
  #active: UpstreamCallContext[] = [];
  /** Tenants whose calls ended lately, whose late traffic must reach no other tenant. */
  readonly #recent: RecentOwners;
  /** The call each request sent upstream belongs to, by JSON-RPC id (for HTTP correlation). */
  #byRequest = new Map<string, UpstreamCallContext>();
  /** The call whose request is being sent right now (sends are synchronous in the SDK). */
  #sending: { ctx: UpstreamCallContext; keys: string[] } | undefined;
  #listeners = new Set<(change: HandleChange) => void>();
  #updateListeners = new Set<(uri: string) => void>();
  #healthTimer: TimerHandle | undefined;
  #restartTimer: TimerHandle | undefined;
  #restarts = 0;
  #lastError: string | undefined;
  #transport: (Transport & { diagnostics?: () => string | undefined }) | undefined;
  /** Raw requests on the current client's connection (tools/call skips the SDK's parsing). */
  #raw: RawRequests | undefined;
  #starting: Promise<void> | undefined;
  /** Bounds the upstream's log messages that reach no caller and go to the operator's log. */
  readonly #unrelayedLogs: LogRateWindow;
  /** Paces the refreshes the current connection's list_changed notifications ask for. */
  #pacer: RefreshPacer | undefined;

  constructor(options: ChildServerHandleOptions) {
    this.#options = options;
    this.server = options.server;
    this.id = options.server.id;
    this.#recent = new RecentOwners(options.clock);
    this.#log = options.logger.child(
      `upstream:${this.id}${options.instance === undefined ? "" : `[${options.instance}]`}`,
    );
    this.#unrelayedLogs = new LogRateWindow(
      UNRELAYED_LOGS_PER_SECOND,
      options.clock,
      (lines) =>
        this.#log.info(
          `${lines} more upstream log messages were not relayed and not logged: at most ` +
            `${UNRELAYED_LOGS_PER_SECOND} a second reach this log`,
        ),
    );
    this.breaker = new CircuitBreaker({
      server: this.id,
      clock: options.clock,
      failureThreshold: options.server.breaker.threshold,
      baseMs: options.server.breaker.baseMs,
      maxMs: options.server.breaker.maxMs,
      isFailure: (error) => isUpstreamFault(error, options.server.breaker.count),
      onStateChange: (from, to, info) => {
        this.#publish({
          type: "proxy.breaker",
          server: this.id,
          from,
          to,
          trips: info.trips,
          ...(info.retryAfterMs === undefined ? {} : { retryAfterMs: info.retryAfterMs }),
        });
        this.#emit("breaker");
      },
    });
  }

  /** The lifecycle state. */
  get state(): LifecycleState {
    return this.#state;
  }

  /** Whether calls may be sent: READY or DEGRADED, with the breaker not OPEN. */
  get serving(): boolean {
    return (this.#state === "READY" || this.#state === "DEGRADED") &&
      this.breaker.state !== "OPEN";
  }

  /** Whether a call is in flight. */
  get busy(): boolean {
    return this.#active.length > 0;
  }

  /** One instance serves every session: nothing to stop when one ends. */
  endSession(_sessionId: string): Promise<void> {
    return Promise.resolve();
  }

  /** What the upstream advertises (empty until READY). */
  get catalog(): UpstreamCatalog {
    return this.#catalog;
  }

  /** The upstream's `instructions` and `serverInfo`, once connected (for the scanner). */
  get serverDescription(): { instructions?: string; serverInfo?: Record<string, unknown> } {
    const instructions = this.#client?.getInstructions();
    const info = this.#client?.getServerVersion();
    return {
      ...(instructions === undefined ? {} : { instructions }),
      ...(info ? { serverInfo: { ...info } } : {}),
    };
  }

  /** The upstream's capabilities, once connected. */
  get capabilities(): ReturnType<Client["getServerCapabilities"]> {
    return this.#client?.getServerCapabilities();
  }

  /** Subscribes to state, catalog and breaker changes. */
  onChange(listener: (change: HandleChange) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** Subscribes to `notifications/resources/updated` from the upstream. */
  onResourceUpdated(listener: (uri: string) => void): () => void {
    this.#updateListeners.add(listener);
    return () => void this.#updateListeners.delete(listener);
  }

  /** Connects (STOPPED or FAILED → STARTING → READY, or FAILED with a scheduled restart). */
  start(): Promise<void> {
    if (this.#state !== "STOPPED" && this.#state !== "FAILED") {
      return this.#starting ?? Promise.resolve();
    }
    this.#restartTimer?.cancel();
    this.#starting = this.#start().finally(() => (this.#starting = undefined));
    return this.#starting;
  }

  async #start(): Promise<void> {
    this.#setState("STARTING");
    const client = new Client(
      { name: GATEWAY_INFO.name, version: GATEWAY_INFO.version },
      { capabilities: CLIENT_CAPABILITIES },
    );
    this.#wire(client);
    const { connectMs } = this.server.timeouts;
    // One deadline for the handshake and the whole catalog.
    const deadline = this.#options.clock.now() + connectMs;
    try {
      const transport = this.#options.createTransport();
      this.#transport = transport;
      // Composed once: sends are attributed to their call, the raw table takes its answers
      // before the Client, and nothing reassigns a slot of the transport afterwards.
      const raw = new RawRequests(this.#options.clock);
      const connection = compose(transport, [this.#sendTracking(), raw]);
      await withTimeout(
        client.connect(connection),
        connectMs,
        this.#options.clock,
        `Upstream "${this.id}" did not complete the MCP handshake within ${connectMs} ms; ` +
          `check its command or URL, or raise timeouts.connect`,
        { server: this.id },
      );
      this.#client = client;
      this.#raw = raw;
      this.#catalog = await this.#fetchCatalog(client, deadline);
    } catch (error) {
      this.#client = undefined;
      await client.close().catch(() => {});
      if (this.#state !== "STARTING") return; // stopped meanwhile
      this.#fail(`start failed: ${describe(error)}`);
      return;
    }
    if (this.#state !== "STARTING") {
      // Stopped while connecting.
      await client.close().catch(() => {});
      return;
    }
    this.#restarts = 0;
    this.#health = { consecutiveFailures: 0 };
    this.#setState("READY");
    this.#emit("catalog");
    this.#publish({
      type: "proxy.tools",
      server: this.id,
      count: this.#catalog.tools.length,
    });
    this.#scheduleHealth();
  }

  /** Graceful shutdown: any state → STOPPED; no restart follows. */
  async stop(): Promise<void> {
    this.#healthTimer?.cancel();
    this.#restartTimer?.cancel();
    this.#pacer?.close();
    this.#unrelayedLogs.close();
    const client = this.#client;
    this.#client = undefined;
    const hadCatalog = this.#catalog.tools.length + this.#catalog.resources.length +
        this.#catalog.prompts.length > 0;
    this.#catalog = EMPTY_CATALOG;
    if (this.#state !== "STOPPED") this.#setState("STOPPED", "stopped by the gateway");
    if (hadCatalog) this.#emit("catalog");
    await client?.close().catch(() => {});
    // Log lines kept arriving until the connection closed; the last window's timer goes too.
    this.#unrelayedLogs.close();
  }

  /** Restart by request: STOPPED, breaker reset, then start. */
  async restart(): Promise<void> {
    await this.stop();
    this.breaker.reset();
    this.#restarts = 0;
    await this.start();
  }

  /** Runs one health check now (the timer runs it every `health.interval`). */
  async checkHealth(): Promise<void> {
    const client = this.#client;
    if (!client || (this.#state !== "READY" && this.#state !== "DEGRADED")) return;
    const { clock } = this.#options;
    const started = clock.now();
    const timeoutMs = Math.min(this.server.timeouts.connectMs, this.server.health.intervalMs);
    try {
      await withTimeout(
        client.ping(),
        timeoutMs,
        clock,
        `Upstream "${this.id}" did not answer a health-check ping within ${timeoutMs} ms`,
        { server: this.id },
      );
    } catch (error) {
      if (client !== this.#client) return;
      const failures = this.#health.consecutiveFailures + 1;
      this.#health = {
        checkedAt: started,
        ok: false,
        latencyMs: clock.now() - started,
        error: describe(error),
        consecutiveFailures: failures,
      };
      this.#publish({
        type: "proxy.health",
        server: this.id,
        ok: false,
        latencyMs: this.#health.latencyMs!,
        error: this.#health.error!,
      });
      this.breaker.recordFailure();
      if (failures >= this.server.health.failedAfter) {
        await this.#disconnect(client);
        this.#fail(`${failures} consecutive health checks failed: ${describe(error)}`);
      } else if (failures >= this.server.health.degradedAfter && this.#state === "READY") {
        this.#setState("DEGRADED", `health check failed: ${describe(error)}`);
      }
      return;
    }
    if (client !== this.#client) return;
    this.#health = {
      checkedAt: started,
      ok: true,
      latencyMs: clock.now() - started,
      consecutiveFailures: 0,
    };
    this.#publish({
      type: "proxy.health",
      server: this.id,
      ok: true,
      latencyMs: this.#health.latencyMs!,
    });
    this.breaker.recordSuccess();
    if (this.#state === "DEGRADED") this.#setState("READY", "health check passed");
  }

  /** Calls a tool by its upstream name, through the breaker and with the call timeout. */
  callTool(
    name: string,
    args: Record<string, unknown>,
    ctx: UpstreamCallContext,
  ): Promise<CallToolResult> {
    // The result is relayed, not used: sent raw, so it is neither parsed nor rebuilt here.
    return this.#forward(
      `tools/call "${name}"`,
      ctx,
      (_client, options, raw) =>
        raw.request(
          "tools/call",
          traced({ name, arguments: args }, ctx),
          options,
        ) as Promise<CallToolResult>,
    );
  }

  /** Reads a resource by its upstream URI. */
  readResource(uri: string, ctx: UpstreamCallContext): ReturnType<Client["readResource"]> {
    return this.#forward(
      `resources/read "${uri}"`,
      ctx,
      (client, options) => client.readResource(traced({ uri }, ctx), options),
    );
  }

  /** Gets a prompt by its upstream name. */
  getPrompt(
    name: string,
    args: Record<string, string>,
    ctx: UpstreamCallContext,
  ): ReturnType<Client["getPrompt"]> {
    return this.#forward(
      `prompts/get "${name}"`,
      ctx,
      (client, options) => client.getPrompt(traced({ name, arguments: args }, ctx), options),
    );
  }

  /** Asks the upstream for completions. */
  complete(
    params: Parameters<Client["complete"]>[0],
    ctx: UpstreamCallContext,
  ): ReturnType<Client["complete"]> {
    return this.#forward(
      "completion/complete",
      ctx,
      (client, options) => client.complete(traced(params, ctx), options),
    );
  }

  /** Subscribes to updates of one upstream resource. */
  subscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    return this.#forward(
      `resources/subscribe "${uri}"`,
      ctx,
      (client, options) => client.subscribeResource(traced({ uri }, ctx), options),
    );
  }

  /** Ends a subscription. */
  unsubscribe(uri: string, ctx: UpstreamCallContext): Promise<unknown> {
    return this.#forward(
      `resources/unsubscribe "${uri}"`,
      ctx,
      (client, options) => client.unsubscribeResource(traced({ uri }, ctx), options),
    );
  }

  /** State, breaker, health and counts for operators. */
  snapshot(): HandleSnapshot {
    const info = this.#client?.getServerVersion();
    return {
      id: this.id,
      transport: this.server.transport,
      state: this.#state,
      breaker: this.breaker.snapshot(),
      health: { ...this.#health },
      tools: this.#catalog.tools.length,
      resources: this.#catalog.resources.length,
      prompts: this.#catalog.prompts.length,
      restarts: this.#restarts,
      ...(this.#lastError === undefined ? {} : { lastError: this.#lastError }),
      ...(info ? { serverInfo: { name: info.name, version: info.version } } : {}),
      ...(this.#options.instance === undefined ? {} : { instance: this.#options.instance }),
    };
  }

  async #forward<T>(
    what: string,
    ctx: UpstreamCallContext,
    call: (
      client: Client,
      options: {
        signal: AbortSignal;
        timeout: number;
        resetTimeoutOnProgress: boolean;
        maxTotalTimeout: number;
        onprogress?: (progress: Progress) => void;
      },
      raw: RawRequests,
    ) => Promise<T>,
  ): Promise<T> {
    const client = this.#client;
    const raw = this.#raw;
    if (!client || !raw || (this.#state !== "READY" && this.#state !== "DEGRADED")) {
      const hint = this.#options.statusHint?.(this.id) ?? "the gateway's log says why";
      throw new GatewayError(
        "upstream_error",
        this.#state === "STARTING"
          ? `Upstream "${this.id}" is still starting, so ${what} cannot be forwarded yet; ` +
            `retry in a moment (${hint})`
          : `Upstream "${this.id}" is ${this.#state}, so ${what} cannot be forwarded` +
            (this.#lastError ? ` (last error: ${this.#lastError})` : "") + `; ${hint}`,
        { server: this.id, state: this.#state },
      );
    }
    const permit = this.breaker.tryAcquire();
    if (!permit.ok) throw permit.error;
    if (ctx.admitted) {
      try {
        await ctx.admitted();
      } catch (error) {
        permit.abandon();
        throw error;
      }
    }
    const callMs = this.server.timeouts.callMs;
    this.#active.push(ctx);
    const sending = { ctx, keys: [] as string[] };
    let answered = false;
    try {
      this.#sending = sending;
      let pending: Promise<T>;
      try {
        pending = call(client, {
          signal: ctx.signal,
          timeout: callMs,
          resetTimeoutOnProgress: true,
          // Progress extends a call, but an upstream trickling it must not hold one forever.
          maxTotalTimeout: callMs * PROGRESS_EXTENSION,
          ...(ctx.onProgress ? { onprogress: ctx.onProgress } : {}),
        }, raw);
      } finally {
        this.#sending = undefined;
      }
      const result = await pending;
      answered = true;
      permit.release(!isFailedResult(result, this.server.breaker.count));
      return result;
    } catch (error) {
      if (ctx.signal.aborted) permit.abandon();
      else permit.release(!isUpstreamFault(error, this.server.breaker.count));
      throw this.#translate(error, what);
    } finally {
      const at = this.#active.lastIndexOf(ctx);
      if (at !== -1) this.#active.splice(at, 1);
      for (const key of sending.keys) this.#byRequest.delete(key);
      // A call given up on (timed out, cancelled) may run on upstream as long as a call may last.
      this.#recent.ended(
        ctx.tenant ?? ctx,
        ctx.signal.aborted || !answered ? callMs * PROGRESS_EXTENSION : callMs,
      );
    }
  }

  /**
   * The connection's first stage: records which call each outgoing request belongs to (the
   * Client's and the raw table's alike), so HTTP streams can be attributed.
   */
  #sendTracking(): SessionStage {
    return {
      send: (message, options, next) => {
        const id = (message as { id?: unknown; method?: unknown }).id;
        const sending = this.#sending;
        if (sending && (message as { method?: unknown }).method !== undefined) {
          if (typeof id === "string" || typeof id === "number") {
            const key = requestKey(id);
            sending.keys.push(key);
            this.#byRequest.set(key, sending.ctx);
          }
        }
        return next(message, options);
      },
    };
  }

  /**
   * The call a server→client message belongs to. Exact when the transport tied it to one of our
   * requests (a Streamable HTTP POST stream); otherwise only when every call in flight comes from
   * one session (or one tenant, for a `scope: tenant` instance) and no other tenant's call ended
   * within its grace (a late message may be that call's): delivering elsewhere would hand one
   * caller's traffic to another, so more than one owner is `ambiguous` and nobody gets it.
   */
  #attribute(
    related: string | number | undefined,
    wants: "relay" | "onLog",
  ): { ctx: UpstreamCallContext } | { none: string } | { ambiguous: number } {
    if (related !== undefined) {
      const ctx = this.#byRequest.get(requestKey(related));
      if (!ctx) return { none: "the request whose stream it came on is no call in progress" };
      return ctx[wants] ? { ctx } : { none: "its call has no inbound client to relay it to" };
    }
    if (this.#active.length === 0) return { none: "no call is in progress" };
    const owners = new Set(this.#active.map((ctx) => this.#ownerOf(ctx)));
    if (owners.size > 1) return { ambiguous: owners.size };
    // Late traffic is weighed by tenant: a client that opens a new session per task would
    // otherwise find its own earlier call in the way; another tenant's may not be in it.
    const others = this.#recent.othersThan(this.#active[0]!.tenant ?? this.#active[0]);
    if (others > 0) return { ambiguous: 1 + others };
    const ctx = this.#active.findLast((c) => c[wants]);
    return ctx ? { ctx } : { none: "the call in progress has no inbound client to relay it to" };
  }

  /** Who a call's server→client traffic may reach; a call without an owner shares with no one. */
  #ownerOf(ctx: UpstreamCallContext): unknown {
    const owner = this.#options.correlateBy === "tenant" ? ctx.tenant : ctx.sessionId;
    return owner ?? ctx;
  }

  #translate(error: unknown, what: string): unknown {
    if (error instanceof McpError) {
      if (error.code === ErrorCode.RequestTimeout) {
        return new GatewayError(
          "timeout",
          `Upstream "${this.id}" did not answer ${what} within ${this.server.timeouts.callMs} ms; ` +
            "raise timeouts.call for slow tools",
          { server: this.id },
        );
      }
      // Not every -32000: an upstream's own server error is its answer, passed through below.
      if (failureClass(error) === "crash") {
        return new GatewayError(
          "upstream_error",
          `Upstream "${this.id}" closed the connection during ${what}; it is restarted automatically`,
          { server: this.id },
        );
      }
      return error; // the upstream's own answer, passed through unchanged
    }
    if (error instanceof GatewayError) return error;
    return new GatewayError(
      "upstream_error",
      `Upstream "${this.id}" failed during ${what}: ${describe(error)}`,
      { server: this.id },
    );
  }

  #wire(client: Client): void {
    client.onclose = () => {
      if (client !== this.#client) return;
      this.#client = undefined;
      if (counted("crash", this.server.breaker.count)) this.breaker.recordFailure();
      this.#fail("the upstream closed the connection (it exited or crashed)");
    };
    client.onerror = (error) => this.#log.debug("transport error", { error: error.message });

    // Paced (refresh_pacer.ts): an upstream that notifies without end costs a fetch per pause.
    this.#pacer?.close();
    const pacer = this.#pacer = new RefreshPacer({
      clock: this.#options.clock,
      refresh: async () => {
        if (client !== this.#client) return false;
        const catalog = await this.#fetchCatalog(client).catch((error) => {
          this.#log.warn("could not refresh the upstream's lists", { error: describe(error) });
          return undefined;
        });
        if (!catalog || client !== this.#client) return false;
        const changed = catalogsDiffer(this.#catalog, catalog);
        this.#catalog = catalog;
        this.#emit("catalog");
        this.#publish({ type: "proxy.tools", server: this.id, count: catalog.tools.length });
        return changed;
      },
    });
    const refresh = () => pacer.request();
    client.setNotificationHandler(ToolListChangedNotificationSchema, refresh);
    client.setNotificationHandler(ResourceListChangedNotificationSchema, refresh);
    client.setNotificationHandler(PromptListChangedNotificationSchema, refresh);
    client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      for (const listener of [...this.#updateListeners]) listener(n.params.uri);
    });
    client.setNotificationHandler(LoggingMessageNotificationSchema, (n) => {
      const { related, params } = takeRelated(n.params);
      const target = this.#attribute(related, "onLog");
      if ("ctx" in target) {
        target.ctx.onLog!(params as typeof n.params);
        return;
      }
      // Not relayed: the operator's log is the only place it may go, bounded in rate and size
      // (an upstream may send as many and as large as it likes).
      if (!this.#unrelayedLogs.admit()) return;
      const data = JSON.stringify(n.params.data) ?? "";
      // Redacted before the cut, so a secret crossing it leaves no prefix behind.
      const shown = redactCut(data, UNRELAYED_LOG_CHARS);
      this.#log.info(
        "ambiguous" in target
          ? `upstream log not relayed: calls from ${target.ambiguous} sessions or tenants are in ` +
            "flight or ended lately and the upstream's transport does not say which one it belongs to"
          : `upstream log not relayed: ${target.none}`,
        {
          level: n.params.level,
          data: data.length > UNRELAYED_LOG_CHARS
            ? `${shown}… (${data.length} characters, cut)`
            : shown,
        },
      );
    });
    const relay =
      (method: RelayedRequest["method"]) =>
      (request: { params?: Record<string, unknown> }, extra: { signal: AbortSignal }) => {
        const { related, params } = takeRelated(request.params);
        const target = this.#attribute(related, "relay");
        if ("ambiguous" in target) {
          this.#log.warn(`refused ${method}: ambiguous between ${target.ambiguous} sessions`);
          throw new McpError(
            ErrorCode.InvalidRequest,
            `${method} from upstream "${this.id}" is ambiguous: calls from ${target.ambiguous} ` +
              "sessions or tenants are in flight or ended lately and its transport does not say " +
              "which one asked, so the " +
              "gateway relays it to none; give the server scope: tenant or scope: session in the " +
              "fleet file for sampling, elicitation and roots with concurrent callers",
          );
        }
        // Servers ask for roots right after initialize; outside a call the gateway has none to offer.
        if ("none" in target && method === "roots/list") return { roots: [] } as never;
        if ("none" in target) {
          throw new McpError(
            ErrorCode.InvalidRequest,
            `${method} from upstream "${this.id}" cannot be relayed: ${target.none}`,
          );
        }
        return target.ctx.relay!(
          { method, ...(params === undefined ? {} : { params }) },
          extra.signal,
        ) as never;
      };
    client.setRequestHandler(CreateMessageRequestSchema, relay("sampling/createMessage"));
    client.setRequestHandler(ElicitRequestSchema, relay("elicitation/create"));
    client.setRequestHandler(ListRootsRequestSchema, relay("roots/list"));
  }

  /** The catalog within the server's limits, by `deadline` (default: `timeouts.connect` from now). */
  #fetchCatalog(client: Client, deadline?: number): Promise<UpstreamCatalog> {
    return fetchCatalog(client, {
      server: this.id,
      limits: this.server.limits ?? DEFAULT_CATALOG_LIMITS,
      deadline: deadline ?? this.#options.clock.now() + this.server.timeouts.connectMs,
      callMs: this.server.timeouts.callMs,
      clock: this.#options.clock,
      onDrop: (kind, name, reason) => {
        // An invalid name arrives quoted with escapes already; a valid one is plain.
        this.#log.warn(`dropped ${kind} ${name.startsWith('"') ? name : `"${name}"`}: ${reason}`);
        if (kind !== "tool") return;
        this.#publish({
          type: "proxy.tool_dropped",
          server: this.id,
          tool: name,
          reason,
        });
      },
    });
  }

  async #disconnect(client: Client): Promise<void> {
    if (this.#client === client) this.#client = undefined;
    await client.close().catch(() => {});
  }

  /** → FAILED, tools hidden, restart scheduled with backoff. */
  #fail(reason: string): void {
    this.#healthTimer?.cancel();
    this.#pacer?.close();
    const diagnostics = this.#transport?.diagnostics?.();
    if (diagnostics) reason = `${reason} (${diagnostics})`;
    this.#lastError = reason;
    const hadCatalog = this.#catalog !== EMPTY_CATALOG;
    this.#catalog = EMPTY_CATALOG;
    this.#setState("FAILED", reason);
    if (hadCatalog) this.#emit("catalog");
    const { baseMs, maxMs } = this.server.breaker;
    const delay = Math.min(baseMs * 2 ** this.#restarts, maxMs);
    this.#restarts++;
    this.#log.warn(`upstream failed: ${reason}; restarting in ${Math.round(delay / 1000)} s`);
    this.#restartTimer?.cancel();
    this.#restartTimer = this.#options.clock.setTimeout(() => {
      if (this.#state === "FAILED") void this.start();
    }, delay);
  }

  #scheduleHealth(): void {
    this.#healthTimer?.cancel();
    this.#healthTimer = this.#options.clock.setTimeout(async () => {
      await this.checkHealth();
      if (this.#state === "READY" || this.#state === "DEGRADED") this.#scheduleHealth();
    }, this.server.health.intervalMs);
  }

  #setState(to: LifecycleState, reason?: string): void {
    const from = this.#state;
    if (from === to) return;
    this.#state = to;
    this.#log.info(`${from} → ${to}${reason ? `: ${reason}` : ""}`);
    this.#publish({
      type: "proxy.state",
      server: this.id,
      from,
      to,
      ...(reason === undefined ? {} : { reason }),
    });
    this.#emit("state");
  }

  /** Publishes a proxy event naming this instance of a scoped server, if it is one. */
  #publish(event: Extract<GatewayEvent, { type: `proxy.${string}` }>): void {
    const instance = this.#options.instance;
    this.#options.bus.publish(instance === undefined ? event : { ...event, instance });
  }

  #emit(change: HandleChange): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(change);
      } catch (error) {
        this.#log.warn("change listener threw", { error: describe(error) });
      }
    }
  }
}

function requestKey(id: string | number): string {
  return `${typeof id}:${id}`;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A forwarded request's params with the gateway's trace context as their `_meta` (tracing on),
 * else as they are.
 */
function traced<P extends object>(params: P, ctx: UpstreamCallContext): P {
  return ctx.trace === undefined ? params : { ...params, _meta: ctx.trace };
}
