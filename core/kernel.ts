/**
 * The kernel: wires config → plugins → services, and owns start and stop order.
 *
 * It decides nothing about protocol or policy itself, and writes no JSON-RPC: it builds the rooms'
 * pieces (the session gate and pipeline, the fleet and policy reloaders, approvals, the bus, the
 * plugins), hands each plugin its narrow context, starts them in order and stops them in reverse.
 * @module
 */
import { prepareAuth, type PreparedAuth } from "./auth/gateway_auth.ts";
import type { BridgeObserver, MCPServiceBridge } from "./mcp/bridge.ts";
import { createMcp, type McpRoom } from "./mcp/mcp_room.ts";
import { type Clock, systemClock } from "./support/clock.ts";
import type { GatewayConfig } from "./config/config.ts";
import { processEnvironment } from "./config/environment.ts";
import { DefinitionRegistry } from "./mcp/definition_registry.ts";
import type { Engine } from "./engine/engine.ts";
import { createEngine } from "./engine/engine_room.ts";
import { InProcessEventBus } from "./bus/event_bus.ts";
import { selectBus } from "./bus/bus_selection.ts";
import { SwitchableEventBus } from "./bus/switchable_event_bus.ts";
import type { SharedState } from "./bus/shared_state.ts";
import { ClusterMembership, fleetSummary } from "./cluster/cluster_membership.ts";
import type { FleetStore } from "./proxy/fleet_store.ts";
import type { HttpListener, MountedRoute } from "./http/http_listener.ts";
import { createLogger, type Logger } from "./support/logger.ts";
import type { InboundTransport, PluginKind, StdioStreams } from "./plugin_api/mod.ts";
import type { PluginInstance } from "./plugin_host/plugin_instances.ts";
import { PluginStarter } from "./plugin_host/plugin_starter.ts";
import type { FleetConfig, FleetServer } from "./proxy/fleet_config.ts";
import {
  BUILTIN_PLUGIN_DIR,
  loadPlugins,
  type PluginFailure,
} from "./plugin_host/plugin_loader.ts";
import type { ApprovalQueue } from "./governance/approval_queue.ts";
import type { PolicySet } from "./governance/policy.ts";
import type { AuditLog } from "./governance/audit_log.ts";
import { createGovernance, type GovernanceRoom } from "./governance/governance_room.ts";
import type { ToolGovernance } from "./governance/tool_governance.ts";
import type { FleetDiff, OperatorHost } from "./operator/operator_host.ts";
import { configSecrets } from "./operator/admin_redaction.ts";
import { startGatewayHttp } from "./operator/gateway_routes.ts";
import { forgetSecrets, registerSecrets } from "./support/redact.ts";
import { ensureDataDir } from "./config/data_dir.ts";
import type { ProxyManager } from "./proxy/proxy_manager.ts";
import { createProxy, type ProxyDeps, type ProxyRoom } from "./proxy/proxy_room.ts";
import type { GatewayScanner } from "./scanner/gateway_scanner.ts";
import { createScanner } from "./scanner/scanner_room.ts";
import { systemStatusTool } from "./mcp/system_tools.ts";
import type { DiscoveryService } from "./sync/discovery_service.ts";
import { startDiscovery } from "./sync/discovery_startup.ts";
import { ToolRegistry } from "./mcp/tool_registry.ts";
import { startTracer, type Tracing } from "./tracing/gateway_tracer.ts";

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
  /** How the egress guard looks up the names of registry-written upstreams; the system's resolver by default. */
  resolveHost?: ProxyDeps["resolveHost"];
}

/** What a started gateway tells the person who started it. */
export interface StartInfo {
  transport: "stdio" | "http";
  /** Base URL of the HTTP listener. */
  url?: string;
  /** The client bearer token (scope `mcp`) the kernel generated because none was configured. */
  generatedToken?: string;
  /** The operator's token (scope `admin`) generated because no source grants admin; shown once. */
  generatedAdminToken?: string;
  /** With MCP_AUTH_OAUTH_ISSUER: where clients get tokens, for which resource, and the metadata. */
  oauth?: { issuer: string; resource: string; metadataUrl: string };
  /** Plugins that failed to load, with why. */
  pluginFailures: PluginFailure[];
  /** Where the fleet came from (its file, or the shared revision) and the enabled upstreams starting. */
  fleet?: { path: string; servers: string[] };
}

