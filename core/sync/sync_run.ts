/**
 * One sync: read the registry (incrementally when the state file allows), compare with the fleet
 * file, and optionally apply everything proposed. Shared by `main.ts sync` and the admin API.
 * @module
 */
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { syncAllowsPrivate, syncEnvAllow } from "../proxy/fleet_origin.ts";
import { privateNamesOf, type ResolveHost } from "../support/private_address.ts";
import { readRegistry, type RegistryQuery } from "./registry_client.ts";
import { applyProposals } from "./sync_apply.ts";
import { planSync, type SyncPlan } from "./sync_plan.ts";
import { readSyncState, writeSyncState } from "./sync_state.ts";

/** What one sync needs. */
export interface SyncOptions {
  /** Registry URL or file. */
  registry: string;
  fleetPath: string;
  /** The fleet to compare with, when it is not (only) the file (the cluster's shared fleet). */
  fleetText?: string;
  /** Ignore the state file: read the whole registry (and so allow removals). */
  full?: boolean;
  search?: string;
  include?: string[];
  env: Record<string, string | undefined>;
  timeoutMs?: number;
  fetch?: typeof fetch;
  signal?: AbortSignal;
  /** Looks up remote hosts' addresses (the system's resolver by default). */
  resolveHost?: ResolveHost;
}

/** What one sync found. */
export interface SyncResult extends SyncPlan {
  registry: string;
  fleetPath: string;
  /** The `updated_since` used, when the run was incremental. */
  updatedSince?: string;
  /** When the listing was read. */
  readAt: string;
  /** A filtered run (`search`, `include`) saw part of the registry: it is not remembered. */
  filtered: boolean;
}

/** Reads the registry and compares; writes nothing. */
export async function planFromRegistry(options: SyncOptions): Promise<SyncResult> {
  const readAt = new Date().toISOString();
  const state = options.full ? undefined : await readSyncState(options.fleetPath);
  const updatedSince = state?.registry === options.registry ? state.lastSync : undefined;
  const query: RegistryQuery = {};
  if (options.search) query.search = options.search;
  if (updatedSince) query.updatedSince = updatedSince;
  if (options.timeoutMs) query.timeoutMs = options.timeoutMs;
  if (options.fetch) query.fetch = options.fetch;
  if (options.signal) query.signal = options.signal;
  const listing = await readRegistry(options.registry, query);
  const allowPrivate = syncAllowsPrivate(options.env);
  // Names are looked up before the mapping judges them: a registry's DNS name may point inside.
  const privateNames = allowPrivate ? undefined : await privateNamesOf(
    listing.servers.flatMap(({ server }) =>
      (Array.isArray(server.remotes) ? server.remotes : [])
        .map((r) => r?.url).filter((u): u is string => typeof u === "string")
    ),
    options.resolveHost,
  );
  const text = options.fleetText ??
    await Deno.readTextFile(options.fleetPath).catch((error) => {
      if (error instanceof Deno.errors.NotFound) return "";
      throw error;
    });
  const plan = planSync(text, listing, {
    complete: updatedSince === undefined && !options.search,
    env: options.env,
    allow: syncEnvAllow(options.env),
    trusted: trustedRegistry(options.registry, options.env),
    dataDir: syncDataDir(options.env),
    ...(allowPrivate ? { allowPrivate: true } : {}),
    ...(privateNames ? { privateNames } : {}),
    ...(options.include ? { include: options.include } : {}),
  });
  return {
    registry: options.registry,
    fleetPath: options.fleetPath,
    ...(updatedSince ? { updatedSince } : {}),
    readAt,
    filtered: Boolean(options.search || options.include?.length),
    ...plan,
  };
}

/**
 * `MCP_SYNC_TRUSTED_REGISTRIES` (comma-separated URLs, paths or file:// URLs): the registries whose
 * new entries are written enabled. A path matches however it is spelled (relative, absolute).
 */
export function trustedRegistry(
  registry: string,
  env: Record<string, string | undefined>,
): boolean {
  const norm = (source: string) => {
    const text = source.trim();
    if (/^https?:\/\//i.test(text)) return text.replace(/\/+$/, "");
    return resolve(/^file:/i.test(text) ? fileURLToPath(text) : text);
  };
  return (env.MCP_SYNC_TRUSTED_REGISTRIES ?? "").split(",").filter((s) => s.trim() !== "")
    .map(norm).includes(norm(registry));
}

/**
 * Where declared paths go: `<MCP_DATA_DIR>/servers` (default `./.agent33/servers`), absolute, so
 * the child's working directory does not matter; each server gets `<dir>/<id>`.
 */
export function syncDataDir(env: Record<string, string | undefined>): string {
  return resolve(env.MCP_DATA_DIR ?? ".agent33", "servers");
}

/** Writes every proposal of `result` and remembers the sync for the next incremental run. */
export async function applySyncResult<V, R = never>(
  result: SyncResult,
  validate: (text: string) => V,
  apply?: (validated: V) => Promise<R>,
): Promise<{ changed: boolean; applied?: R }> {
  const outcome = result.proposals.length === 0
    ? { changed: false }
    : await applyProposals(result.fleetPath, result.proposals, validate, apply);
  if (!result.filtered) {
    await writeSyncState(result.fleetPath, { registry: result.registry, lastSync: result.readAt });
  }
  return outcome;
}
