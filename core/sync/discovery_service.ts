/**
 * Runs discovery plugins and turns what they find into fleet proposals. Nothing is ever added by
 * itself: a candidate becomes an `add` proposal, enabled only when its source is trusted
 * (`MCP_DISCOVERY_TRUSTED=k8s,tailscale`); an untrusted one is proposed with `enabled: false`.
 * @module
 */
import type { DiscoveryCandidate, DiscoverySource } from "../plugin_api.ts";
import { DISCOVERY_MARKER } from "../proxy/fleet_origin.ts";
import {
  checkOutsideText,
  checkRemoteUrl,
  isOutsideText,
  OutsideTextError,
  quoteOutside,
} from "./outside_text.ts";
import { type SyncProposal, withYaml } from "./sync_plan.ts";

export { DISCOVERY_MARKER };

const MAX_LABELS = 16;
const MAX_ERRORS = 50;
/** Candidates kept at once: a network that announces without end cannot grow the gateway. */
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
    }));
  }
  return proposals.sort((a, b) => a.server.localeCompare(b.server));
}

/** Candidates from each source, once: `list()`, else `discover()` until `timeoutMs` passes. */
export async function collectCandidates(
  sources: readonly DiscoverySource[],
  timeoutMs = 5_000,
): Promise<{ candidates: DiscoveryCandidate[]; errors: string[] }> {
  const candidates = new Map<string, DiscoveryCandidate>();
  const errors: string[] = [];
  await Promise.all(sources.map(async (source) => {
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), timeoutMs);
    try {
      const problem = (c: DiscoveryCandidate) => {
        const key = `${c.source}/${c.id}`;
        const found = candidateProblem(c) ??
          (!c.removed && !candidates.has(key) && candidates.size >= MAX_CANDIDATES
            ? `discovery: ignored further candidates: more than ${MAX_CANDIDATES} at once`
            : undefined);
        // A flood of bad announcements must not grow the report without bound.
        if (found && errors.length < MAX_ERRORS) errors.push(found);
        return found !== undefined;
      };
      if (source.list) {
        for (const c of await source.list()) {
          if (!problem(c)) candidates.set(`${c.source}/${c.id}`, c);
        }
      } else if (source.discover) {
        for await (const c of source.discover(controller.signal)) {
          if (problem(c)) continue;
          if (c.removed) candidates.delete(`${c.source}/${c.id}`);
          else candidates.set(`${c.source}/${c.id}`, c);
        }
      }
    } catch (error) {
      if (!controller.signal.aborted) {
        errors.push(error instanceof Error ? error.message : String(error));
      }
    } finally {
      clearTimeout(timer);
    }
  }));
  return { candidates: [...candidates.values()], errors };
}

/** One discovery round over plugin instances (non-discovery values are ignored). */
export async function discoverOnce(
  instances: readonly unknown[],
  fleet: readonly FleetView[],
  options: { trusted: ReadonlySet<string>; timeoutMs?: number },
): Promise<{ proposals: SyncProposal[]; errors: string[] }> {
  const { candidates, errors } = await collectCandidates(
    instances.filter(isDiscoverySource),
    options.timeoutMs,
  );
  return { proposals: candidateProposals(candidates, fleet, options.trusted), errors };
}

/**
 * Keeps candidates current from live sources (`discover`), restarting a feed that ends or fails
 * after a short backoff, and reports every change through `onChange`.
 */
export class DiscoveryService {
  #candidates = new Map<string, DiscoveryCandidate>();
  #controller = new AbortController();
  #loops: Promise<void>[] = [];
  #onChange: (candidates: DiscoveryCandidate[]) => void;
  #onError: (error: unknown) => void;
  #backoffMs: number;

  constructor(options: {
    onChange: (candidates: DiscoveryCandidate[]) => void;
    onError?: (error: unknown) => void;
    backoffMs?: number;
  }) {
    this.#onChange = options.onChange;
    this.#onError = options.onError ?? (() => {});
    this.#backoffMs = options.backoffMs ?? 1_000;
  }

  /** Starts following every source. */
  start(sources: readonly DiscoverySource[]): void {
    for (const source of sources) this.#loops.push(this.#follow(source));
  }

  /** Candidates seen and not removed. */
  get candidates(): DiscoveryCandidate[] {
    return [...this.#candidates.values()];
  }

  /** Stops every feed and waits for them to end. */
  async stop(): Promise<void> {
    this.#controller.abort();
    await Promise.allSettled(this.#loops);
  }

  async #follow(source: DiscoverySource): Promise<void> {
    const signal = this.#controller.signal;
    while (!signal.aborted) {
      try {
        if (source.discover) {
          for await (const c of source.discover(signal)) this.#see(c);
        } else if (source.list) {
          for (const c of await source.list()) this.#see(c);
        }
      } catch (error) {
        if (!signal.aborted) this.#onError(error);
      }
      await delay(this.#backoffMs, signal);
    }
  }

  #see(candidate: DiscoveryCandidate): void {
    const problem = candidateProblem(candidate);
    if (problem) return this.#onError(new Error(problem));
    const key = `${candidate.source}/${candidate.id}`;
    if (candidate.removed) this.#candidates.delete(key);
    else if (this.#candidates.has(key) || this.#candidates.size < MAX_CANDIDATES) {
      this.#candidates.set(key, candidate);
    } else {
      return this.#onError(
        new Error(`discovery: ignored further candidates: more than ${MAX_CANDIDATES} at once`),
      );
    }
    this.#onChange(this.candidates);
  }
}

/** Waits `ms`, or less when `signal` aborts. */
function delay(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
  });
}
