/**
 * Compares a registry listing with the fleet file and proposes changes: add, update (a new
 * version or endpoint), disable (deprecated or deleted upstream) and remove (gone from the
 * registry). Only entries sync wrote are ever updated, disabled or removed: they carry a
 * `# synced from registry: <name>@<version>` comment line, so hand-written entries are left alone.
 * @module
 */
import { parse } from "yaml";
import { compileGlobs } from "../support/glob.ts";
import { SYNC_MARKER } from "../proxy/fleet_origin.ts";
import { entryText } from "../proxy/fleet_writer.ts";
import { isOutsideText, quoteOutside } from "../support/outside_text.ts";
import type { RegistryListing } from "./registry_client.ts";
import type { RegistryServer } from "./registry_types.ts";
import { slugOf, toFleetEntry, uniqueId } from "./registry_mapping.ts";

export { SYNC_MARKER };

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
  /** Exactly what is written for an add or update: the marker comment and the entry, as YAML. */
  yaml?: string;
  /** Directories the entry is given; created when the proposal is applied. */
  paths?: string[];
  /** Why, in one line. */
  reason: string;
  /** The comment line written above an added entry (default: the registry marker). */
  marker?: string;
  /** What a discovery plugin said about the server. */
  labels?: Record<string, string>;
  /** Something the operator should know before applying it (e.g. a URL into a private network). */
  warning?: string;
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
  /** `MCP_SYNC_ENV_ALLOW`: the variables a synced entry may reference (default none). */
  allow?: ReadonlySet<string>;
  /** The registry is in `MCP_SYNC_TRUSTED_REGISTRIES`: new entries are written enabled. */
  trusted?: boolean;
  /** Where declared paths go: `<dataDir>/<id>` per server. */
  dataDir?: string;
  /** `MCP_SYNC_ALLOW_PRIVATE=true`: registry remotes may point at private and loopback hosts. */
  allowPrivate?: boolean;
  /** Remote hosts (names) a registry may not point at, with why (`privateNamesOf`). */
  privateNames?: ReadonlyMap<string, string>;
}

/** The marker comment of a proposal, without its `#`: the registry's, else discovery's. */
export function markerComment(proposal: SyncProposal): string {
  const line = proposal.marker ?? `${SYNC_MARKER} ${proposal.name}@${proposal.to}`;
  return line.replace(/^#/, "");
}

/** The proposal with `yaml`, the text an add or update writes. */
export function withYaml(proposal: SyncProposal): SyncProposal {
  if (!proposal.entry) return proposal;
  return { ...proposal, yaml: entryText(proposal.entry, { comment: markerComment(proposal) }) };
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
    const version = ref.slice(at + 1);
    if (!isOutsideText(name, "registryName") || !isOutsideText(version, "version")) return;
    found.set(name, { id, name, version, enabled: enabled.get(id) ?? true });
  });
  return found;
}