/** How to stop: `immediate` cuts off tool calls in flight instead of waiting for them. */
export interface StopOptions {
  immediate?: boolean;
}

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
  #plugins: PluginStarter;
  #transports: InboundTransport[] = [];
  #listener: HttpListener | undefined;
  #ready = false;
  #fleetReady = false;
  #fleetStarted: Promise<void> = Promise.resolve();
  /** The upstreams' transports, the proxy and the fleet reloader. */
  #proxyRoom: ProxyRoom;
  /** Approvals, the audit log, governance and the policy reloader. */
  #governanceRoom: GovernanceRoom;
  /** In cluster mode: the shared state, fleet, policies, heartbeat and session records. */
  #cluster: ClusterMembership | undefined;
  /** The call path, the bridge, the session gate (admission, draining, cut-off) and pipeline. */
  #mcp: McpRoom;
  #stopping: Promise<void> | undefined;
  #done = Promise.withResolvers<void>();
  #mcpEnabled: boolean;
  /** Owner of the gateway's own registered secrets (core/support/redact.ts). */
  #secrets = {};

  constructor(options: KernelOptions) {
    this.#options = options;
    const { config } = options;
    this.config = config;
    registerSecrets(this.#secrets, configSecrets(config));
    this.logger = options.logger ??
      createLogger({ level: config.log.level, format: config.log.format });
    this.clock = options.clock ?? systemClock;
    this.env = options.env ?? processEnvironment();
    this.#mcpEnabled = config.server.enabled;
    this.bus = new SwitchableEventBus(new InProcessEventBus(this.logger.child("bus")));
    this.#proxyRoom = createProxy(config, {
      clock: this.clock,
      bus: this.bus,
      logger: this.logger,
      isNativeTool: (name) => this.tools.has(name),
      env: this.env,
      stopping: () => this.#stopping !== undefined,
      resolveHost: options.resolveHost,
    });
    this.proxy = this.#proxyRoom.proxy;
    const room = this.#governanceRoom = createGovernance(config, {
      clock: this.clock,
      bus: this.bus,
      logger: this.logger,
      onPolicyReload: () => this.bridge.notifyToolsChanged(),
      countReplicas: async () => (await this.#cluster?.node.replicas.list())?.length ?? 1,
    });
    this.approvals = room.approvals.queue;
    this.audit = room.audit;
    this.governance = room.governance;
    const mcp = createMcp(config, {
      registries: {
        tools: this.tools,
        agents: this.agents,
        skills: this.skills,
        workflows: this.workflows,
      },
      proxy: this.proxy,
      governance: this.governance,
      approvals: this.approvals,
      tracing: this.tracing,
      clock: this.clock,
      bus: this.bus,
      logger: this.logger,
    });
    this.bridge = mcp.bridge;
    this.#mcp = mcp;
    this.tools.register(systemStatusTool(this.bridge));
    this.#plugins = new PluginStarter(config, {
      logger: this.logger,
      clock: this.clock,
      bus: this.bus,
      env: this.env,
      registerTool: (tool) => this.tools.register(tool),
      sharedSessions: () => {
        const cluster = this.#cluster;
        return cluster ? () => cluster.sessions() : undefined;
      },
      serve: (transport, session, stages) => mcp.sessions.serve(transport, session, stages),
      stdio: options.stdio,
    });
    this.engine = createEngine(config, {
      registries: { agents: this.agents, skills: this.skills, workflows: this.workflows },
      calls: mcp.calls,
      tools: this.tools,
      proxy: this.proxy,
      models: () => this.pluginsOf("model"),
      logger: this.logger.child("engine"),
    });
  }

  /** Calls `observer` for every finished tool call (metrics); returns the unsubscribe function. */
  observeCalls(observer: BridgeObserver): () => void {
    return this.#mcp.observeCalls(observer);
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
  get fleet(): readonly FleetServer[] {
    return this.#proxyRoom.fleet.fleet;
  }

  /** Where fleet edits go: the shared bucket in cluster mode, else the fleet file (if any). */
  get fleetStore(): FleetStore | undefined {
    return this.#cluster ? this.#cluster.node.config.fleetStore : this.#proxyRoom.fleet.store;
  }

  /** In cluster mode (MCP_CLUSTER), the state shared with the other replicas; set by start(). */
  get sharedState(): SharedState | undefined {
    return this.#cluster?.state;
  }

  /** Cluster mode: how often rate limits fell back to this replica's share (KV unreachable). */
  get rateLimitFallbacks(): { fallbacks: number; outages: number } | undefined {
    return this.#governanceRoom.rateLimitFallbacks();
  }

  /** This replica's id (MCP_REPLICA_ID) in cluster mode; undefined for one process. */
  get replicaId(): string | undefined {
    return this.config.cluster?.replicaId;
  }

  /** Parses fleet text and checks every enabled server can be planned; throws `config_invalid`. */
  checkFleet(text: string, path: string): FleetConfig {
    return this.#proxyRoom.fleet.check(text, path);
  }

  /** Applies a checked fleet without a restart (one application at a time). */
  applyFleet(servers: readonly FleetServer[], origin?: string): Promise<FleetDiff> {
    return this.#proxyRoom.fleet.apply(servers, origin);
  }

  /** Re-reads and applies the fleet file now; a bad file keeps the running fleet and throws why. */
  reloadFleet(): Promise<FleetDiff> {
    if (this.#cluster) return this.#cluster.node.config.reloadFleet();
    return this.#proxyRoom.fleet.reload();
  }

  /** Re-reads the policy files now; a bad file keeps the policy in force and throws why. */
  async reloadPolicies(): Promise<PolicySet> {
    if (!this.#cluster) return await this.#governanceRoom.policies.reload();
    // The shared config reports a refused revision itself.
    await this.#cluster.node.config.reloadPolicies();
    return this.governance.policies;
  }

  /** Puts compiled policies in force (from `origin`, a path or a shared revision). */
  applyPolicies(policies: PolicySet, origin: string): void {
    this.#governanceRoom.policies.apply(policies, origin);
  }

  /** Resolves when the gateway has ended on its own (stdio closed) or was stopped. */
  get done(): Promise<void> {
    return this.#done.promise;
  }

  /** Plugins that failed to load or start. */
  get pluginFailures(): readonly PluginFailure[] {
    return this.#plugins.failures;
  }

  /** Instances of loaded plugins of one kind, for the services that consume them. */
  pluginsOf<K extends PluginKind>(kind: K): readonly PluginInstance<K>[] {
    return this.#plugins.instances.of(kind);
  }

  /** Resolves when every upstream has become READY or FAILED once. */
  get fleetStarted(): Promise<void> {
    return this.#fleetStarted;
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
    const auth = server.transport === "http"
      ? await prepareAuth(this.config, {
        logger: this.logger,
        clock: this.clock,
        registerGenerated: (tokens) =>
          registerSecrets(this.#secrets, [...configSecrets(this.config), ...tokens]),
      })
      : undefined;
    const tracer = await startTracer(this.config.tracing, this.logger.child("tracing"), this.clock);
    if (tracer) this.tracing.tracer = tracer;

    const { plugins, failures } = await loadPlugins(this.#pluginDirs());
    this.#plugins.loadFailed(failures);
    const sharing = await selectBus({
      url: this.config.natsUrl,
      plugins,
      bus: this.bus,
      instantiate: (plugin, extra) => this.#plugins.instantiate(plugin, extra),
      nonceTtlMs: this.config.governance.approvalTtlSeconds * 1000,
      cluster: this.config.cluster,
    });
    if (sharing.nonces) this.#governanceRoom.approvals.useNonceStore(sharing.nonces);
    if (sharing.shared) {
      this.#cluster = await ClusterMembership.join(this, sharing.shared, {
        fleetSummary: () => fleetSummary(this.proxy.status()),
        governance: this.#governanceRoom.shared,
      });
    }
    // The demo (and any fleet naming ${MCP_DATA_DIR}) writes there: it must exist before they start.
    if (this.config.demo || this.config.proxy.configPath) await ensureDataDir(this.config.dataDir);
    await this.#governanceRoom.approvals.load();
    await this.#governanceRoom.policies.load(this.#cluster?.node.config.startPolicies());
    await this.engine.load();
    for (const plugin of plugins) {
      if (plugin.manifest.kind !== "bus") await this.#plugins.instantiate(plugin);
    }

    for (const adapter of this.pluginsOf("upstream")) this.#proxyRoom.upstreams.add(adapter);
    const shared = await this.#cluster?.node.config.startFleet();
    const { fleet: reloader } = this.#proxyRoom;
    const fleet = await reloader.load(
      shared ? reloader.text(shared.text, shared.origin) : undefined,
    );

    const path = shared?.origin ?? this.config.proxy.configPath;
    const info: StartInfo = { transport: server.transport, pluginFailures: this.#plugins.failures };
    if (path) info.fleet = { path, servers: fleet.filter((s) => s.enabled).map((s) => s.id) };
    if (server.transport === "stdio") {
      await this.#startStdio();
    } else await this.#startHttp(auth!, info);
    this.#ready = true;
    this.scanner = createScanner(this.config, {
      proxy: this.proxy,
      ruleSets: this.pluginsOf("scanner-rule"),
      bus: this.bus,
      logger: this.logger.child("scanner"),
      pluginDirs: this.#pluginDirs(),
      shared: this.#governanceRoom.shared?.pins,
    });
    // Upstreams start in the background: clients connect at once and get list_changed as each
    // upstream becomes READY; /readyz reports ready when every upstream has started or failed.
    this.#fleetStarted = this.proxy.start(fleet).then(() => void (this.#fleetReady = true));
    if (this.#cluster) await this.#cluster.node.started(info.url);
    else {
      this.#proxyRoom.fleet.watch();
      this.#governanceRoom.policies.watch();
    }
    this.engine.watch();
    this.discovery = startDiscovery({
      settings: this.config.discovery,
      loaded: this.#plugins.discoverySources(),
      clock: this.clock,
      logger: this.logger.child("discovery"),
      bus: this.bus,
    });
    this.bus.publish({
      type: "gateway.started",
      transport: server.transport,
      ...(info.url ? { url: info.url } : {}),
    });
    return info;
  }

  #pluginDirs(): string[] {
    return this.#options.pluginDirs ?? [BUILTIN_PLUGIN_DIR, ...this.config.pluginPaths];
  }

  /**
   * Stops: refuses new requests at once, waits up to MCP_SHUTDOWN_GRACE_MS for tool calls in
   * flight (cut off with an error after that, or at once with `immediate`), then closes in reverse
   * order: transports, sessions, listener, upstreams, plugins, bus. Safe to call again; a second
   * call with `immediate` cuts a drain in progress short.
   */
  stop(options: StopOptions = {}): Promise<void> {
    if (options.immediate) this.#mcp.gate.cutShort();
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    this.#ready = false;
    // The listener refuses new HTTP requests at its door; stdio has only the gate to refuse them.
    if (this.#listener) this.#listener.beginStopping();
    else this.#mcp.gate.refuseNew();
    this.bus.publish({ type: "gateway.stopping" });
    // The heartbeat says draining while calls finish (bounded by the shared state's own timeouts).
    const draining = this.#cluster?.node.draining();
    try {
      await this.#mcp.gate.drain(this.#listener);
      await Promise.allSettled(this.#transports.map((t) => t.close()));
      // Calls answered and streams closed: the cluster stops listing this replica (before the
      // bus plugin closes the connection the heartbeat is deleted over).
      await this.#cluster?.leave(draining);
      this.#proxyRoom.fleet.unwatch();
      this.#governanceRoom.policies.unwatch();
      this.engine.stop();
      // Before the plugins close: a source must not be mid-list when its plugin goes.
      await this.discovery?.stop();
      await this.#proxyRoom.fleet.settled();
      await this.bridge.close();
      await this.#listener?.close();
      await this.#fleetStarted.catch(() => {});
      await this.proxy.stop();
      await this.#proxyRoom.upstreams.close();
      this.scanner?.close();
      this.#governanceRoom.shared?.close();
      // Running transports were closed first; close() is not required to be idempotent.
      await this.#plugins.closeAll(this.#transports);
      await this.#governanceRoom.approvals.flush();
      await this.audit.close();
      await this.tracing.tracer?.shutdown().catch((error) =>
        this.logger.warn("trace export at shutdown failed", { error: String(error) })
      );
      await this.#cluster?.close();
      await this.bus.close();
    } finally {
      forgetSecrets(this.#secrets);
      this.#proxyRoom.fleet.forgetSecrets();
      this.#done.resolve();
    }
  }

  async #startStdio(): Promise<void> {
    const transport = this.#plugins.stdioTransport(this.config.server.enabled);
    this.#transports.push(transport);
    await transport.start();
    transport.done?.then(() => this.stop());
  }

  /** Starts the HTTP listener with every route; fills in what `info` tells of it. */
  async #startHttp(auth: PreparedAuth, info: StartInfo): Promise<void> {
    const transports = this.#plugins.transports("http");
    this.#transports.push(...transports);
    Object.assign(
      info,
      await startGatewayHttp(this.config.server, auth, {
        logger: this.logger.child("http"),
        opened: (listener) => this.#listener = listener,
        routes: {
          host: this,
          ready: () => this.#ready && this.#fleetReady,
          plugins: () => this.#plugins.counts(),
          transports,
          cluster: {
            replicaId: () => this.replicaId,
            ...(this.#cluster ? { cluster: () => this.#cluster!.node.status() } : {}),
          },
        },
      }),
    );
  }
}
