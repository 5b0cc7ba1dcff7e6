/**
 * How many pins the gateway keeps of tools a server no longer lists. A pin must outlive its
 * tool's absence (a tool withdrawn and brought back with another description is the rug pull
 * pinning exists to catch), so pins are not dropped with the catalog; but an upstream that lists
 * 2,000 new names on every refresh grew them without bound (23 → 430 MB of heap in a minute).
 * So each server keeps every pin of a listed tool and up to {@link MAX_ABSENT_PINS} of unlisted
 * ones; past that the most recently pinned unlisted ones go first, so a flood of fresh names
 * evicts its own pins, never the older ones of the tools the server had before it.
 * @module
 */

/** Pins of tools a server no longer lists, kept per server (a catalog holds ≤ 10,000 tools). */
export const MAX_ABSENT_PINS = 10_000;

/**
 * Drops pins of unlisted tools past `max`, newest first (a Map keeps insertion order, which is
 * pin order); returns the names dropped.
 */
export function evictAbsentPins(
  pins: Map<string, string>,
  listed: ReadonlySet<string>,
  max: number = MAX_ABSENT_PINS,
): string[] {
  const absent = [...pins.keys()].filter((name) => !listed.has(name));
  const evicted = absent.slice(max);
  for (const name of evicted) pins.delete(name);
  return evicted;
}
