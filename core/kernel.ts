/**
 * The kernel: wires config → plugins → services, and owns start and stop order.
 *
 * It decides nothing about protocol or policy itself; it builds the pieces, hands each plugin its
 * narrow context, and shuts everything down in reverse order.
 * @module
 */
import { createAuthenticator } from "./auth/authenticator.ts";
import { DISCOVERY_RETRY_MS, type JwtOptions } from "./auth/jwt_verifier.ts";
import { ProtectedResource } from "./auth/oauth_resource.ts";
import { createHostGuard, isLoopbackHost } from "./auth/host_guard.ts";
import { refuseNonJsonBody } from "./auth/json_body_guard.ts";
import type { TokenPayload } from "./auth/token_payload.ts";
import { type BridgeObserver, MCPServiceBridge } from "./mcp/bridge.ts";
import { type Clock, settlesWithin, systemClock } from "./support/clock.ts";
import type { GatewayConfig } from "./config/config.ts";
import { processEnvironment } from "./config/environment.ts";
import { DefinitionRegistry } from "./mcp/definition_registry.ts";
import { Engine } from "./engine/engine.ts";
import { CallPipeline, HTTP_HINTS, STDIO_HINTS } from "./mcp/call_pipeline.ts";
import { kernelInvoker } from "./engine/kernel_invoker.ts";
import { GatewayError, serializeError } from "./support/errors.ts";
import { type EventBus, InProcessEventBus } from "./bus/event_bus.ts";
import { SwitchableEventBus } from "./bus/switchable_event_bus.ts";
import type { SharedState } from "./bus/shared_state.ts";
import { SharedSessions } from "./mcp/shared_sessions.ts";
import { ANONYMOUS, HttpListener, jsonError, type MountedRoute } from "./http/http_listener.ts";
import { createLogger, type Logger } from "./support/logger.ts";
import type { HttpRoute } from "./http/http_route.ts";
import type {
  DiscoverySource,
  InboundTransport,
  PluginContext,
  PluginKind,
  PluginManifest,
  ServedSession,
  SessionInfo,
  StdioStreams,
  TransportContext,
} from "./plugin_api/mod.ts";
import { type PluginInstance, PluginInstances } from "./plugin_host/plugin_instances.ts";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, type JSONRPCMessage } from "@modelcontextprotocol/sdk/types.js";
import type { FleetConfig, FleetServer } from "./proxy/fleet_config.ts";
import {
  BUILTIN_PLUGIN_DIR,
  type LoadedPlugin,
  loadPlugins,
  pluginConfigSlice,
  type PluginFailure,
} from "./plugin_host/plugin_loader.ts";
import { approvalRoutes } from "./operator/approval_routes.ts";
import { ApprovalQueue } from "./governance/approval_queue.ts";
import { type ClusterGovernance, clusterGovernanceOf } from "./governance/cluster_governance.ts";
import { ApprovalStore } from "./governance/approval_store.ts";
import { ApprovalTokens } from "./governance/approval_tokens.ts";
import { AuditLog } from "./governance/audit_log.ts";
import { MemoryNonceStore, type NonceStore } from "./governance/nonce_store.ts";
import { DEFAULT_POLICY, loadPolicies } from "./governance/policy_loader.ts";
import type { PolicySet } from "./governance/policy.ts";
import { RateLimiter } from "./governance/rate_limiter.ts";
import { ToolGovernance } from "./governance/tool_governance.ts";
import { operatorStatusRoute } from "./operator/status_routes.ts";
import { refuseScope } from "./operator/admin_scope.ts";
import type { FleetDiff, OperatorHost } from "./operator/operator_host.ts";
import { operatorRoutes } from "./operator/routes.ts";
import { configSecrets } from "./operator/admin_redaction.ts";
import { redactedRoute } from "./operator/redacted_route.ts";
import { forgetSecrets, registerSecrets, serverSecrets } from "./support/redact.ts";
import { SessionAdmission, tooManyRequestsError } from "./mcp/session_admission.ts";
import { processStdio } from "./support/stdio_pipes.ts";
import { loadFleetConfig, parseFleetConfig } from "./proxy/fleet_config.ts";
import { DATA_DIR_VARIABLE, ensureDataDir } from "./config/data_dir.ts";
import { watchFile } from "./support/file_watcher.ts";
import { ProxyManager } from "./proxy/proxy_manager.ts";
import { baseEnv, UpstreamTransports } from "./proxy/upstream_transports.ts";
import { GatewayScanner } from "./scanner/gateway_scanner.ts";
import { systemStatusTool } from "./mcp/system_tools.ts";
import { ToolActivationManager } from "./mcp/tool_activation_manager.ts";
import { ToolDiscovery } from "./mcp/tool_discovery.ts";
import { DiscoveryService } from "./sync/discovery_service.ts";
import { ToolRegistry } from "./mcp/tool_registry.ts";
import { startTracer, type Tracing } from "./tracing/gateway_tracer.ts";
import { type ClusterNode, createClusterNode } from "./cluster/cluster_node.ts";
import { fileFleetStore, type FleetStore } from "./proxy/fleet_store.ts";

export type { FleetDiff } from "./operator/operator_host.ts";

/** What the kernel is built from; everything but `config` has a default. */
export interface KernelOptions {
  config: GatewayConfig;
  logger?: Logger;
  clock?: Clock;
  /** Streams for the stdio transport; the process's by default. */
  stdio?: StdioStreams;
  /** Plugin directories; the built-in one plus MCP_PLUGIN_PATHS by default. */
  pluginDirs?: string[];
  /**
   * The resolved environment (`.env` under the process's variables, as config.ts's
   * `loadEnvironment` reads it): what fleet files interpolate, stdio children take their base
   * variables from, and plugins and the operator routes read; the process's own by default.
   */
  env?: Record<string, string | undefined>;
}

/** What a started gateway tells the person who started it. */
export interface StartInfo {
  transport: "stdio" | "http";
  /** Base URL of the HTTP listener. */
  url?: string;
  /** The client bearer token (scope `mcp`) the kernel generated because none was configured. */
  generatedToken?: string;
  /**
   * The operator's bearer token (scope `admin`) the kernel generated because no credential
   * source grants admin; printed once, for the admin API, the dashboard and approvals.
   */
  generatedAdminToken?: string;
  /** With MCP_AUTH_OAUTH_ISSUER: where clients get tokens, for which resource, and the metadata. */
  oauth?: { issuer: string; resource: string; metadataUrl: string };
  /** Plugins that failed to load, with why. */
  pluginFailures: PluginFailure[];
  /** The fleet file and the enabled upstreams starting in the background. */
  fleet?: { path: string; servers: string[] };
}

/** How to stop: `immediate` cuts off tool calls in flight instead of waiting for them. */
export interface StopOptions {
  immediate?: boolean;
}

/**
 * One served session's requests awaiting their response, seen at its transport: what a stop
 * waits to see answered, and answers itself when it cuts calls off.
 */
interface SessionGate {
  /** Request id → method. */
  pending: Map<string | number, string>;
  send(message: JSONRPCMessage): Promise<void>;
}

/** How often the drain looks whether a second signal asked to stop at once. */
const DRAIN_SLICE_MS = 100;
/** How long answered calls get to reach the wire after the bridge has finished them. */
const FLUSH_MS = 1_000;

