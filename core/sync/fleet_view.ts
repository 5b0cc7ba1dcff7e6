/**
 * The ids and endpoints of a fleet file's entries, read leniently (a file that does not parse
 * yields nothing): enough to avoid proposing what is already there.
 * @module
 */
import { parse } from "yaml";
import type { FleetView } from "./discovery_service.ts";

/** `{ id, url }` of every entry in the fleet file's text. */
export function fleetViewOf(text: string): FleetView[] {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return [];
  }
  const list = (doc as { proxy_servers?: unknown } | null)?.proxy_servers;
  if (!Array.isArray(list)) return [];
  return list.flatMap((item) => {
    const { id, url } = (item ?? {}) as { id?: unknown; url?: unknown };
    if (typeof id !== "string") return [];
    return [{ id, ...(typeof url === "string" ? { url } : {}) }];
  });
}
