/**
 * Runs discovery plugins and turns what they find into fleet proposals. Nothing is ever added by
 * itself: a candidate becomes an `add` proposal, enabled only when its source is trusted
 * (`MCP_DISCOVERY_TRUSTED=k8s,tailscale`); an untrusted one is proposed with `enabled: false`.
 *
 * {@link DiscoveryService} keeps the sources named by `MCP_DISCOVERY` running inside the gateway:
 * every list is bounded by `MCP_DISCOVERY_TIMEOUT_MS`, a watching source is followed and
 * restarted, a failed or stalled one is retried with backoff, and each change is an event.
 * @module
 */
import { type Clock, pause, systemClock, type TimerHandle } from "../support/clock.ts";
import type { GatewayEvent } from "../bus/events.ts";
import type { DiscoveryCandidate, DiscoverySource } from "../plugin_api/mod.ts";
import { DISCOVERY_MARKER } from "../proxy/fleet_origin.ts";
import {
  checkOutsideText,
  checkRemoteUrl,
  isOutsideText,
  OutsideTextError,
  quoteOutside,
} from "../support/outside_text.ts";
import { privateAddressOf } from "../support/private_address.ts";
import { type SyncProposal, withYaml } from "./sync_plan.ts";

export { DISCOVERY_MARKER };

const MAX_LABELS = 16;
const MAX_ERRORS = 50;
/**
 * Candidates kept at once per source: a network that announces without end cannot grow the
 * gateway, and one flooded source (any host on a LAN can announce) cannot crowd out another's.
 */
export const MAX_CANDIDATES = 1_000;

/**
 * Why a candidate cannot be proposed (undefined when it can): an announcement is outside the
 * trust boundary, so its source, id, transport and URL must pass the strict checks first.
 */
export function candidateProblem(candidate: DiscoveryCandidate): string | undefined {
  try {
    checkOutsideText(candidate.source, "source", "source");
    checkOutsideText(candidate.id, "id", "candidateId");
    if (candidate.removed) return undefined;
    if (candidate.transport !== "http" && candidate.transport !== "sse") {
      throw new OutsideTextError(
        `transport ${quoteOutside(String(candidate.transport))} must be http or sse`,
      );
    }
    checkRemoteUrl(candidate.url, "url");
    return undefined;
  } catch (error) {
    if (!(error instanceof OutsideTextError)) throw error;
    const from = isOutsideText(candidate.source, "source")
      ? candidate.source
      : quoteOutside(String(candidate.source));
    return `discovery: ignored a candidate from ${from}: ${error.message}`;
  }
}

/** The labels worth showing: plain keys and values only, at most {@link MAX_LABELS}. */
function shownLabels(labels: Record<string, string> | undefined): Record<string, string> {
  const shown: Record<string, string> = {};
  for (const [key, value] of Object.entries(labels ?? {}).slice(0, MAX_LABELS)) {
    if (isOutsideText(key, "candidateId") && isOutsideText(value, "literal")) shown[key] = value;
  }
  return shown;
}

/** What a proposal needs to know of the fleet: ids taken and endpoints already served. */
export interface FleetView {
  id: string;
  url?: string;
}

/** Narrows a plugin instance to a discovery source. */
export function isDiscoverySource(value: unknown): value is DiscoverySource {
  if (typeof value !== "object" || value === null) return false;
  const source = value as Record<string, unknown>;
  return typeof source.list === "function" || typeof source.discover === "function";
}

/** A fleet id for a candidate: `<source>-<id>`, in the fleet id alphabet (no `_`). */
export function candidateServerId(candidate: DiscoveryCandidate): string {
  const slug = `${candidate.source}-${candidate.id}`.toLowerCase().replace(/[^a-z0-9-]+/g, "-")
    .replace(/-+/g, "-").slice(0, 48).replace(/^-|-$/g, "");
  return slug === "" ? "discovered" : slug;
}