/** The running gateway. */
export class Kernel implements OperatorHost {
  readonly config: GatewayConfig;
  readonly logger: Logger;
  readonly clock: Clock;
  /** The resolved environment (`.env` under the process's variables): fleets, children, plugins. */
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly bus: SwitchableEventBus;
  readonly tools: ToolRegistry = new ToolRegistry();
  readonly agents: DefinitionRegistry = new DefinitionRegistry();
  readonly skills: DefinitionRegistry = new DefinitionRegistry();
  readonly workflows: DefinitionRegistry = new DefinitionRegistry();
  readonly bridge: MCPServiceBridge;
  /** The tracer, once started (absent unless `OTEL_*` configures an exporter). */
  readonly tracing: Tracing = {};
  /** Discovery kept running (MCP_DISCOVERY), once started; absent while it is off. */
  discovery: DiscoveryService | undefined;
  readonly proxy: ProxyManager;
  readonly governance: ToolGovernance;
  readonly approvals: ApprovalQueue;
  readonly audit: AuditLog;
  /** Definitions from disk, workflow_run, agent_invoke and rag_search. */
  readonly engine: Engine;
  /** The scanner inside the gateway; set at start from the scanner-rule plugins. */
  scanner: GatewayScanner | undefined;

  #options: KernelOptions;
  #instances = new PluginInstances();
  #transports: InboundTransport[] = [];
  #failures: PluginFailure[] = [];
  #listener: HttpListener | undefined;
  /** The process's stdin/stdout streams, made on first use (one reader per fd). */
  #processStdio: StdioStreams | undefined;
  #ready = false;
  #fleetReady = false;
  #fleetStarted: Promise<void> = Promise.resolve();
  #unwatch: (() => void) | undefined;
  #upstreams: UpstreamTransports;
  #nonces: NonceStore;
  /** In cluster mode, the state this replica shares with the others (JetStream KV via the bus). */
  #shared: SharedState | undefined;
  #sharedSessions: Promise<SharedSessions> | undefined;
  /** In cluster mode, this replica's shared fleet, policies and heartbeat. */
  #cluster: ClusterNode | undefined;
  #unwatchPolicies: (() => void) | undefined;
  #callObservers = new Set<BridgeObserver>();
  #stopping: Promise<void> | undefined;
  /** Set as a stop begins: new requests are refused from then on. */
  #closing = false;
  /** A second signal: cut the drain short. */
  #immediate = false;
  #gates = new Set<SessionGate>();
  #gatesIdle: (() => void)[] = [];
  #approvalStore: ApprovalStore | undefined;
  /** Cluster mode: the approvals, rate limits and pins shared with the other replicas. */
  #sharedGovernance: ClusterGovernance | undefined;
  #done = Promise.withResolvers<void>();
  #mcpEnabled: boolean;
  #fleet: readonly FleetServer[] = [];
  // Fleet applications (file watcher, admin API) run one at a time: two overlapping
  // proxy.reload calls would each see the other's half-applied members.
  #fleetQueue: Promise<unknown> = Promise.resolve();
  /** Owners of this kernel's registered secrets (core/support/redact.ts): its own, the fleet's, the last fleet's. */
  #secrets = { gateway: {}, fleet: {}, previousFleet: {} };
  #admission: SessionAdmission;

