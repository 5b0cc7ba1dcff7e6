/**
 * ProxyManager: the fleet of upstream servers, aggregated under one namespace.
 *
 * Tools and prompts appear as `<prefix><separator><name>`; resources as
 * `proxy://<server_id>/<upstream uri>` (reversible: strip the prefix to get the upstream's URI).
 * Native tools are never shadowed. A server that is not READY/DEGRADED, or whose breaker is OPEN,
 * is hidden from lists; calls by name still reach its breaker, which answers `circuit_open`.
 * @module
 */
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import type {
  CallToolResult,
  Prompt,
  Resource,
  ResourceTemplate,
  Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import type { EventBus } from "../bus/event_bus.ts";
import { compileAllowDeny, type GlobMatcher } from "../support/glob.ts";
import { MAX_CALLED_NAME, MAX_TOOL_NAME } from "./catalog_fetch.ts";
import type { Logger } from "../support/logger.ts";
import {
  ChildServerHandle,
  type HandleSnapshot,
  type UpstreamCallContext,
} from "./child_server_handle.ts";
import type { FleetServer } from "./fleet_config.ts";
import { ScopedUpstream } from "./scoped_upstream.ts";
import type { ResourceAudience, UpstreamHandle } from "./upstream_handle.ts";

/** The upstream items besides tools that the scanner can quarantine. */
export type ItemKind = "prompt" | "resource" | "resource-template";

/** Scheme of namespaced upstream resource URIs. */
export const PROXY_URI_PREFIX = "proxy://";

/** A routed name: which handle serves it and under what upstream name. */
export interface Route {
  handle: UpstreamHandle;
  original: string;
  /** The upstream's descriptor of a listed tool (saves a catalog scan per call). */
  tool?: Tool;
}

/** The tools, resources and prompts one session sees, and how its names route. */
export interface CatalogView {
  tools(): Tool[];
  resources(): Resource[];
  resourceTemplates(): ResourceTemplate[];
  prompts(): Prompt[];
  /** The route of a tool name (including servers hidden by an OPEN breaker), or undefined. */
  resolveTool(name: string): Route | undefined;
  resolvePrompt(name: string): Route | undefined;
  resolveResource(uri: string): Route | undefined;
}

/** What the manager is built from. */
export interface ProxyManagerOptions {
  /** A fresh transport to an upstream (the kernel builds a sandboxed worker relay). */
  createTransport: (server: FleetServer) => Transport;
  /** True when a native tool has this name: proxied tools never shadow one. */
  isNativeTool: (name: string) => boolean;
  separator: string;
  clock: Clock;
  logger: Logger;
  bus: EventBus;
  /** Where to look when a server cannot serve; see {@link ChildServerHandleOptions.statusHint}. */
  statusHint?: (id: string) => string;
}

interface Member {
  handle: UpstreamHandle;
  allows: GlobMatcher;
  /** It has been READY or FAILED at least once: {@link ProxyManager.settled} no longer waits. */
  settledOnce: boolean;
  unsubscribe: () => void;
}

interface Aggregate {
  tools: Tool[];
  toolRoutes: Map<string, Route>;
  prompts: Prompt[];
  promptRoutes: Map<string, Route>;
  resources: Resource[];
  templates: ResourceTemplate[];
}

/** The upstream fleet. */
export class ProxyManager {
  #options: ProxyManagerOptions;
  #members = new Map<string, Member>();
  #aggregate: Aggregate | undefined;
  #listeners = new Set<() => void>();
  #updateListeners = new Set<(uri: string, audience?: ResourceAudience) => void>();
  #lastSignature = "";
  #droppedReported = new Set<string>(); // what the last build dropped: bounded by the catalogs
  #quarantine: (server: string, tool: string) => string | undefined = () => undefined;
  #escalate: (server: string, tool: string) => string | undefined = () => undefined;
  #itemQuarantine: (server: string, kind: ItemKind, name: string) => string | undefined = () =>
    undefined;

  constructor(options: ProxyManagerOptions) {
    this.#options = options;
    this.#lastSignature = this.#signature();
  }

  /** Number of configured (enabled) upstreams. */
  get size(): number {
    return this.#members.size;
  }

  /** The handle of a server, or undefined. */
  get(id: string): UpstreamHandle | undefined {
    return this.#members.get(id)?.handle;
  }

  /** Every handle, in configuration order. */
  handles(): UpstreamHandle[] {
    return [...this.#members.values()].map((m) => m.handle);
  }

  /** Calls `listener` when the aggregated tools, resources or prompts change. */
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** Calls `listener` with a changed resource's namespaced URI and, if scoped, its audience. */
  onResourceUpdated(listener: (uri: string, audience?: ResourceAudience) => void): () => void {
    this.#updateListeners.add(listener);
    return () => void this.#updateListeners.delete(listener);
  }

  /** Adds the enabled servers and starts them all; resolves when each has become READY or FAILED. */
  async start(servers: readonly FleetServer[]): Promise<void> {
    const added = servers.filter((s) => s.enabled).map((s) => this.#add(s));
    await Promise.all(added.map((h) => h.start()));
  }

  /**
   * Resolves once no upstream is STARTING (each became READY or FAILED), or after `maxMs`,
   * whichever comes first: a client that lists once right after connecting then sees the fleet.
   */
  settled(maxMs: number): Promise<void> {
    // Only a first start is waited for: a server in a restart loop must not slow every list.
    const starting = [...this.#members.values()]
      .filter((m) => !m.settledOnce && m.handle.state === "STARTING")
      .map((m) => m.handle);
    if (starting.length === 0 || maxMs <= 0) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = this.#options.clock.setTimeout(resolve, maxMs);
      Promise.allSettled(starting.map((h) => h.start())).then(() => {
        timer.cancel();
        resolve();
      });
    });
  }

  /** Applies a new fleet: stops removed servers, restarts changed ones, starts new ones. */
  async reload(servers: readonly FleetServer[]): Promise<{
    added: string[];
    removed: string[];
    changed: string[];
  }> {
    const next = new Map(servers.filter((s) => s.enabled).map((s) => [s.id, s]));
    const removed = [...this.#members.keys()].filter((id) => !next.has(id));
    const changed = [...next.keys()].filter((id) => {
      const current = this.#members.get(id);
      return current && signatureOf(current.handle.server) !== signatureOf(next.get(id)!);
    });
    const added = [...next.keys()].filter((id) => !this.#members.has(id));
    await Promise.all([...removed, ...changed].map((id) => this.#remove(id)));
    const starting = [...changed, ...added].map((id) => this.#add(next.get(id)!));
    // Keep configuration order for listings.
    const order = servers.map((s) => s.id);
    this.#members = new Map(
      [...this.#members.entries()].sort(([a], [b]) => order.indexOf(a) - order.indexOf(b)),
    );
    this.#invalidate();
    await Promise.all(starting.map((h) => h.start()));
    return { added, removed, changed };
  }

  /** Stops every upstream. */
  async stop(): Promise<void> {
    await Promise.all([...this.#members.keys()].map((id) => this.#remove(id)));
    this.#invalidate();
  }

  /** An inbound session ended: `scope: session` servers stop its instances. */
  async endSession(sessionId: string): Promise<void> {
    await Promise.all(this.handles().map((h) => h.endSession(sessionId)));
  }

  /** Snapshots of every upstream for status pages. */
  status(): HandleSnapshot[] {
    return this.handles().map((h) => h.snapshot());
  }

  /** The aggregated view (every server, namespaced names). */
  get aggregated(): CatalogView {
    return {
      tools: () => this.#build().tools,
      resources: () => this.#build().resources,
      resourceTemplates: () => this.#build().templates,
      prompts: () => this.#build().prompts,
      // A name longer than any tool is unknown before any lookup or glob sees it.
      resolveTool: (name) =>
        name.length > MAX_CALLED_NAME
          ? undefined
          : this.#build().toolRoutes.get(name) ?? this.#resolveHidden(name),
      resolvePrompt: (name) => this.#build().promptRoutes.get(name),
      resolveResource: (uri) => this.#resolveUri(uri),
    };
  }

  /** One server alone under its own names (served at `/mcp/<server_id>`). */
  scoped(id: string): CatalogView | undefined {
    const member = this.#members.get(id);
    if (!member) return undefined;
    const { handle, allows } = member;
    const visible = () => handle.serving;
    const tools = () =>
      visible()
        ? handle.catalog.tools.filter((t) => allows(t.name) && !this.#quarantine(id, t.name))
        : [];
    return {
      tools,
      resources: () => visible() ? handle.catalog.resources : [],
      resourceTemplates: () => visible() ? handle.catalog.resourceTemplates : [],
      prompts: () => visible() ? handle.catalog.prompts : [],
      // Only what the catalog lists: a tool it dropped (over a bound, added since, a clash) has no
      // descriptor, so no effect class, schema or scan to govern it by, and must not be called.
      resolveTool: (name) =>
        name.length <= MAX_TOOL_NAME && allows(name) && visible() &&
          handle.catalog.tools.some((t) => t.name === name)
          ? { handle, original: name }
          : undefined,
      resolvePrompt: (name) => ({ handle, original: name }),
      resolveResource: (uri) => ({ handle, original: uri }),
    };
  }

  /**
   * Sets the quarantine test (the scanner's): a quarantined tool is hidden from every list and its
   * calls are refused; re-evaluated by {@link refresh}.
   */
  setQuarantine(test: (server: string, tool: string) => string | undefined): void {
    this.#quarantine = test;
    this.#invalidate();
  }

  /**
   * Sets the escalation test (the scanner's): an escalated tool's calls are governed as
   * destructive, so they need approval under the usual policies.
   */
  setEscalation(test: (server: string, tool: string) => string | undefined): void {
    this.#escalate = test;
  }

  /**
   * Sets the quarantine test of prompts, resources and resource templates (the scanner's): a
   * quarantined item is left out of lists and refused to every caller.
   */
  setItemQuarantine(
    test: (server: string, kind: ItemKind, name: string) => string | undefined,
  ): void {
    this.#itemQuarantine = test;
  }

  /** Why an upstream's prompt or resource (by the name the scanner uses) is quarantined, or undefined. */
  itemQuarantineReason(server: string, kind: ItemKind, name: string): string | undefined {
    return this.#itemQuarantine(server, kind, name);
  }

  /** Why a tool's calls are treated as destructive, or undefined. */
  escalationReason(server: string, tool: string): string | undefined {
    return this.#escalate(server, tool);
  }

  /** Why a tool is quarantined, or undefined when it is not. */
  quarantineReason(server: string, tool: string): string | undefined {
    return this.#quarantine(server, tool);
  }

  /** Recomputes the aggregate (after a quarantine decision changed) and notifies listeners. */
  refresh(): void {
    this.#invalidate();
  }

  /** The aggregated name of an upstream's tool (`<prefix><separator><name>`): the name policies use. */
  qualifiedName(serverId: string, original: string): string {
    const prefix = this.#members.get(serverId)?.handle.server.prefix ?? serverId;
    return prefix === "" ? original : `${prefix}${this.#options.separator}${original}`;
  }

  /** Forwards a tool call to its upstream. */
  callTool(
    route: Route,
    args: Record<string, unknown>,
    ctx: UpstreamCallContext,
  ): Promise<CallToolResult> {
    return route.handle.callTool(route.original, args, ctx);
  }

  #add(server: FleetServer): UpstreamHandle {
    const instance = (of: FleetServer, label?: string) =>
      new ChildServerHandle({
        server: of,
        createTransport: () => this.#options.createTransport(of),
        clock: this.#options.clock,
        logger: this.#options.logger,
        bus: this.#options.bus,
        correlateBy: of.scope === "tenant" ? "tenant" : "session",
        ...(this.#options.statusHint ? { statusHint: this.#options.statusHint } : {}),
        ...(label === undefined ? {} : { instance: label }),
      });
    const scope = server.scope;
    const { clock, logger } = this.#options;
    const handle: UpstreamHandle = scope === "tenant" || scope === "session"
      ? new ScopedUpstream({ server: { ...server, scope }, createHandle: instance, clock, logger })
      : instance(server);
    const offChange = handle.onChange((change) => {
      if (change === "state" && handle.state !== "STARTING" && handle.state !== "STOPPED") {
        member.settledOnce = true;
      }
      if (change === "catalog" || change === "state" || change === "breaker") this.#invalidate();
    });
    const offUpdate = handle.onResourceUpdated((uri, audience) => {
      const namespaced = `${PROXY_URI_PREFIX}${server.id}/${uri}`;
      for (const listener of [...this.#updateListeners]) listener(namespaced, audience);
    });
    const member: Member = {
      handle,
      allows: compileAllowDeny(server.tools.allow, server.tools.deny),
      settledOnce: false,
      unsubscribe: () => [offChange, offUpdate].forEach((off) => off()),
    };
    this.#members.set(server.id, member);
    return handle;
  }

  async #remove(id: string): Promise<void> {
    const member = this.#members.get(id);
    if (!member) return;
    this.#members.delete(id);
    member.unsubscribe();
    await member.handle.stop();
  }

  /** Drops the cached aggregate and tells listeners when the visible set really changed. */
  #invalidate(): void {
    this.#aggregate = undefined;
    const signature = this.#signature();
    if (signature === this.#lastSignature) return;
    this.#lastSignature = signature;
    for (const listener of [...this.#listeners]) {
      try {
        listener();
      } catch (error) {
        this.#options.logger.warn("proxy change listener threw", { error: String(error) });
      }
    }
  }

  #signature(): string {
    const a = this.#build();
    return JSON.stringify([a.tools, a.resources, a.templates, a.prompts]);
  }

  #build(): Aggregate {
    if (this.#aggregate) return this.#aggregate;
    const { separator, isNativeTool } = this.#options;
    const aggregate: Aggregate = {
      tools: [],
      toolRoutes: new Map(),
      prompts: [],
      promptRoutes: new Map(),
      resources: [],
      templates: [],
    };
    const reported = this.#droppedReported;
    this.#droppedReported = new Set();
    for (const { handle, allows } of this.#members.values()) {
      if (!handle.serving) continue;
      const { prefix, id } = handle.server;
      const exposed = (name: string) => (prefix === "" ? name : `${prefix}${separator}${name}`);
      for (const tool of handle.catalog.tools) {
        if (!allows(tool.name) || this.#quarantine(id, tool.name)) continue;
        const name = exposed(tool.name);
        const owner = this.#outsider(name, id);
        const clash = isNativeTool(name)
          ? "a native tool has this name (native tools are never shadowed)"
          : owner
          ? `the name is in upstream "${owner}"'s prefix, which only that upstream may use`
          : aggregate.toolRoutes.has(name)
          ? `upstream "${aggregate.toolRoutes.get(name)!.handle.id}" already exposes it`
          : name.length > 128
          ? "the prefixed name is longer than 128 characters"
          : undefined;
        if (clash) {
          this.#reportDropped(id, name, clash, reported);
          continue;
        }
        aggregate.tools.push({ ...tool, name });
        aggregate.toolRoutes.set(name, { handle, original: tool.name, tool });
      }
      for (const prompt of handle.catalog.prompts) {
        const name = exposed(prompt.name);
        if (aggregate.promptRoutes.has(name) || this.#outsider(name, id)) continue;
        aggregate.prompts.push({ ...prompt, name });
        aggregate.promptRoutes.set(name, { handle, original: prompt.name });
      }
      for (const resource of handle.catalog.resources) {
        aggregate.resources.push({ ...resource, uri: `${PROXY_URI_PREFIX}${id}/${resource.uri}` });
      }
      for (const template of handle.catalog.resourceTemplates) {
        aggregate.templates.push({
          ...template,
          uriTemplate: `${PROXY_URI_PREFIX}${id}/${template.uriTemplate}`,
        });
      }
    }
    this.#aggregate = aggregate;
    return aggregate;
  }

  /**
   * A hidden tool still routes, so its caller learns why: circuit_open for an OPEN breaker, the
   * server's state when it is down, `quarantined` for a tool the scanner holds back.
   */
  #resolveHidden(name: string): Route | undefined {
    const { separator } = this.#options;
    for (const { handle, allows } of this.#members.values()) {
      const { prefix } = handle.server;
      const original = prefix === ""
        ? name
        : name.startsWith(prefix + separator)
        ? name.slice(prefix.length + separator.length)
        : undefined;
      if (original === undefined || !allows(original) || this.#options.isNativeTool(name)) continue;
      if (this.#outsider(name, handle.id)) continue;
      // A serving server's listed tools are routed already; here only its quarantined ones, so
      // their callers learn why.
      if (handle.serving && !this.#quarantine(handle.id, original)) {
        // Reading `serving` may just have moved a lapsed OPEN breaker to HALF_OPEN, which rebuilt
        // the aggregate with this server's tools: the call is then the probe, not unknown.
        const route = this.#build().toolRoutes.get(name);
        if (route) return route;
        continue;
      }
      // A prefix claims the name; an unprefixed server claims only the names it advertised.
      if (prefix !== "" || handle.catalog.tools.some((t) => t.name === original)) {
        return { handle, original };
      }
    }
    return undefined;
  }

  #resolveUri(uri: string): Route | undefined {
    if (!uri.startsWith(PROXY_URI_PREFIX)) return undefined;
    const rest = uri.slice(PROXY_URI_PREFIX.length);
    const slash = rest.indexOf("/");
    if (slash <= 0) return undefined;
    const handle = this.#members.get(rest.slice(0, slash))?.handle;
    return handle ? { handle, original: rest.slice(slash + 1) } : undefined;
  }

  /** Another server than `id` whose prefix `name` is in (the longest): only it may use the name. */
  #outsider(name: string, id: string): string | undefined {
    let owner: { id: string; prefix: string } | undefined;
    for (const { handle: { server } } of this.#members.values()) {
      const inside = server.prefix !== "" &&
        name.startsWith(server.prefix + this.#options.separator);
      if (inside && server.prefix.length > (owner?.prefix.length ?? -1)) owner = server;
    }
    return owner?.id === id ? undefined : owner?.id;
  }

  #reportDropped(server: string, tool: string, reason: string, reported: Set<string>): void {
    const key = `${server}\u0000${tool}\u0000${reason}`;
    this.#droppedReported.add(key);
    if (reported.has(key)) return;
    this.#options.logger.warn(`dropped tool "${tool}" of upstream "${server}": ${reason}`);
    this.#options.bus.publish({ type: "proxy.tool_dropped", server, tool, reason });
  }
}

function signatureOf(server: FleetServer): string {
  const { line: _line, ...rest } = server;
  return JSON.stringify(rest);
}

/** Thrown when a name routes nowhere. */
export function unknownUpstream(id: string): GatewayError {
  return new GatewayError("not_found", `No upstream server "${id}" is configured`, { server: id });
}
