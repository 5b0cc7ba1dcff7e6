/**
 * GatewayScanner: the scanner inside the running gateway. Every time an upstream (re)connects or
 * its lists change, the whole serving fleet is rescanned (cross-server rules need all of it);
 * findings are kept per server for the operator, and two things quarantine a tool — hidden from
 * every list, its calls refused — until an operator releases it:
 *
 * - a finding at or above the blocking severity (`MCP_SCANNER_BLOCK`, default `high`);
 * - a changed definition of a tool already seen (pinned on first sight): a rug pull until proven
 *   otherwise.
 *
 * With replicas (cluster mode, {@link GatewayScannerOptions.shared}) the pins, the changed-
 * definition quarantines and the releases are shared: the first replica to see a tool pins it,
 * and a quarantine or a release on one replica applies on all of them.
 * @module
 */
import { createHash } from "node:crypto";
import type { EventBus } from "../bus/event_bus.ts";
import type { GatewayEvent } from "../bus/events.ts";
import { canonicalJson } from "../governance/canonical_json.ts";
import type { Logger } from "../support/logger.ts";
import type { ScannerRule, ScanSeverity } from "../plugin_api/mod.ts";
import type { ProxyManager } from "../proxy/proxy_manager.ts";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { ServerDescriptor } from "./descriptor.ts";
import { type Finding, severityRank } from "./finding.ts";
import { type ScanResult, scanServers } from "./scan.ts";
import type { PinChange, ScannerSharedState } from "../governance/shared_pins.ts";
import { WorkerScan } from "./worker_scan.ts";
import { evictAbsentPins } from "./pin_bound.ts";

/** Options of {@link GatewayScanner}. */
export interface GatewayScannerOptions {
  proxy: ProxyManager;
  rules: readonly ScannerRule[];
  /** This process's own events (proxy.tools, proxy.state) trigger rescans. */
  subscribe: (handler: (event: GatewayEvent) => void) => () => void;
  bus: EventBus;
  logger: Logger;
  /** Findings at or above this severity quarantine their tool; `off` never quarantines on findings. */
  blockAt: ScanSeverity | "off";
  /** Findings at or above this severity (below blockAt) make calls need approval; `off` never. */
  approvalAt: ScanSeverity | "off";
  /**
   * The plugin folders `rules` came from: when set, fleets larger than WORKER_ABOVE_CHARS are
   * scanned in a worker that loads the same scanner-rule plugins, so a huge or hostile catalog
   * never blocks the event loop. Unset: always in process with `rules`.
   */
  pluginDirs?: readonly string[];
  /** Cluster mode: the pins and quarantine decisions every replica shares. */
  shared?: ScannerSharedState;
}

/** A finding as shown to operators. */
export interface FindingSummary {
  rule: string;
  severity: ScanSeverity;
  entity: { kind: string; name: string };
  /** Where: a JSON Pointer into the server's descriptor (`/servers/<i>/tools/<j>/…`). */
  pointer: string;
  message: string;
  /** What text: an excerpt around the match, invisible characters made visible. */
  evidence: string;
}

/** Rescans the fleet and quarantines what must not reach a model. */
export class GatewayScanner {
  #options: GatewayScannerOptions;
  #findings = new Map<string, Finding[]>();
  /** server → tool → SHA-256 of the definition first seen (or last released). */
  #pins = new Map<string, Map<string, string>>();
  /** `server\0tool` → reason. */
  #quarantined = new Map<string, string>();
  /** Tools an operator released: their current findings no longer quarantine them. */
  #released = new Set<string>();
  #unsubscribe: () => void;
  #unshare: (() => void) | undefined;
  #scheduled = false;
  #running: Promise<void> | undefined;
  #again = false;
  #worker: WorkerScan | undefined;
  #workerFailed = false;
  #idle: Promise<void> = Promise.resolve();
  /** `server\0tool` → hash of the definition the last completed scan read. */
  #scanned = new Map<string, string>();
  /** Tools whose current definition no scan has read yet: held back until one has. */
  #pending = new Set<string>();