/** Proposals for `candidates`, skipping endpoints the fleet already has. */
export function candidateProposals(
  candidates: Iterable<DiscoveryCandidate>,
  fleet: readonly FleetView[],
  trusted: ReadonlySet<string>,
): SyncProposal[] {
  const urls = new Set(fleet.map((s) => s.url).filter(Boolean));
  const ids = new Set(fleet.map((s) => s.id));
  const proposals: SyncProposal[] = [];
  for (const candidate of candidates) {
    if (candidate.removed || candidateProblem(candidate) || urls.has(candidate.url)) continue;
    urls.add(candidate.url);
    let server = candidateServerId(candidate);
    for (let n = 2; ids.has(server); n++) server = `${candidateServerId(candidate)}-${n}`;
    ids.add(server);
    const trust = trusted.has(candidate.source);
    const entry: Record<string, unknown> = {
      id: server,
      url: candidate.url,
      transport: candidate.transport,
      ...(trust ? {} : { enabled: false }),
    };
    const labels = shownLabels(candidate.labels);
    // Discovery finds servers on the operator's own networks by design: allowed, but said.
    const inside = privateAddressOf(candidate.url);
    proposals.push(withYaml({
      id: `add:${server}`,
      action: "add",
      server,
      source: `discovery:${candidate.source}`,
      name: candidate.id,
      entry,
      ...(Object.keys(labels).length > 0 ? { labels } : {}),
      reason: trust
        ? `found by ${candidate.source} (a trusted source)`
        : `found by ${candidate.source}; proposed disabled: review it, or trust the source with MCP_DISCOVERY_TRUSTED`,
      marker: `${DISCOVERY_MARKER} ${candidate.source}: ${candidate.id}`,
      ...(inside
        ? {
          warning: `its url host ${inside.host} is ${inside.kind}, inside the gateway's own ` +
            "network: apply it only if you expect a server there",
        }
        : {}),
    }));
  }
  return proposals.sort((a, b) => a.server.localeCompare(b.server));
}

/** The setting that bounds one list; named in every timeout message. */
export const TIMEOUT_SETTING = "MCP_DISCOVERY_TIMEOUT_MS";

/** A list that did not answer in time. */
export class DiscoveryTimeoutError extends Error {
  constructor(what: string, timeoutMs: number) {
    super(
      `${what} did not answer within ${timeoutMs} ms (${TIMEOUT_SETTING}); ` +
        "check that the source is reachable, or raise the setting",
    );
    this.name = "DiscoveryTimeoutError";
  }
}

/**
 * Runs `call` with a signal aborted after `timeoutMs` on `clock`, rejecting then with a
 * {@link DiscoveryTimeoutError} naming `what` (a call that ignores the signal is left behind).
 */
export async function withTimeout<T>(
  what: string,
  call: (signal: AbortSignal) => Promise<T>,
  options: { clock: Clock; timeoutMs: number; signal?: AbortSignal },
): Promise<T> {
  const controller = new AbortController();
  const abort = () => controller.abort();
  options.signal?.addEventListener("abort", abort, { once: true });
  let timer: TimerHandle | undefined;
  const timedOut = new Promise<never>((_, reject) => {
    timer = options.clock.setTimeout(() => {
      reject(new DiscoveryTimeoutError(what, options.timeoutMs));
      controller.abort();
    }, options.timeoutMs);
  });
  try {
    return await Promise.race([call(controller.signal), timedOut]);
  } finally {
    timer?.cancel();
    options.signal?.removeEventListener("abort", abort);
    // Whatever the call still holds (a socket, an mDNS listener) is let go.
    controller.abort();
  }
}

/** Candidates from each source, once, each source bounded by `timeoutMs`. */
export async function collectCandidates(
  sources: readonly DiscoverySource[],
  timeoutMs = 5_000,
  clock: Clock = systemClock,
): Promise<{ candidates: DiscoveryCandidate[]; errors: string[] }> {
  const candidates = new Map<string, DiscoveryCandidate>();
  const errors: string[] = [];
  await Promise.all(sources.map(async (source, index) => {
    const name = nameOf(source, index);
    const mine = new Set<string>();
    const problem = (c: DiscoveryCandidate) => {
      const key = `${c.source}/${c.id}`;
      const found = candidateProblem(c) ??
        (!c.removed && !mine.has(key) && mine.size >= MAX_CANDIDATES
          ? `discovery: ignored further candidates of ${name}: more than ${MAX_CANDIDATES} at once`
          : undefined);
      // A flood of bad announcements must not grow the report without bound.
      if (found && errors.length < MAX_ERRORS) errors.push(found);
      return found !== undefined;
    };
    const keep = (c: DiscoveryCandidate) => {
      const key = `${c.source}/${c.id}`;
      if (c.removed) candidates.delete(key), mine.delete(key);
      else candidates.set(key, c), mine.add(key);
    };
    try {
      if (source.list) {
        const found = await withTimeout(
          `discovery source ${name}`,
          (signal) => source.list!(signal),
          { clock, timeoutMs },
        );
        for (const c of found) if (!problem(c) && !c.removed) keep(c);
      } else if (source.discover) {
        // A feed never ends by itself: it is read for `timeoutMs`, then let go.
        const controller = new AbortController();
        const timer = clock.setTimeout(() => controller.abort(), timeoutMs);
        try {
          for await (const c of source.discover(controller.signal)) {
            if (!problem(c)) keep(c);
          }
        } catch (error) {
          if (!controller.signal.aborted) throw error;
        } finally {
          timer.cancel();
          controller.abort();
        }
      }
    } catch (error) {
      if (errors.length < MAX_ERRORS) {
        errors.push(error instanceof Error ? error.message : String(error));
      }
    }
  }));
  return { candidates: [...candidates.values()], errors };
}