  constructor(options: KernelOptions) {
    this.#options = options;
    this.config = options.config;
    registerSecrets(this.#secrets.gateway, configSecrets(options.config));
    this.#admission = new SessionAdmission(options.config.server);
    this.logger = options.logger ??
      createLogger({ level: options.config.log.level, format: options.config.log.format });
    this.clock = options.clock ?? systemClock;
    this.env = options.env ?? processEnvironment();
    this.#mcpEnabled = options.config.server.enabled;
    this.bus = new SwitchableEventBus(new InProcessEventBus(this.logger.child("bus")));
    this.#upstreams = new UpstreamTransports({
      maxMessageBytes: options.config.server.maxMessageBytes,
      baseEnv: baseEnv(this.env),
      logger: this.logger.child("upstream"),
      clock: this.clock,
    });
    this.proxy = new ProxyManager({
      createTransport: (server) => this.#upstreams.create(server),
      isNativeTool: (name) => this.tools.has(name),
      separator: options.config.proxy.toolSeparator,
      clock: this.clock,
      logger: this.logger.child("proxy"),
      bus: this.bus,
      statusHint: options.config.server.transport === "stdio"
        ? () => "the gateway's log on stderr says why; it restarts failed servers by itself"
        : (id) =>
          `check GET /v1/operator/status, or restart it with POST /v1/mcp/proxy/servers/${id}/restart`,
    });
    const { governance } = options.config;
    this.#nonces = new MemoryNonceStore({ clock: this.clock });
    const tokens = new ApprovalTokens({
      // Without a configured secret, tokens are valid only in this process (fine for one replica).
      secret: governance.approvalSecret ?? crypto.getRandomValues(new Uint8Array(32)),
      clock: this.clock,
      ttlMs: governance.approvalTtlSeconds * 1000,
      // Indirect: NATS may replace the in-memory store at start, so replicas share single use.
      nonces: { consume: (nonce, expiresAt) => this.#consumeNonce(nonce, expiresAt) },
    });
    // Cluster mode keeps approvals in the shared bucket, not in a file of one replica.
    if (governance.approvalsPath !== undefined && !options.config.cluster) {
      this.#approvalStore = new ApprovalStore({
        path: governance.approvalsPath,
        clock: this.clock,
        logger: this.logger.child("approvals"),
        snapshot: () => ({
          approvals: this.approvals.records(),
          // A NATS store keeps its own nonces (JetStream KV); only the in-memory one needs a file.
          nonces: this.#nonces instanceof MemoryNonceStore ? this.#nonces.entries() : [],
        }),
      });
    }
    this.approvals = new ApprovalQueue({
      clock: this.clock,
      bus: this.bus,
      tokens,
      ttlMs: governance.approvalTtlSeconds * 1000,
      maxPendingPerTenant: governance.maxPendingApprovalsPerTenant,
      ...(this.replicaId === undefined ? {} : { replica: this.replicaId }),
      ...(this.#approvalStore ? { onChange: () => this.#approvalStore!.save() } : {}),
    });
    this.#sharedGovernance = clusterGovernanceOf(
      options.config,
      this,
      async () => (await this.#cluster?.replicas.list())?.length ?? 1,
    );
    this.audit = new AuditLog({
      ...(this.replicaId === undefined ? {} : { replica: this.replicaId }),
      ...(governance.auditLog === undefined ? {} : { path: governance.auditLog }),
      maxBytes: governance.auditMaxBytes,
      includeArguments: governance.auditIncludeArguments,
      bus: this.bus,
      clock: this.clock,
      logger: this.logger.child("audit"),
    });
    this.governance = new ToolGovernance({
      policies: DEFAULT_POLICY,
      tokens,
      approvals: this.approvals,
      rateLimiter: this.#sharedGovernance?.rateLimiter ?? new RateLimiter({ clock: this.clock }),
      audit: this.audit,
      clock: this.clock,
    });
    // One call path for clients (the bridge), agents and workflows (the engine) alike.
    const pipeline = new CallPipeline({
      tools: this.tools,
      proxy: this.proxy,
      governance: this.governance,
      approvals: this.approvals,
      // A stdio-only gateway has no approvals or scanner routes to point callers at.
      hints: options.config.server.transport === "stdio" ? STDIO_HINTS : HTTP_HINTS,
    });
    this.bridge = new MCPServiceBridge({
      toolRegistry: this.tools,
      agentRegistry: this.agents,
      skillRegistry: this.skills,
      workflowRegistry: this.workflows,
      logger: this.logger.child("bridge"),
      clock: this.clock,
      bus: this.bus,
      pageSize: options.config.server.pageSize,
      proxy: this.proxy,
      pipeline,
      tracing: this.tracing,
      startupWaitMs: options.config.proxy.startupWaitMs,
      approvalInBand: governance.approvalInBand,
      observer: {
        toolCall: (record) => {
          for (const observer of this.#callObservers) observer.toolCall(record);
        },
      },
      discovery: new ToolDiscovery({
        governance: this.governance,
        activation: new ToolActivationManager(),
        defaultMode: options.config.server.toolDiscoveryMode,
      }),
    });
    this.tools.register(systemStatusTool(this.bridge));
    this.engine = new Engine({
      paths: {
        agents: options.config.engine.agentsPath,
        skills: options.config.engine.skillsPath,
        workflows: options.config.engine.workflowsPath,
        knowledge: options.config.engine.knowledgePath,
      },
      defaultModel: options.config.engine.model,
      registries: { agents: this.agents, skills: this.skills, workflows: this.workflows },
      invoker: kernelInvoker({ pipeline, tools: this.tools, proxy: this.proxy }),
      models: () => this.pluginsOf("model"),
      logger: this.logger.child("engine"),
    });
    for (const tool of this.engine.tools()) this.tools.register(tool);
  }

  /** Calls `observer` for every finished tool call (metrics); returns the unsubscribe function. */
  observeCalls(observer: BridgeObserver): () => void {
    this.#callObservers.add(observer);
    return () => void this.#callObservers.delete(observer);
  }

  /** Whether the MCP interface (/mcp, /sse, /messages) serves; MCP_SERVER_ENABLED at start. */
  get mcpEnabled(): boolean {
    return this.#mcpEnabled;
  }

  /** Turns the MCP interface on or off at runtime; while off its routes answer 503. */
  setMcpEnabled(enabled: boolean): void {
    if (enabled === this.#mcpEnabled) return;
    this.#mcpEnabled = enabled;
    this.logger.warn(`MCP interface ${enabled ? "enabled" : "disabled"} by an operator`);
  }

  /** The routes mounted on the HTTP listener (empty over stdio). */
  get httpRoutes(): readonly MountedRoute[] {
    return this.#listener?.routes() ?? [];
  }

  /** The fleet as last applied, disabled servers included. */
  /** In cluster mode (MCP_CLUSTER), the state shared with the other replicas; set by start(). */
  get sharedState(): SharedState | undefined {
    return this.#shared;
  }

  /** The shared Streamable HTTP session records (cluster mode), opened by the first transport asking. */
  #openSharedSessions(): Promise<SharedSessions> {
    return this.#sharedSessions ??= SharedSessions.open(this.#shared!, {
      ttlMs: this.config.server.httpSessionIdleMs,
      replicaId: this.config.cluster!.replicaId,
      clock: this.clock,
      logger: this.logger.child("sessions"),
    });
  }

  /** Cluster mode: how often rate limits fell back to this replica's share (KV unreachable). */
  get rateLimitFallbacks(): { fallbacks: number; outages: number } | undefined {
    const stats = this.#sharedGovernance?.rateLimiter.stats();
    return stats && { fallbacks: stats.fallbacks, outages: stats.outages };
  }

  /** This replica's id (MCP_REPLICA_ID) in cluster mode; undefined for one process. */
  get replicaId(): string | undefined {
    return this.config.cluster?.replicaId;
  }

  get fleet(): readonly FleetServer[] {
    return this.#fleet;
  }

  /** Where fleet edits go: the shared bucket in cluster mode, else the fleet file (if any). */
  get fleetStore(): FleetStore | undefined {
    if (this.#cluster) return this.#cluster.config.fleetStore;
    const path = this.config.proxy.configPath;
    return path === undefined ? undefined : fileFleetStore(path);
  }

  /** Parses fleet text and checks every enabled server can be planned; throws `config_invalid`. */
  checkFleet(text: string, path: string): FleetConfig {
    const fleet = parseFleetConfig(text, path, this.#fleetEnv(), this.#fleetDefaults());
    for (const server of fleet.servers.filter((s) => s.enabled)) this.#upstreams.plan(server);
    return fleet;
  }

  /** Applies a checked fleet without a restart (one application at a time). */
  applyFleet(servers: readonly FleetServer[], origin?: string): Promise<FleetDiff> {
    return this.#enqueueFleet(() => this.#applyFleet(servers, origin));
  }

  /** Re-reads and applies the fleet file now; a bad file keeps the running fleet and throws why. */
  reloadFleet(): Promise<FleetDiff> {
    if (this.#cluster) return this.#cluster.config.reloadFleet();
    const path = this.config.proxy.configPath;
    if (path === undefined) {
      return Promise.reject(
        new GatewayError(
          "config_invalid",
          "No fleet file is configured; set MCP_PROXY_CONFIG_PATH",
        ),
      );
    }
    // Read inside the queue, so an older read is never applied after a newer application.
    return this.#enqueueFleet(async () => {
      let servers: FleetServer[];
      try {
        const fleet = await loadFleetConfig(path, this.#fleetEnv(), this.#fleetDefaults());
        servers = fleet.servers;
        for (const server of servers.filter((s) => s.enabled)) this.#upstreams.plan(server);
      } catch (error) {
        const reason = error instanceof Error ? error.message : String(error);
        this.logger.error(`fleet file not reloaded; the running fleet stays: ${reason}`);
        this.bus.publish({ type: "fleet.reload_failed", path, reason });
        throw error;
      }
      return await this.#applyFleet(servers);
    });
  }

  /** Re-reads the policy files now; a bad file keeps the policy in force and throws why. */
  async reloadPolicies(): Promise<PolicySet> {
    if (this.#cluster) {
      // The shared config reports a refused revision itself.
      await this.#cluster.config.reloadPolicies();
      return this.governance.policies;
    }
    const path = this.config.policyPath;
    let policies: PolicySet;
    try {
      policies = await loadPolicies(path);
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.logger.error(`policies not reloaded; the previous policy stays in force: ${reason}`);
      this.bus.publish({ type: "policy.reload_failed", path, reason });
      // What a tenant may see can have changed.
      this.bridge.notifyToolsChanged();
      throw error;
    }
    this.applyPolicies(policies, path);
    return policies;
  }

  /** Puts compiled policies in force (from `origin`, a path or a shared revision). */
  applyPolicies(policies: PolicySet, origin: string): void {
    this.governance.setPolicies(policies);
    this.logger.info(`policies reloaded from ${origin}`);
    this.bus.publish({ type: "policy.reloaded", path: origin, files: [...policies.files] });
    // What a tenant may see can have changed.
    this.bridge.notifyToolsChanged();
  }

  #enqueueFleet<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.#fleetQueue.then(fn, fn);
    this.#fleetQueue = run.catch(() => {});
    return run;
  }

  async #applyFleet(servers: readonly FleetServer[], origin?: string): Promise<FleetDiff> {
    // Stopping: never start an upstream that proxy.stop() would miss.
    if (this.#stopping) return { added: [], removed: [], changed: [] };
    this.#registerFleetSecrets(servers);
    const diff = await this.proxy.reload(servers);
    this.#fleet = servers;
    const path = origin ?? this.config.proxy.configPath ?? "";
    this.logger.info(`fleet reloaded from ${path}`, { ...diff });
    this.bus.publish({ type: "fleet.reloaded", path, ...diff });
    return diff;
  }

  /** Resolves when the gateway has ended on its own (stdio closed) or was stopped. */
  get done(): Promise<void> {
    return this.#done.promise;
  }

  /** Plugins that failed to load or start. */
  get pluginFailures(): readonly PluginFailure[] {
    return this.#failures;
  }

  /** Instances of loaded plugins of one kind, for the services that consume them. */
  pluginsOf<K extends PluginKind>(kind: K): readonly PluginInstance<K>[] {
    return this.#instances.of(kind);
  }

  /** Loads plugins, then starts the selected transport. */
  async start(): Promise<StartInfo> {
    try {
      return await this.#start();
    } catch (error) {
      // What did start (the bus connection, plugins, watchers) must not outlive a failed start.
      await this.stop().catch((stopError) =>
        this.logger.warn("cleanup after a failed start failed", { error: String(stopError) })
      );
      throw error;
    }
  }

  async #start(): Promise<StartInfo> {
    const { server } = this.config;
    const auth = server.transport === "http" ? await this.#prepareAuth() : undefined;
    const tracer = await startTracer(this.config.tracing, this.logger.child("tracing"), this.clock);
    if (tracer) this.tracing.tracer = tracer;

    const dirs = this.#options.pluginDirs ?? [BUILTIN_PLUGIN_DIR, ...this.config.pluginPaths];
    const { plugins, failures } = await loadPlugins(dirs);
    this.#failures.push(...failures);
    for (const failure of failures) this.#reportFailure(failure);
    await this.#selectBus(plugins);
    if (this.#shared) {
      this.#cluster = createClusterNode({
        config: this.config,
        state: this.#shared,
        target: this,
        bus: this.bus,
        logger: this.logger,
        clock: this.clock,
        fleetSummary: () => fleetSummary(this.proxy.status()),
      });
    }
    // The demo (and any fleet naming ${MCP_DATA_DIR}) writes there: it must exist before they start.
    if (this.config.demo || this.config.proxy.configPath) await ensureDataDir(this.config.dataDir);
    await this.#loadApprovals();
    await this.#loadPolicies();
    await this.engine.load();
    for (const plugin of plugins) {
      if (plugin.manifest.kind !== "bus") await this.#instantiate(plugin);
    }

    for (const adapter of this.pluginsOf("upstream")) this.#upstreams.add(adapter);
    const fleet = await this.#loadFleet();

    const info: StartInfo = { transport: server.transport, pluginFailures: this.#failures };
    if (this.config.proxy.configPath) {
      info.fleet = {
        path: this.config.proxy.configPath,
        servers: fleet.filter((s) => s.enabled).map((s) => s.id),
      };
    }
    if (server.transport === "stdio") {
      await this.#startStdio();
    } else {
      const resource = server.oauth && auth!.authenticator
        ? new ProtectedResource(server.oauth)
        : undefined;
      info.url = await this.#startHttp(auth!.authenticator, auth!.anonymous, resource);
      if (auth!.generatedToken) info.generatedToken = auth!.generatedToken;
      if (auth!.generatedAdminToken) info.generatedAdminToken = auth!.generatedAdminToken;
      if (resource) {
        const { issuer, resource: url } = server.oauth!;
        info.oauth = { issuer, resource: url, metadataUrl: resource.metadataUrl };
      }
    }
    this.#ready = true;
    this.scanner = new GatewayScanner({
      proxy: this.proxy,
      rules: this.pluginsOf("scanner-rule").flatMap((r) => (Array.isArray(r) ? r : [])),
      subscribe: (handler) => this.bus.subscribeLocal(handler),
      bus: this.bus,
      logger: this.logger.child("scanner"),
      blockAt: this.config.scannerBlock,
      approvalAt: this.config.scannerApproval,
      // The same plugin folders: the worker loads the same scanner rules.
      pluginDirs: this.#options.pluginDirs ?? [BUILTIN_PLUGIN_DIR, ...this.config.pluginPaths],
      ...(this.#sharedGovernance?.pins ? { shared: this.#sharedGovernance.pins } : {}),
    });
    // Upstreams start in the background: clients connect at once and get list_changed as each
    // upstream becomes READY; /readyz reports ready when every upstream has started or failed.
    this.#fleetStarted = this.proxy.start(fleet).then(() => void (this.#fleetReady = true));
    if (this.#cluster) {
      await this.#cluster.started(info.url);
    } else {
      if (this.config.proxy.configPath) this.#watchFleet(this.config.proxy.configPath);
      this.#watchPolicies();
    }
    this.engine.watch();
    this.#startDiscovery();
    this.bus.publish({
      type: "gateway.started",
      transport: server.transport,
      ...(info.url ? { url: info.url } : {}),
    });
    return info;
  }

  /**
   * Stops: refuses new requests at once, waits up to MCP_SHUTDOWN_GRACE_MS for tool calls in
   * flight (cut off with an error after that, or at once with `immediate`), then closes in reverse
   * order: transports, sessions, listener, upstreams, plugins, bus. Safe to call again; a second
   * call with `immediate` cuts a drain in progress short.
   */
  stop(options: StopOptions = {}): Promise<void> {
    if (options.immediate) this.#immediate = true;
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#ready = false;
    this.#closing = true;
    this.#listener?.beginStopping();
    this.bus.publish({ type: "gateway.stopping" });
    // The heartbeat says draining while calls finish (bounded by the shared state's own timeouts).
    const draining = this.#cluster?.draining();
    try {
      await this.#drain();
      await Promise.allSettled(this.#transports.map((t) => t.close()));
      // Calls answered and streams closed: the cluster stops listing this replica (before the
      // bus plugin closes the connection the heartbeat is deleted over).
      await draining;
      await this.#cluster?.stop();
      this.#unwatch?.();
      this.#unwatchPolicies?.();
      this.engine.stop();
      // Before the plugins close: a source must not be mid-list when its plugin goes.
      await this.discovery?.stop();
      await this.#fleetQueue;
      await this.bridge.close();
      await this.#listener?.close();
      await this.#fleetStarted.catch(() => {});
      await this.proxy.stop();
      this.scanner?.close();
      this.#sharedGovernance?.close();
      for (const { value, plugin } of this.#instances.all()) {
        const closable = value as { close?: () => unknown } | undefined;
        if (typeof closable?.close !== "function") continue;
        // Running transports were closed first, above; close() is not required to be idempotent.
        if (this.#transports.some((t) => t === value)) continue;
        try {
          await closable.close();
        } catch (error) {
          this.logger.warn("plugin failed to close", {
            plugin: plugin.manifest.name,
            error: String(error),
          });
        }
      }
      await this.#approvalStore?.flush();
      await this.audit.close();
      await this.tracing.tracer?.shutdown().catch((error) =>
        this.logger.warn("trace export at shutdown failed", { error: String(error) })
      );
      (await this.#sharedSessions?.catch(() => undefined))?.close();
      await this.#shared?.close();
      await this.bus.close();
    } finally {
      for (const owner of Object.values(this.#secrets)) forgetSecrets(owner);
      this.#done.resolve();
    }
  }

  /**
   * Waits for tool calls in flight, up to the grace (or until a second signal), then answers
   * those still running with a `shutting_down` error so their clients are not left guessing.
   */
  async #drain(): Promise<void> {
    const graceMs = this.config.server.shutdownGraceMs;
    const inFlight = this.bridge.inFlightCalls;
    if (inFlight === 0) {
      // Other requests (a prompt or resource read forwarded upstream) are not waited for.
      const cut = await this.#cutOff(graceMs);
      this.logger.info(
        "stopping: no tool calls in flight" +
          (cut > 0 ? `; ${cut} other request(s) answered with shutting_down` : ""),
      );
      return;
    }
    this.logger.warn(
      `stopping: waiting up to ${graceMs} ms for ${inFlight} tool call(s) in flight ` +
        "(MCP_SHUTDOWN_GRACE_MS); send the signal again to stop at once",
    );
    const deadline = performance.now() + graceMs;
    // In slices, so a second signal takes effect at once and no timer outlives the stop.
    while (!this.#immediate) {
      const left = deadline - performance.now();
      if (left <= 0) break;
      if ((await this.bridge.drain(Math.min(left, DRAIN_SLICE_MS))).drained) break;
    }
    // The bridge counts a call done when its handler returns; its answer is sent just after.
    if (this.bridge.inFlightCalls === 0) await this.#answersSent(FLUSH_MS);
    const running = this.bridge.inFlightCalls;
    const cut = await this.#cutOff(graceMs);
    const how = this.#immediate ? "stopped at once by a second signal" : `grace of ${graceMs} ms`;
    if (running === 0) {
      this.logger.info(`stopping: all ${inFlight} tool call(s) in flight finished`);
    } else {
      this.logger.warn(
        `stopping: ${inFlight - running} tool call(s) finished, ${running} cut off (${how}); ` +
          `${cut} request(s) answered with shutting_down`,
      );
    }
  }

  /** Resolves once every served session has answered its tool calls, or after `timeoutMs`. */
  async #answersSent(timeoutMs: number): Promise<void> {
    if (!this.#callsPending()) return;
    const idle = new Promise<void>((resolve) => this.#gatesIdle.push(resolve));
    await settlesWithin(this.clock, timeoutMs, idle);
  }

  #callsPending(): boolean {
    for (const gate of this.#gates) {
      for (const method of gate.pending.values()) if (method === "tools/call") return true;
    }
    return false;
  }

  /** Answers every request still waiting with a `shutting_down` error; returns how many. */
  async #cutOff(graceMs: number): Promise<number> {
    const sends: Promise<void>[] = [];
    for (const gate of this.#gates) {
      for (const [id, method] of gate.pending) {
        sends.push(
          gate.send({
            jsonrpc: "2.0",
            id,
            error: {
              code: ErrorCode.ConnectionClosed,
              message: `The gateway shut down before this ${method} finished` +
                (this.#immediate
                  ? " (stopped at once by a second signal)"
                  : ` (still running after the ${graceMs} ms grace, MCP_SHUTDOWN_GRACE_MS)`) +
                "; it may or may not have taken effect upstream: check before retrying",
              data: { code: "shutting_down", graceMs },
            },
          }).catch(() => {}),
        );
      }
    }
    // Written before the transports close; bounded, since a client that stopped reading
    // (a full stdout pipe) must not hold the stop.
    await settlesWithin(this.clock, FLUSH_MS, Promise.all(sends));
    return sends.length;
  }

  /**
   * Serves a session through the bridge, watching its requests at the transport: while the
   * gateway stops, new requests are refused with `shutting_down` (stdio has no listener to refuse
   * them at), and requests still unanswered can be answered when a drain gives up on them.
   */
  async #serveGated(transport: Transport, info: SessionInfo): Promise<ServedSession> {
    // Admitted before the bridge builds a server for it; throws session_limit when full.
    const release = this.#admission.admit(info.auth.tenant);
    let served: ServedSession;
    try {
      served = await this.bridge.serve(transport, info);
    } catch (error) {
      release();
      throw error;
    }
    const pending = new Map<string | number, string>();
    const maxInFlight = this.config.server.maxInFlightPerSession;
    let refusing = false;
    const send = transport.send.bind(transport);
    const gate: SessionGate = { pending, send: (message) => transport.send(message) };
    const deliver = transport.onmessage;
    transport.onmessage = (message, extra) => {
      const m = message as { id?: unknown; method?: unknown; params?: { requestId?: unknown } };
      if (typeof m.method === "string" && (typeof m.id === "string" || typeof m.id === "number")) {
        if (this.#closing) {
          void send({
            jsonrpc: "2.0",
            id: m.id,
            error: {
              code: ErrorCode.ConnectionClosed,
              message:
                "The gateway is shutting down and takes no new requests; retry once it is back",
              data: { code: "shutting_down" },
            },
          }).catch(() => {});
          return;
        }
        // Every transport's requests enter here: one bound on what a session may keep waiting.
        if (pending.size >= maxInFlight) {
          if (!refusing) {
            this.logger.warn(
              `refused a request past MCP_MAX_IN_FLIGHT_PER_SESSION (${maxInFlight}): the session ` +
                "keeps that many unanswered (further refusals on this session are not logged)",
              {
                session: info.sessionId ?? transport.sessionId,
                tenant: info.auth.tenant,
                transport: info.transport,
              },
            );
          }
          refusing = true;
          void send({ jsonrpc: "2.0", id: m.id, error: tooManyRequestsError(maxInFlight) })
            .catch(() => {});
          return;
        }
        pending.set(m.id, m.method);
      } else if (m.method === "notifications/cancelled") {
        // A cancelled request gets no answer: it must not hold a drain.
        const id = m.params?.requestId;
        if (typeof id === "string" || typeof id === "number") this.#answered(pending, id);
      }
      deliver?.(message, extra);
    };
    transport.send = async (message, options) => {
      const m = message as { id?: unknown; method?: unknown };
      try {
        return await send(message, options);
      } finally {
        // Only once the transport has taken the answer: closing it sooner can lose it.
        if (m.method === undefined && (typeof m.id === "string" || typeof m.id === "number")) {
          this.#answered(pending, m.id);
        }
      }
    };
    const closed = transport.onclose;
    transport.onclose = () => {
      release();
      this.#gates.delete(gate);
      pending.clear();
      this.#wakeIfAnswered();
      closed?.();
    };
    this.#gates.add(gate);
    return served;
  }

  #answered(pending: Map<string | number, string>, id: string | number): void {
    if (pending.delete(id) && this.#gatesIdle.length > 0) this.#wakeIfAnswered();
  }

  #wakeIfAnswered(): void {
    if (this.#callsPending()) return;
    for (const wake of this.#gatesIdle.splice(0)) wake();
  }

  /** Redeems a token's nonce; with an approvals file, the use is on disk before the call runs. */
  async #consumeNonce(nonce: string, expiresAt: number): Promise<boolean> {
    const first = await this.#nonces.consume(nonce, expiresAt);
    // Fails closed: a use that cannot be recorded could be replayed after a restart.
    if (first && this.#approvalStore && this.#nonces instanceof MemoryNonceStore) {
      await this.#approvalStore.save();
    }
    return first;
  }

  /** Restores the approvals and used nonces the last run kept; a corrupt file is set aside. */
  async #loadApprovals(): Promise<void> {
    const store = this.#approvalStore;
    if (!store) {
      if (this.#sharedGovernance) return; // Shared by the replicas (agent33_approvals), not a file.
      this.logger.info(
        "approvals are kept in memory only: a restart forgets pending requests and used tokens " +
          "(set MCP_APPROVALS_PATH, or configure a fleet file, to keep them)",
      );
      return;
    }
    const loaded = await store.load();
    let approvals = loaded.approvals;
    if (this.config.governance.approvalSecret === undefined) {
      // The tokens were signed with the last process's random key: none of them can verify now.
      const before = approvals.length;
      approvals = approvals.filter((r) => r.status !== "approved");
      if (approvals.length < before) {
        this.logger.warn(
          `${
            before - approvals.length
          } approved request(s) from before the restart were dropped: ` +
            "MCP_APPROVAL_SECRET is not set, so their tokens were signed with a key that died with " +
            "the last process; callers must request approval again (set MCP_APPROVAL_SECRET to keep " +
            "tokens valid across restarts)",
        );
      }
    }
    const restored = this.approvals.restore(approvals);
    if (this.#nonces instanceof MemoryNonceStore) {
      this.#nonces = new MemoryNonceStore({ clock: this.clock, initial: loaded.nonces });
    }
    const pending = this.approvals.list({ status: "pending" }).length;
    this.logger.info(
      `approvals from ${store.path}: ${restored} request(s) (${pending} pending), ` +
        `${loaded.nonces.length} redeemed token(s) remembered, ${loaded.dropped} expired dropped`,
    );
  }

  /** Loads the policy files; a bad file stops start-up with every problem and its line. */
  async #loadPolicies(): Promise<void> {
    const path = this.config.policyPath;
    const policies = this.#cluster
      ? await this.#cluster.config.startPolicies() ?? DEFAULT_POLICY
      : await loadPolicies(path);
    this.governance.setPolicies(policies);
    if (policies.files.length === 0) {
      this.logger.warn(
        `no policy files at "${path}": every tool is allowed and destructive calls need approval (MCP_POLICY_PATH)`,
      );
    } else {
      this.logger.info(`policies: ${policies.files.join(", ")}`);
    }
  }

  #watchPolicies(): void {
    const path = this.config.policyPath;
    this.#unwatchPolicies = watchFile({
      path,
      logger: this.logger.child("policy"),
      // reloadPolicies logs and reports a refused file itself.
      onChange: () => this.reloadPolicies().then(() => {}, () => {}),
    });
  }

  /** Resolves when every upstream has become READY or FAILED once. */
  get fleetStarted(): Promise<void> {
    return this.#fleetStarted;
  }

  /** Loads the fleet file (if configured) and checks every enabled server can be planned. */
  async #loadFleet(): Promise<FleetServer[]> {
    const shared = await this.#cluster?.config.startFleet();
    const path = shared?.origin ?? this.config.proxy.configPath;
    if (path === undefined) return [];
    const fleet = shared
      ? parseFleetConfig(shared.text, path, this.#fleetEnv(), this.#fleetDefaults())
      : await loadFleetConfig(path, this.#fleetEnv(), this.#fleetDefaults());
    this.#registerFleetSecrets(fleet.servers);
    const servers = fleet.servers.filter((s) => s.enabled);
    for (const server of servers) this.#upstreams.plan(server);
    this.#fleet = fleet.servers;
    this.logger.info(
      `fleet ${path}: ${servers.map((s) => s.id).join(", ") || "no enabled servers"}`,
    );
    return fleet.servers;
  }

  /** The variables a fleet file interpolates: the resolved environment, with the data directory. */
  #fleetEnv(): Record<string, string | undefined> {
    return { ...this.env, [DATA_DIR_VARIABLE]: this.config.dataDir };
  }

  /**
   * Registers the fleet's secret values for redaction before anything can fail with them; the
   * previous fleet's stay registered too, since its upstreams may still be stopping.
   */
  #registerFleetSecrets(servers: readonly FleetServer[]): void {
    const { fleet, previousFleet } = this.#secrets;
    registerSecrets(previousFleet, this.#fleet.flatMap(serverSecrets));
    registerSecrets(fleet, servers.flatMap(serverSecrets));
  }

  #fleetDefaults() {
    return {
      separator: this.config.proxy.toolSeparator,
      healthIntervalSeconds: this.config.proxy.healthCheckIntervalSeconds,
    };
  }

  #watchFleet(path: string): void {
    this.#unwatch = watchFile({
      path,
      logger: this.logger.child("fleet"),
      // reloadFleet logs and reports a refused file itself.
      onChange: () => this.reloadFleet().then(() => {}, () => {}),
    });
  }

  async #prepareAuth() {
    const { server } = this.config;
    const loopback = isLoopbackHost(server.host);
    if (server.authDisabled) {
      if (!loopback) {
        throw new GatewayError(
          "config_invalid",
          `--no-auth is only allowed on a loopback host, but MCP_SERVER_HOST is "${server.host}"; ` +
            "bind 127.0.0.1 or configure MCP_SERVER_AUTH_TOKEN",
        );
      }
      const admin = server.authDisabledAdmin;
      this.logger.warn(
        admin
          ? "AUTHENTICATION IS DISABLED (--no-auth --no-auth-admin): any local process can call every tool, decide approvals and change the gateway (add servers, i.e. run commands). Use only for development."
          : "AUTHENTICATION IS DISABLED (--no-auth): any local process can call every tool; the admin API and approval decisions are refused (add --no-auth-admin to open them). Use only for development and conformance tests.",
      );
      const anonymous: TokenPayload = {
        ...ANONYMOUS,
        scopes: admin ? ["mcp", "admin"] : ["mcp"],
      };
      return { authenticator: null, anonymous };
    }
    let generatedToken: string | undefined;
    let generatedAdminToken: string | undefined;
    let staticToken = server.authToken;
    let adminToken = server.adminToken;
    const jwt = server.jwt.secret !== undefined || server.jwt.jwksUrl !== undefined ||
      server.oauth !== undefined;
    const configured = staticToken !== undefined || adminToken !== undefined ||
      server.tokensFile !== undefined || jwt;
    if (!configured) {
      if (!loopback) {
        throw new GatewayError(
          "config_invalid",
          `Refusing to serve on non-loopback host "${server.host}" without authentication; ` +
            "set MCP_SERVER_AUTH_TOKEN, MCP_AUTH_TOKENS_FILE or MCP_AUTH_JWT_SECRET/MCP_AUTH_JWKS_URL",
        );
      }
      generatedToken = randomToken();
      staticToken = generatedToken;
    }
    // The client token holds `mcp` only; the operator's is a second token, so the caller that
    // asks for an approval is never the one that can grant it.
    const staticScopes = generatedToken ? ["mcp"] : server.authScopes;
    const adminSource = adminToken !== undefined || server.tokensFile !== undefined || jwt ||
      staticScopes.includes("admin");
    if (!adminSource) {
      generatedAdminToken = randomToken();
      adminToken = generatedAdminToken;
    }
    const generated = [generatedToken, generatedAdminToken].filter((t) => t !== undefined);
    if (generated.length) {
      registerSecrets(this.#secrets.gateway, [...configSecrets(this.config), ...generated]);
    }
    const authenticator = await createAuthenticator({
      ...(staticToken === undefined ? {} : { staticToken, staticScopes }),
      ...(adminToken === undefined ? {} : { adminToken }),
      ...(server.tokensFile === undefined ? {} : { tokensFile: server.tokensFile }),
      ...(server.oauth ? { jwt: oauthJwtOptions(server) } : {}),
      ...(!server.oauth && (server.jwt.secret || server.jwt.jwksUrl) ? { jwt: server.jwt } : {}),
      now: () => this.clock.now(),
      onDiscovery: (outcome) => {
        const log = this.logger.child("oauth");
        if (outcome.ok) log.info(`keys of ${outcome.issuer} come from ${outcome.jwksUri}`);
        else {
          log.warn(
            `${outcome.error}; its tokens are refused until it can be read, tried again on a ` +
              `token after ${DISCOVERY_RETRY_MS / 1000} s`,
          );
        }
      },
    });
    return { authenticator, generatedToken, generatedAdminToken, anonymous: undefined };
  }

  /** With NATS_URL set, the `bus-nats` plugin replaces the in-process bus; failing that is fatal. */
  async #selectBus(plugins: LoadedPlugin[]): Promise<void> {
    const url = this.config.natsUrl;
    if (url === undefined) return;
    const plugin = plugins.find((p) => p.manifest.kind === "bus" && p.manifest.name === "bus-nats");
    if (!plugin) {
      throw new GatewayError(
        "plugin_invalid",
        "NATS_URL is set but the bus-nats plugin did not load; see the plugin errors above or unset NATS_URL",
      );
    }
    const bus = await this.#instantiate(plugin, { url });
    if (!bus) {
      throw new GatewayError(
        "plugin_invalid",
        `Cannot use NATS at ${url}; see the error above, or unset NATS_URL to use the in-process bus`,
      );
    }
    await this.bus.use(bus as EventBus);
    if (this.config.cluster) {
      const withState = bus as { sharedState?: (o: { replicas: number }) => Promise<SharedState> };
      if (typeof withState.sharedState !== "function") {
        throw new GatewayError(
          "plugin_invalid",
          "MCP_CLUSTER=true needs a bus plugin with shared state (bus-nats); unset MCP_CLUSTER",
        );
      }
      this.#shared = await withState.sharedState({ replicas: this.config.cluster.kvReplicas });
      await this.#sharedGovernance?.open(this.#shared);
    }
    // Approval tokens are single-use across replicas when the bus can keep nonces (JetStream KV).
    const shared = bus as {
      nonceStore?: (o: { ttlMs: number; replicas?: number }) => Promise<NonceStore>;
    };
    if (typeof shared.nonceStore === "function") {
      this.#nonces = await shared.nonceStore({
        ttlMs: this.config.governance.approvalTtlSeconds * 1000,
        ...(this.config.cluster ? { replicas: this.config.cluster.kvReplicas } : {}),
      });
    }
  }

  async #instantiate(plugin: LoadedPlugin, extra: Record<string, unknown> = {}): Promise<unknown> {
    const manifest: PluginManifest = plugin.manifest;
    const logger = this.logger.child(manifest.name);
    const slice = { ...pluginConfigSlice(manifest.name, this.config.pluginEnv), ...extra };
    let config: Record<string, unknown> = slice;
    if (manifest.configSchema) {
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
          `invalid config slice (MCP_PLUGIN_${
            manifest.name.toUpperCase().replaceAll("-", "_")
          }_*): ${String((parsed.error as Error | undefined)?.message ?? parsed.error)}`,
        );
        return;
      }
      // `data` is optional in the schema contract; without it the plugin gets the raw slice.
      config = (parsed.data ?? slice) as Record<string, unknown>;
    }
    const base: PluginContext = {
      logger,
      clock: this.clock,
      env: this.env,
      config,
      bus: this.bus,
      tools: { register: (tool) => this.tools.register(tool) },
      models: () => this.pluginsOf("model"),
    };
    let value: unknown;
    try {
      switch (manifest.kind) {
        case "transport": {
          const stdio = () => this.#options.stdio ?? (this.#processStdio ??= processStdio());
          const ctx: TransportContext = {
            ...base,
            settings: {
              maxMessageBytes: this.config.server.maxMessageBytes,
              httpResponseMode: this.config.server.httpResponseMode,
              stdioTenant: this.config.server.stdioTenant,
              httpSessionIdleMs: this.config.server.httpSessionIdleMs,
              sseMaxQueueBytes: this.config.server.sseMaxQueueBytes,
              sseMaxQueueMessages: this.config.server.sseMaxQueueMessages,
              maxSessions: this.config.server.maxSessions,
            },
            serve: (transport, session) => this.#serveGated(transport, session),
            ...(this.#shared ? { openSharedSessions: () => this.#openSharedSessions() } : {}),
            // A getter: only the stdio transport takes the process's streams, and only once.
            get stdio() {
              return stdio();
            },
          };
          value = this.#instances.add("transport", plugin, await manifest.create(ctx));
          break;
        }
        case "bus":
          value = this.#instances.add("bus", plugin, await manifest.create(base));
          break;
        case "upstream":
          value = this.#instances.add("upstream", plugin, await manifest.create(base));
          break;
        case "discovery":
          value = this.#instances.add("discovery", plugin, await manifest.create(base));
          break;
        case "scanner-rule":
          value = this.#instances.add("scanner-rule", plugin, await manifest.create(base));
          break;
        case "model":
          value = this.#instances.add("model", plugin, await manifest.create(base));
          break;
        default: {
          const unreachable: never = manifest;
          throw new Error(`unknown plugin kind ${(unreachable as PluginManifest).kind}`);
        }
      }
    } catch (error) {
      this.#fail(plugin, `factory threw: ${serializeError(error).message}`);
      return undefined;
    }
    this.bus.publish({
      type: "plugin.loaded",
      plugin: manifest.name,
      kind: manifest.kind,
      path: plugin.path,
    });
    logger.debug("plugin loaded", { kind: manifest.kind, path: plugin.path });
    return value;
  }

  /** Starts the discovery sources MCP_DISCOVERY names; a name with no loaded plugin stops the start. */
  #startDiscovery(): void {
    const wanted = this.config.discovery.sources;
    if (wanted.length === 0) return;
    const loaded = this.#instances.all()
      .filter(({ plugin }) => plugin.manifest.kind === "discovery")
      .map(({ plugin, value }) => ({
        plugin: plugin.manifest.name,
        source: value as DiscoverySource,
      }));
    const unknown = wanted.filter((name) =>
      !loaded.some((l) => l.plugin === name || l.plugin === `discovery-${name}`)
    );
    if (unknown.length > 0) {
      throw new GatewayError(
        "config_invalid",
        `MCP_DISCOVERY names ${unknown.join(", ")}, but no such discovery plugin is loaded; ` +
          `loaded: ${
            loaded.map((l) => l.plugin).join(", ") || "none"
          } (see the plugin errors above)`,
      );
    }
    const sources = loaded.filter((l) =>
      wanted.some((name) => l.plugin === name || l.plugin === `discovery-${name}`)
    );
    const logger = this.logger.child("discovery");
    this.discovery = new DiscoveryService(sources, {
      clock: this.clock,
      timeoutMs: this.config.discovery.timeoutMs,
      intervalMs: this.config.discovery.intervalMs,
      onEvent: (event) => {
        if (event.type === "discovery.source_error") {
          logger.warn(event.reason, event.retryInMs > 0 ? { retryInMs: event.retryInMs } : {});
        } else logger.info(event.type, { plugin: event.plugin, id: event.id });
        this.bus.publish(event);
      },
    });
    this.discovery.start();
    logger.info(`discovery running: ${this.discovery.plugins.join(", ")}`);
  }

  #fail(plugin: LoadedPlugin, reason: string): void {
    const failure = { path: plugin.path, reason };
    this.#failures.push(failure);
    this.#reportFailure(failure);
  }

  #reportFailure(failure: PluginFailure): void {
    this.logger.error(`plugin skipped: ${failure.path}: ${failure.reason}`);
    this.bus.publish({ type: "plugin.failed", path: failure.path, reason: failure.reason });
  }

  #transportsOf(mode: "stdio" | "http"): InboundTransport[] {
    return this.#instances.of("transport").filter((t) => t.mode === mode);
  }

  async #startStdio(): Promise<void> {
    if (!this.config.server.enabled) {
      throw new GatewayError(
        "config_invalid",
        "MCP_SERVER_ENABLED=false leaves nothing to serve over stdio; enable it or use --transport http",
      );
    }
    const transport = this.#transportsOf("stdio")[0];
    if (!transport?.start) {
      throw new GatewayError(
        "plugin_invalid",
        "No stdio transport plugin loaded; see the plugin errors above",
      );
    }
    this.#transports.push(transport);
    await transport.start();
    transport.done?.then(() => this.stop());
  }

  async #startHttp(
    authenticator: Awaited<ReturnType<typeof createAuthenticator>> | null,
    anonymous: TokenPayload | undefined,
    protectedResource?: ProtectedResource,
  ) {
    const { server } = this.config;
    const listener = new HttpListener({
      host: server.host,
      port: server.port,
      authenticator,
      ...(anonymous ? { anonymous } : {}),
      ...(protectedResource ? { protectedResource } : {}),
      hostGuard: (port) =>
        createHostGuard({
          host: server.host,
          port,
          ...(server.allowedHosts.length ? { allowedHosts: server.allowedHosts } : {}),
          ...(server.allowedOrigins.length ? { allowedOrigins: server.allowedOrigins } : {}),
        }),
      logger: this.logger.child("http"),
      maxBodyBytes: server.maxMessageBytes,
      bodyTimeoutMs: server.bodyTimeoutMs,
      readiness: () => ({
        ready: this.#ready && this.#fleetReady,
        detail: {
          plugins: this.#instances.all().length,
          pluginFailures: this.#failures.length,
          sessions: this.bridge.sessionCount,
          toolCallsInFlight: this.bridge.inFlightCalls,
          upstreams: this.proxy.handles().map((h) => ({ id: h.id, state: h.state })),
        },
      }),
    });
    // Operator routes answer through the redacting sink; the MCP routes redact at their errors.
    listener.mount(redactedRoute(jsonBodiesOnly(approvalRoutes(this.approvals))));
    listener.mount(redactedRoute(jsonBodiesOnly(operatorStatusRoute({
      system: () => this.bridge.status(),
      servers: () =>
        this.proxy.status().map((s) => ({
          ...s,
          findings: this.scanner?.findingsFor(s.id) ?? [],
          quarantined: this.scanner?.quarantinedTools(s.id) ?? [],
        })),
      ready: () => this.#ready && this.#fleetReady,
      replicaId: () => this.replicaId,
      ...(this.#cluster ? { cluster: () => this.#cluster!.status() } : {}),
    }))));
    for (const route of operatorRoutes(this)) listener.mount(redactedRoute(jsonBodiesOnly(route)));
    // Mounted even when disabled at start: an operator can enable the interface at runtime.
    for (const transport of this.#transportsOf("http")) {
      this.#transports.push(transport);
      for (const route of transport.routes ?? []) {
        listener.mount(mcpScopeOnly(this.#whileMcpEnabled(route)));
      }
    }
    this.#listener = listener;
    const addr = await listener.start();
    const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    return `http://${host}:${addr.port}`;
  }

  /** The route, answering 503 while an operator has the MCP interface turned off. */
  #whileMcpEnabled(route: HttpRoute): HttpRoute {
    return {
      ...route,
      handle: (request, auth, body) => {
        if (this.#mcpEnabled) return route.handle(request, auth, body);
        return Promise.resolve(jsonError(
          503,
          "mcp_disabled",
          `The MCP interface (${route.path}) is turned off by an operator; ` +
            "turn it on with POST /v1/mcp/enable (scope admin)",
          { "Retry-After": "60" },
        ));
      },
    };
  }
}

/** The route, answering 415 to a state-changing request whose body is not JSON. */
function jsonBodiesOnly(route: HttpRoute): HttpRoute {
  if (route.public) return route;
  return {
    ...route,
    handle: (request, auth, body) =>
      Promise.resolve(refuseNonJsonBody(request) ?? route.handle(request, auth, body)),
  };
}

/** The MCP transport route, answering 403 to a caller without scope `mcp` (or `admin`). */
function mcpScopeOnly(route: HttpRoute): HttpRoute {
  return {
    ...route,
    handle: (request, auth, body) =>
      Promise.resolve(
        refuseScope(auth, "mcp", `the MCP endpoint ${route.path}`) ??
          route.handle(request, auth, body),
      ),
  };
}

/** How many upstreams run, and how many are up or failed, for the replica's heartbeat. */
function fleetSummary(servers: readonly { state: string }[]) {
  const count = (states: string[]) => servers.filter((s) => states.includes(s.state)).length;
  return {
    servers: servers.length,
    ready: count(["READY", "DEGRADED"]),
    failed: count(["FAILED"]),
  };
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(32));
  return btoa(String.fromCharCode(...bytes)).replaceAll("+", "-").replaceAll("/", "_")
    .replaceAll("=", "");
}

/** The JWT verification of an OAuth protected resource: the issuer's keys, its resource as `aud`. */
function oauthJwtOptions(server: GatewayConfig["server"]): JwtOptions {
  const oauth = server.oauth!;
  return {
    discoverKeys: true,
    issuer: oauth.issuer,
    audience: oauth.audience,
    scopeMap: oauth.scopeMap,
    scopeClaims: oauth.scopeClaims,
    tenantClaim: oauth.tenantClaim,
    ...(oauth.tenantFallback === undefined ? {} : { tenantFallback: oauth.tenantFallback }),
    ...(server.jwt.clockToleranceSeconds === undefined
      ? {}
      : { clockToleranceSeconds: server.jwt.clockToleranceSeconds }),
    ...(server.jwt.jwksCooldownSeconds === undefined
      ? {}
      : { jwksCooldownSeconds: server.jwt.jwksCooldownSeconds }),
  };
}
