/**
 * Compares a registry listing with the fleet file and proposes changes: add, update (a new
 * version or endpoint), disable (deprecated or deleted upstream) and remove (gone from the
 * registry). Only entries sync wrote are ever updated, disabled or removed: they carry a
 * `# synced from registry: <name>@<version>` comment line, so hand-written entries are left alone.
 * @module
 */
import { parse } from "yaml";
import { compileGlobs } from "../glob.ts";
import type { RegistryListing } from "./registry_client.ts";
import type { RegistryServer } from "./registry_types.ts";
import { slugOf, toFleetEntry, uniqueId } from "./registry_mapping.ts";

/** The comment line that marks an entry as written by sync. */
export const SYNC_MARKER = "# synced from registry:";

/** What a proposal does to the fleet file. */
export type ProposalAction = "add" | "update" | "disable" | "remove";

/** One proposed change of one fleet entry. */
export interface SyncProposal {
  /** `<action>:<server id>`, what apply selects. */
  id: string;
  action: ProposalAction;
  /** The fleet entry's id. */
  server: string;
  /** Where it came from: `registry`, or `discovery:<plugin>`. */
  source: string;
  /** The registry name, e.g. `io.github.acme/weather`. */
  name?: string;
  /** The version it moves from and to. */
  from?: string;
  to?: string;
  /** The full entry to write (add and update). */
  entry?: Record<string, unknown>;
  /** Why, in one line. */
  reason: string;
  /** The comment line written above an added entry (default: the registry marker). */
  marker?: string;
  /** What a discovery plugin said about the server. */
  labels?: Record<string, string>;
}

/** A server the registry lists that sync will not touch, and why. */
export interface SkippedServer {
  name: string;
  version?: string;
  reason: string;
}

/** Everything one comparison found. */
export interface SyncPlan {
  proposals: SyncProposal[];
  skipped: SkippedServer[];
  /** Synced fleet ids that already match the registry. */
  unchanged: string[];
}

/** A synced entry found in the fleet file. */
export interface SyncedEntry {
  id: string;
  name: string;
  version: string;
  enabled: boolean;
}

/** How to compare. */
export interface PlanOptions {
  /** Registry-name globs to keep (`--include`); empty keeps all. */
  include?: string[];
  /** True when the listing is the whole registry: only then can absence mean removal. */
  complete: boolean;
  /** Decides which secrets are set (an entry whose variables are unset is written disabled). */
  env: Record<string, string | undefined>;
}

/** The synced entries of a fleet file's text, by registry name. */
export function syncedEntries(text: string): Map<string, SyncedEntry> {
  const found = new Map<string, SyncedEntry>();
  const enabled = enabledById(text);
  const lines = text.split("\n");
  lines.forEach((line, i) => {
    const marker = line.trim();
    if (!marker.startsWith(SYNC_MARKER)) return;
    const id = /^\s*-\s+id:\s*["']?([a-z0-9][a-z0-9_-]*)["']?\s*$/.exec(lines[i + 1] ?? "")?.[1];
    const ref = marker.slice(SYNC_MARKER.length).trim();
    const at = ref.lastIndexOf("@");
    if (id === undefined || at <= 0) return;
    const name = ref.slice(0, at);
    found.set(name, { id, name, version: ref.slice(at + 1), enabled: enabled.get(id) ?? true });
  });
  return found;
}

/** Every id in the fleet file, synced or not. */
export function fleetIds(text: string): Set<string> {
  return new Set(enabledById(text).keys());
}

/** Compares `listing` with the fleet file's text. */
export function planSync(text: string, listing: RegistryListing, options: PlanOptions): SyncPlan {
  const plan: SyncPlan = { proposals: [], skipped: [...listing.skipped], unchanged: [] };
  const keep = options.include?.length ? compileGlobs(options.include) : () => true;
  const synced = syncedEntries(text);
  const taken = fleetIds(text);
  const latest = latestByName(listing.servers.filter((s) => keep(s.server.name)));
  for (const { server: detail, status } of latest) {
    const existing = synced.get(detail.name);
    const ref = { name: detail.name, version: detail.version };
    if (status !== "active") {
      if (existing?.enabled) {
        plan.proposals.push({
          id: `disable:${existing.id}`,
          action: "disable",
          server: existing.id,
          source: "registry",
          ...ref,
          reason: `${detail.name} is ${status} in the registry`,
        });
      } else if (existing) {
        plan.unchanged.push(existing.id);
      } else {
        plan.skipped.push({ ...ref, reason: `${status} in the registry: not added` });
      }
      continue;
    }
    const id = existing?.id ?? uniqueId(slugOf(detail.name), taken);
    taken.add(id);
    const mapped = toFleetEntry(detail, id, options.env);
    if ("skip" in mapped) {
      plan.skipped.push({ ...ref, reason: mapped.skip });
      continue;
    }
    const note = mapped.note ? ` (${mapped.note})` : "";
    if (!existing) {
      plan.proposals.push({
        id: `add:${id}`,
        action: "add",
        server: id,
        source: "registry",
        ...ref,
        to: detail.version,
        entry: mapped.entry,
        reason: `new in the registry${note}`,
      });
    } else if (existing.version !== detail.version) {
      // An operator's `enabled: false` survives an update.
      if (!existing.enabled) mapped.entry.enabled = false;
      plan.proposals.push({
        id: `update:${id}`,
        action: "update",
        server: id,
        source: "registry",
        ...ref,
        from: existing.version,
        to: detail.version,
        entry: mapped.entry,
        reason: `version ${existing.version} → ${detail.version}${note}`,
      });
    } else {
      plan.unchanged.push(id);
    }
  }
  if (options.complete && !options.include?.length) {
    const listed = new Set(listing.servers.map((s) => s.server.name));
    for (const entry of synced.values()) {
      if (listed.has(entry.name)) continue;
      plan.proposals.push({
        id: `remove:${entry.id}`,
        action: "remove",
        server: entry.id,
        source: "registry",
        name: entry.name,
        from: entry.version,
        reason: `${entry.name} is no longer in the registry`,
      });
    }
  }
  plan.proposals.sort((a, b) => a.server.localeCompare(b.server));
  return plan;
}

/** One version per server: the one the registry marks latest, else the last listed. */
function latestByName(servers: RegistryServer[]): RegistryServer[] {
  const byName = new Map<string, RegistryServer>();
  for (const server of servers) {
    const name = server.server.name;
    const seen = byName.get(name);
    if (seen?.isLatest === true && server.isLatest !== true) continue;
    byName.set(name, server);
  }
  return [...byName.values()].sort((a, b) => a.server.name.localeCompare(b.server.name));
}

function enabledById(text: string): Map<string, boolean> {
  const ids = new Map<string, boolean>();
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return ids;
  }
  const list = (doc as { proxy_servers?: unknown } | null)?.proxy_servers;
  if (!Array.isArray(list)) return ids;
  for (const item of list) {
    const id = (item as { id?: unknown } | null)?.id;
    if (typeof id === "string") ids.set(id, (item as { enabled?: unknown }).enabled !== false);
  }
  return ids;
}