/** One discovery round over plugin instances (non-discovery values are ignored). */
export async function discoverOnce(
  instances: readonly unknown[],
  fleet: readonly FleetView[],
  options: { trusted: ReadonlySet<string>; timeoutMs?: number; clock?: Clock },
): Promise<{ proposals: SyncProposal[]; errors: string[] }> {
  const { candidates, errors } = await collectCandidates(
    instances.filter(isDiscoverySource),
    options.timeoutMs,
    options.clock,
  );
  return { proposals: candidateProposals(candidates, fleet, options.trusted), errors };
}

/** A discovery source and the plugin it comes from (named in events and messages). */
export interface NamedSource {
  plugin: string;
  source: DiscoverySource;
}

/** The events the service publishes. */
export type DiscoveryEvent = Extract<GatewayEvent, { type: `discovery.${string}` }>;

/** How a {@link DiscoveryService} runs. */
export interface DiscoveryServiceOptions {
  clock: Clock;
  /** Bound of one list (MCP_DISCOVERY_TIMEOUT_MS). */
  timeoutMs: number;
  /** How often a source without a live feed is listed again (MCP_DISCOVERY_INTERVAL_SECONDS). */
  intervalMs: number;
  /** First wait after a failure; it doubles per failure in a row up to `maxBackoffMs`. */
  backoffMs?: number;
  maxBackoffMs?: number;
  /** Every change and failure, as a bus event. */
  onEvent?: (event: DiscoveryEvent) => void;
}

/**
 * Keeps candidates current from running sources. Each source is listed (bounded by the
 * timeout) and then followed through its live feed when it has one (`discover`, e.g. the k8s
 * watch), else listed again every interval; a list replaces that source's candidates, so what
 * went away is removed. A source that fails, stalls or ends is retried with backoff on the
 * injected clock. Nothing is added to the fleet: candidates become proposals for an operator.
 */
export class DiscoveryService {
  #sources: readonly NamedSource[];
  #options: Required<Omit<DiscoveryServiceOptions, "onEvent">>;
  #onEvent: (event: DiscoveryEvent) => void;
  /** Per plugin: its candidates by `<source>/<id>`. */
  #byPlugin = new Map<string, Map<string, DiscoveryCandidate>>();
  #controller = new AbortController();
  #loops: Promise<void>[] = [];
  #ignored = 0;

