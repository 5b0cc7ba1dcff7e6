/**
 * The small state file kept next to the fleet (`<fleet>.sync.json`): which registry was last
 * applied and when, so the next run asks only for what changed since (`updated_since`).
 * @module
 */

/** What the last applied sync remembers. */
export interface SyncState {
  registry: string;
  /** RFC 3339 time the listing was read (before the read, so nothing updated meanwhile is lost). */
  lastSync: string;
}

/** The state file of a fleet file. */
export function statePath(fleetPath: string): string {
  return `${fleetPath}.sync.json`;
}

/** The saved state, or undefined when there is none (or it is unreadable: then a full sync runs). */
export async function readSyncState(fleetPath: string): Promise<SyncState | undefined> {
  try {
    const state = JSON.parse(await Deno.readTextFile(statePath(fleetPath)));
    if (typeof state?.registry === "string" && typeof state?.lastSync === "string") return state;
  } catch {
    // Missing or corrupt: a full sync is always safe.
  }
  return undefined;
}

/** Saves the state atomically. */
export async function writeSyncState(fleetPath: string, state: SyncState): Promise<void> {
  const path = statePath(fleetPath);
  const temp = `${path}.${crypto.randomUUID()}.tmp`;
  await Deno.writeTextFile(temp, JSON.stringify(state, null, 2) + "\n");
  await Deno.rename(temp, path);
}