  constructor(options: GatewayScannerOptions) {
    this.#options = options;
    options.proxy.setQuarantine((server, tool) =>
      this.#quarantined.get(key(server, tool)) ??
        (this.#pending.has(key(server, tool)) ? PENDING : undefined)
    );
    options.proxy.setEscalation((server, tool) => this.#escalation(server, tool));
    for (const rule of options.rules) rule.onChange?.(() => this.#schedule());
    options.proxy.setItemQuarantine((server, kind, name) => this.#itemBlock(server, kind, name));
    this.#unsubscribe = options.subscribe((event) => {
      if (event.type === "proxy.tools" || event.type === "proxy.state") {
        this.#hold(event.server);
        this.#schedule();
      }
    });
    this.#unshare = options.shared?.subscribe((change) => this.#applyShared(change));
  }

  /** A decision another replica (or this one, echoed by the bucket) shared. */
  #applyShared(change: PinChange): void {
    const k = key(change.server, change.tool);
    const pins = this.#pinsOf(change.server);
    if (change.kind === "pin") {
      if (pins.get(change.tool) === change.hash) return;
      // The first replica's pin wins: what serves here is compared against it by a rescan.
      pins.set(change.tool, change.hash);
      this.#schedule();
      return;
    }
    if (change.kind === "quarantine") {
      this.#released.delete(k);
      if (this.#quarantined.get(k) === change.reason) return;
      this.#quarantined.set(k, change.reason);
      this.#options.logger.warn(
        `quarantined ${change.server}/${change.tool} (shared by another replica): ${change.reason}`,
      );
    } else {
      pins.set(change.tool, change.hash);
      this.#released.add(k);
      // What serves here is compared against the released definition: a replica serving another
      // one quarantines it anew (the operator reviewed that one, not this).
      this.#schedule();
      if (!this.#quarantined.delete(k)) return;
      this.#options.logger.info(`released ${change.server}/${change.tool} by ${change.by}`);
    }
    this.#options.proxy.refresh();
  }

  /** Findings of one server, worst first. */
  findingsFor(server: string): FindingSummary[] {
    return (this.#findings.get(server) ?? []).map((f) => ({
      rule: f.rule,
      severity: f.severity,
      entity: f.entity,
      pointer: f.pointer,
      message: f.message,
      evidence: f.evidence,
    }));
  }