  constructor(sources: readonly NamedSource[], options: DiscoveryServiceOptions) {
    this.#sources = sources;
    this.#options = {
      backoffMs: 1_000,
      maxBackoffMs: 60_000,
      ...options,
    };
    this.#onEvent = options.onEvent ?? (() => {});
    for (const { plugin } of sources) this.#byPlugin.set(plugin, new Map());
  }

  /** The plugins followed. */
  get plugins(): string[] {
    return this.#sources.map((s) => s.plugin);
  }

  /** Starts following every source (once). */
  start(): void {
    if (this.#loops.length > 0) return;
    this.#loops = this.#sources.map((source) => this.#follow(source));
  }

  /** Candidates seen and not removed, every source together. */
  get candidates(): DiscoveryCandidate[] {
    return [...this.#byPlugin.values()].flatMap((m) => [...m.values()]);
  }

  /**
   * Lists every source once more now, each bounded by the timeout (`?discover=true`); a source
   * that fails keeps what it had. Returns the failures.
   */
  async refresh(): Promise<string[]> {
    const errors: string[] = [];
    await Promise.all(this.#sources.map(async (named) => {
      if (!named.source.list) return;
      try {
        this.#replace(named.plugin, await this.#list(named));
      } catch (error) {
        if (!this.#controller.signal.aborted) errors.push(reasonOf(named.plugin, error));
      }
    }));
    return errors;
  }

  /** Stops every source and waits for them to let go. */
  async stop(): Promise<void> {
    this.#controller.abort();
    await Promise.allSettled(this.#loops);
  }

  async #follow(named: NamedSource): Promise<void> {
    const signal = this.#controller.signal;
    let failures = 0;
    while (!signal.aborted) {
      let wait = this.#options.intervalMs;
      try {
        if (named.source.list) this.#replace(named.plugin, await this.#list(named));
        failures = 0;
        if (named.source.discover) {
          for await (const c of named.source.discover(signal)) this.#see(named.plugin, c);
          // A feed that ends (a dropped watch the source did not resume) is started again.
          wait = this.#options.backoffMs;
        }
      } catch (error) {
        if (signal.aborted) return;
        failures++;
        wait = Math.min(
          this.#options.backoffMs * 2 ** (failures - 1),
          this.#options.maxBackoffMs,
        );
        this.#onEvent({
          type: "discovery.source_error",
          plugin: named.plugin,
          reason: reasonOf(named.plugin, error),
          retryInMs: wait,
        });
      }
      await this.#wait(wait);
    }
  }

  #list(named: NamedSource): Promise<DiscoveryCandidate[]> {
    return withTimeout(
      `discovery source ${named.plugin}`,
      (signal) => named.source.list!(signal),
      {
        clock: this.#options.clock,
        timeoutMs: this.#options.timeoutMs,
        signal: this.#controller.signal,
      },
    );
  }

  /** A fresh snapshot of one plugin: new ones added, changed ones replaced, absent ones removed. */
  #replace(plugin: string, snapshot: readonly DiscoveryCandidate[]): void {
    if (this.#controller.signal.aborted) return;
    this.#ignored = 0;
    const seen = new Set<string>();
    for (const candidate of snapshot) {
      if (candidate.removed) continue;
      if (this.#see(plugin, candidate)) seen.add(keyOf(candidate));
    }
    const known = this.#byPlugin.get(plugin)!;
    for (const [key, candidate] of [...known]) {
      if (!seen.has(key)) this.#see(plugin, { ...candidate, removed: true });
    }
  }

  /** Takes one candidate in; true when it is (still) held. */
  #see(plugin: string, candidate: DiscoveryCandidate): boolean {
    const problem = candidateProblem(candidate);
    if (problem) return this.#ignore(plugin, problem), false;
    const key = keyOf(candidate);
    const known = this.#byPlugin.get(plugin)!;
    const held = known.get(key);
    if (candidate.removed) {
      if (!held) return false;
      known.delete(key);
      this.#onEvent({
        type: "discovery.candidate_removed",
        plugin,
        source: candidate.source,
        id: candidate.id,
      });
      return false;
    }
    if (!held && known.size >= MAX_CANDIDATES) {
      this.#ignore(
        plugin,
        `discovery: ignored further candidates of ${plugin}: more than ${MAX_CANDIDATES} at once`,
      );
      return false;
    }
    const entry: DiscoveryCandidate = {
      id: candidate.id,
      source: candidate.source,
      transport: candidate.transport,
      url: candidate.url,
      ...(candidate.labels ? { labels: candidate.labels } : {}),
    };
    known.set(key, entry);
    if (!held || held.url !== entry.url || held.transport !== entry.transport) {
      this.#onEvent({
        type: "discovery.candidate_added",
        plugin,
        source: entry.source,
        id: entry.id,
        url: entry.url,
        transport: entry.transport,
      });
    }
    return true;
  }

  /** Reports an ignored candidate; at most {@link MAX_ERRORS} per snapshot, so a flood stays quiet. */
  #ignore(plugin: string, reason: string): void {
    if (this.#ignored++ >= MAX_ERRORS) return;
    this.#onEvent({ type: "discovery.source_error", plugin, reason, retryInMs: 0 });
  }

  /** Waits `ms` on the clock, or less when the service stops. */
  #wait(ms: number): Promise<void> {
    return pause(this.#options.clock, ms, this.#controller.signal);
  }
}

const keyOf = (c: DiscoveryCandidate) => `${c.source}/${c.id}`;

/** What a failure says, prefixed with its plugin unless it names it already. */
function reasonOf(plugin: string, error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.includes(plugin) ? message : `${plugin}: ${message}`;
}

/** A name for an unnamed source in a one-off round. */
function nameOf(source: DiscoverySource, index: number): string {
  const named = (source as { name?: unknown }).name;
  return typeof named === "string" ? named : `#${index + 1}`;
}