/** Compares `listing` with the fleet file's text. */
export function planSync(text: string, listing: RegistryListing, options: PlanOptions): SyncPlan {
  const plan: SyncPlan = {
    proposals: [],
    skipped: listing.skipped.map((s) => ({
      ...s,
      name: shownName(s.name),
      ...(s.version === undefined ? {} : { version: shownVersion(s.version) }),
    })),
    unchanged: [],
  };
  const keep = options.include?.length ? compileGlobs(options.include) : () => true;
  const synced = syncedEntries(text);
  const entries = entriesById(text);
  const taken = new Set(entries.keys());
  // Nothing the registry names is used before it passes the strict checks.
  const valid = listing.servers.filter(({ server }) => {
    const problem = !isOutsideText(server.name, "registryName")
      ? "refused: its name must be a reverse-DNS namespace and a name (letters, digits, . _ -, one /), at most 200 characters"
      : !isOutsideText(server.version, "version")
      ? "refused: its version must be letters, digits, . + _ - (at most 64 characters)"
      : undefined;
    if (problem) {
      plan.skipped.push({
        name: shownName(server.name),
        version: shownVersion(server.version),
        reason: problem,
      });
    }
    return problem === undefined;
  });
  const mapping = {
    env: options.env,
    allow: options.allow ?? new Set<string>(),
    dataDir: options.dataDir ?? ".agent33/servers",
    ...(options.allowPrivate ? { allowPrivate: true } : {}),
    ...(options.privateNames ? { privateNames: options.privateNames } : {}),
  };
  const latest = latestByName(valid.filter((s) => keep(s.server.name)));
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
    // An entry the operator enabled stays enabled through an update (when nothing is missing).
    const trusted = existing ? existing.enabled : options.trusted === true;
    const mapped = toFleetEntry(detail, id, { ...mapping, trusted });
    if ("skip" in mapped) {
      plan.skipped.push({ ...ref, reason: mapped.skip });
      continue;
    }
    const note = mapped.notes.length > 0 ? ` (${mapped.notes.join("; ")})` : "";
    const paths = mapped.paths.length > 0 ? { paths: mapped.paths } : {};
    if (!existing) {
      plan.proposals.push({
        id: `add:${id}`,
        action: "add",
        server: id,
        source: "registry",
        ...ref,
        to: detail.version,
        entry: mapped.entry,
        ...paths,
        reason: `new in the registry${note}`,
      });
    } else if (existing.version !== detail.version) {
      // The operator enabled what the entry ran; a version that runs something else waits again.
      const other = existing.enabled ? runsOtherwise(entries.get(id), mapped.entry) : undefined;
      if (other) mapped.entry.enabled = false;
      const review = other ? `; ${other}: review it and enable it again` : "";
      plan.proposals.push({
        id: `update:${id}`,
        action: "update",
        server: id,
        source: "registry",
        ...ref,
        from: existing.version,
        to: detail.version,
        entry: mapped.entry,
        ...paths,
        reason: `version ${existing.version} → ${detail.version}${review}${note}`,
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
  plan.proposals = plan.proposals.map(withYaml).sort((a, b) => a.server.localeCompare(b.server));
  return plan;
}

/** A name as shown in a plan: as given when it passes the check, else quoted with escapes. */
function shownName(name: unknown): string {
  return isOutsideText(name, "registryName") ? name : quoteOutside(String(name));
}

function shownVersion(version: unknown): string {
  return isOutsideText(version, "version") ? version : quoteOutside(String(version));
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
  for (const [id, entry] of entriesById(text)) ids.set(id, entry.enabled !== false);
  return ids;
}

/** The fleet file's entries by id, as parsed (none when it does not parse). */
function entriesById(text: string): Map<string, Record<string, unknown>> {
  const entries = new Map<string, Record<string, unknown>>();
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return entries;
  }
  const list = (doc as { proxy_servers?: unknown } | null)?.proxy_servers;
  if (!Array.isArray(list)) return entries;
  for (const item of list) {
    const id = (item as { id?: unknown } | null)?.id;
    if (typeof id === "string") entries.set(id, item as Record<string, unknown>);
  }
  return entries;
}

/**
 * How an update would run something other than the entry the operator enabled: another package or
 * endpoint, or variables it did not set before (undefined when it runs the same thing).
 */
function runsOtherwise(
  before: Record<string, unknown> | undefined,
  after: Record<string, unknown>,
): string | undefined {
  if (before === undefined) return undefined;
  const runs = (entry: Record<string, unknown>) => {
    if (Array.isArray(entry.command)) {
      // `npm:<package>@<version>`: the version may change, the package may not.
      return String(entry.command[2] ?? "").replace(/@[^@/]*$/, "");
    }
    return URL.canParse(String(entry.url)) ? new URL(String(entry.url)).origin : String(entry.url);
  };
  if (runs(before) !== runs(after)) return `it now runs ${runs(after)}, not ${runs(before)}`;
  const had = new Set(Object.keys((before.env ?? {}) as object));
  const added = Object.keys((after.env ?? {}) as object).filter((name) => !had.has(name));
  if (added.length > 0) return `it now sets ${added.join(", ")}`;
  return undefined;
}