  /** Quarantined tools of one server, with why. */
  quarantinedTools(server: string): { tool: string; reason: string }[] {
    const prefix = `${server}\u0000`;
    return [...this.#quarantined].filter(([k]) => k.startsWith(prefix))
      .map(([k, reason]) => ({ tool: k.slice(prefix.length), reason }));
  }

  /** An operator's release: the tool's current definition becomes its pin, and it serves again. */
  release(server: string, tool: string, by: string): boolean {
    const reason = this.#quarantined.get(key(server, tool));
    if (reason === undefined) return false;
    const definition = this.#options.proxy.get(server)?.catalog.tools.find((t) => t.name === tool);
    if (definition) {
      this.#pinsOf(server).set(tool, hashOf(definition));
      this.#options.shared?.release(server, tool, hashOf(definition), by);
    }
    this.#quarantined.delete(key(server, tool));
    // A release overrides a blocking finding too: the operator has looked at it.
    this.#released.add(key(server, tool));
    this.#options.bus.publish({ type: "scanner.released", server, tool, by });
    this.#options.proxy.refresh();
    return true;
  }

  /**
   * Holds back the tools of `server` whose definition no completed scan has read: with the scan
   * in a worker, a new or changed tool would otherwise be listed before its findings exist.
   */
  #hold(server: string): void {
    const handle = this.#options.proxy.get(server);
    if (!handle) return;
    for (const tool of handle.catalog.tools) {
      const k = key(server, tool.name);
      if (this.#scanned.get(k) !== hashOf(tool)) this.#pending.add(k);
    }
  }

  /** How many entries the per-tool maps hold (for tests: they must stay bounded). */
  get tracked(): { pins: number; scanned: number; pending: number; quarantined: number } {
    let pins = 0;
    for (const perServer of this.#pins.values()) pins += perServer.size;
    const { size: scanned } = this.#scanned, { size: pending } = this.#pending;
    return { pins, scanned, pending, quarantined: this.#quarantined.size };
  }

  /** Resolves when no scan is running or scheduled (for tests and shutdown). */
  idle(): Promise<void> {
    return this.#idle;
  }

  /** Rescans now (the event subscription calls this, batched); in the worker when there is one. */
  async rescan(): Promise<void> {
    const { proxy, rules } = this.#options;
    const handles = proxy.handles().filter((h) => h.state === "READY" || h.state === "DEGRADED");
    const descriptors: ServerDescriptor[] = handles.map((h) => ({
      id: h.id,
      ...h.serverDescription,
      tools: h.catalog.tools as unknown as Record<string, unknown>[],
      prompts: h.catalog.prompts as unknown as Record<string, unknown>[],
      resources: h.catalog.resources as unknown as Record<string, unknown>[],
      resourceTemplates: h.catalog.resourceTemplates as unknown as Record<string, unknown>[],
    }));
    // What was scanned: the catalogs may change while the worker reads them.
    const snapshot = handles.map((h) => ({ id: h.id, tools: h.catalog.tools }));
    let result: ScanResult;
    // A usual fleet scans in milliseconds, in this same turn, so nothing unscanned is ever listed;
    // a big catalog (a hostile one: megabytes of bait) goes to the worker, its new tools held.
    const inWorker = this.#options.pluginDirs !== undefined && !this.#workerFailed &&
      JSON.stringify(descriptors).length > WORKER_ABOVE_CHARS;
    if (inWorker) {
      this.#worker ??= new WorkerScan(this.#options.pluginDirs!);
      try {
        result = await this.#worker.scan(descriptors);
        // Rules with late answers keep their state here, so they run here (cache look-ups only).
        const late = rules.filter((r) => r.onChange);
        if (late.length > 0) result = merge(result, scanServers(descriptors, late));
      } catch (error) {
        if (this.#closed) return;
        this.#options.logger.warn(
          `scanner worker failed (${(error as Error).message}); scanning in process`,
        );
        this.#worker = undefined;
        this.#workerFailed = true;
        result = scanServers(descriptors, rules);
      }
    } else result = scanServers(descriptors, rules);
    if (this.#closed) return;
    this.#apply(snapshot, result);
  }

  #apply(handles: { id: string; tools: readonly Tool[] }[], result: ScanResult): void {
    const { proxy, blockAt, bus, logger } = this.#options;
    const { findings, ruleFailures } = result;
    const pendingBefore = this.#pending.size;
    for (const handle of handles) {
      const live = new Map((proxy.get(handle.id)?.catalog.tools ?? []).map((t) => [t.name, t]));
      for (const tool of handle.tools) {
        const k = key(handle.id, tool.name);
        const hash = hashOf(tool);
        this.#scanned.set(k, hash);
        // Released only if what serves now is what was scanned; a newer definition waits.
        const now = live.get(tool.name);
        if (now === tool || (now && hashOf(now) === hash)) this.#pending.delete(k);
      }
    }
    for (const failure of ruleFailures) {
      logger.warn(`scanner rule ${failure.rule} failed: ${failure.error}`);
    }
    const before = new Map(this.#quarantined);
    this.#findings.clear();
    for (const f of findings) {
      const list = this.#findings.get(f.server) ?? [];
      list.push(f);
      this.#findings.set(f.server, list);
    }
    for (const handle of handles) {
      const list = this.#findings.get(handle.id) ?? [];
      const worst = list[0]?.severity;
      bus.publish({
        type: "scanner.findings",
        server: handle.id,
        findings: list.length,
        ...(worst ? { worst } : {}),
      });
      const pins = this.#pinsOf(handle.id);
      for (const tool of handle.tools) {
        const k = key(handle.id, tool.name);
        const hash = hashOf(tool);
        const pinned = pins.get(tool.name);
        if (pinned === undefined) {
          pins.set(tool.name, hash);
          this.#options.shared?.pin(handle.id, tool.name, hash);
        } else if (pinned !== hash && !this.#quarantined.has(k)) {
          this.#released.delete(k);
          this.#quarantined.set(k, RUG_PULL);
          this.#options.shared?.quarantine(handle.id, tool.name, hash, RUG_PULL);
          continue;
        }
        if (this.#quarantined.has(k) && pinned !== hash) continue;
        const blocking = blockAt === "off" || this.#released.has(k)
          ? undefined
          : list.find((f) =>
            f.entity.kind === "tool" && f.entity.name === tool.name &&
            severityRank(f.severity) >= severityRank(blockAt)
          );
        if (blocking) {
          this.#quarantined.set(
            k,
            `scanner finding ${blocking.rule} (${blocking.severity}): ${blocking.message}`,
          );
        } else if (this.#quarantined.get(k)?.startsWith("scanner finding")) {
          this.#quarantined.delete(k);
        }
      }
    }
    this.#forgetUnlisted(handles);
    let changed = false;
    for (const [k, reason] of this.#quarantined) {
      if (before.get(k) === reason) continue;
      changed = true;
      const [server, tool] = k.split("\u0000") as [string, string];
      logger.warn(`quarantined ${server}/${tool}: ${reason}`);
      bus.publish({ type: "scanner.quarantined", server, tool, reason });
    }
    if (changed || before.size !== this.#quarantined.size || pendingBefore !== this.#pending.size) {
      proxy.refresh();
    }
  }

  /**
   * Bounds what is kept per tool to the scanned servers' catalogs (an upstream rotating 2,000
   * names per refresh grew these maps without end): a tool no longer listed loses its scan hash,
   * its hold and a finding's quarantine (all re-derived if it comes back); its pin, and with it
   * a rug-pull quarantine or a release, is kept up to MAX_ABSENT_PINS per server (pin_bound.ts).
   */
  #forgetUnlisted(scanned: { id: string; tools: readonly Tool[] }[]): void {
    const listed = new Map<string, Set<string>>();
    for (const { id, tools } of scanned) {
      const live = this.#options.proxy.get(id)?.catalog.tools ?? [];
      const names = new Set([...tools, ...live].map((t) => t.name));
      listed.set(id, names);
      for (const tool of evictAbsentPins(this.#pinsOf(id), names)) {
        this.#quarantined.delete(key(id, tool));
        this.#released.delete(key(id, tool));
      }
    }
    const gone = (k: string) => {
      const [server, tool] = k.split("\u0000") as [string, string];
      return listed.get(server)?.has(tool) === false;
    };
    for (const k of this.#scanned.keys()) if (gone(k)) this.#scanned.delete(k);
    for (const k of this.#pending) if (gone(k)) this.#pending.delete(k);
    for (const [k, reason] of this.#quarantined) {
      if (reason !== RUG_PULL && gone(k)) this.#quarantined.delete(k);
    }
  }

  /** A blocking finding on a prompt or resource: it is hidden and refused like a tool would be. */
  #itemBlock(server: string, kind: string, name: string): string | undefined {
    const { blockAt } = this.#options;
    if (blockAt === "off") return undefined;
    const finding = this.#findings.get(server)?.find((f) =>
      f.entity.kind === kind && f.entity.name === name &&
      severityRank(f.severity) >= severityRank(blockAt)
    );
    return finding && `scanner finding ${finding.rule} (${finding.severity}): ${finding.message}`;
  }

  /** A finding at or above approvalAt on this tool (not released): its calls need approval. */
  #escalation(server: string, tool: string): string | undefined {
    const { approvalAt } = this.#options;
    if (approvalAt === "off" || this.#released.has(key(server, tool))) return undefined;
    const finding = this.#findings.get(server)?.find((f) =>
      f.entity.kind === "tool" && f.entity.name === tool &&
      severityRank(f.severity) >= severityRank(approvalAt)
    );
    return finding && `scanner finding ${finding.rule} (${finding.severity})`;
  }

  /** Stops listening and ends the worker. */
  close(): void {
    this.#closed = true;
    this.#unsubscribe();
    this.#unshare?.();
    this.#worker?.close();
  }

  #closed = false;

  #schedule(): void {
    if (this.#scheduled) return;
    // A change during a scan is scanned again after it: the catalog may have moved on.
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#scheduled = true;
    const { promise, resolve } = Promise.withResolvers<void>();
    this.#idle = promise;
    // Batches the events of one reconnect (state, then tools) into one scan.
    queueMicrotask(async () => {
      this.#scheduled = false;
      do {
        this.#again = false;
        this.#running = this.rescan().catch((error) => {
          this.#options.logger.error("scanner failed; nothing was quarantined by this scan", {
            error: String(error),
          });
        });
        await this.#running;
        this.#running = undefined;
      } while (this.#again && !this.#closed);
      resolve();
    });
  }

  #pinsOf(server: string): Map<string, string> {
    let pins = this.#pins.get(server);
    if (!pins) this.#pins.set(server, pins = new Map());
    return pins;
  }
}

function merge(a: ScanResult, b: ScanResult): ScanResult {
  const seen = new Set(a.findings.map((f) => f.fingerprint));
  const findings = [...a.findings, ...b.findings.filter((f) => !seen.has(f.fingerprint))]
    .sort((x, y) => severityRank(y.severity) - severityRank(x.severity));
  return { findings, ruleFailures: [...a.ruleFailures, ...b.ruleFailures] };
}

/** Descriptor sets larger than this (as JSON) are scanned in the worker (~50 ms in process). */
export const WORKER_ABOVE_CHARS = 256 * 1024;

const RUG_PULL =
  "its definition changed since it was first seen (possible rug pull); an operator must review and release it";
const PENDING = "waiting for the scanner to read its definition; retry in a moment";

function key(server: string, tool: string): string {
  return `${server}\u0000${tool}`;
}

function hashOf(tool: unknown): string {
  return createHash("sha256").update(canonicalJson(tool)).digest("hex");
}
