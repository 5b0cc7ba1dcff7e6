/**
 * The descriptor snapshot: what a scan reads and `--save` writes. One entry per server with
 * everything the server shows a model (tools as in tools/list, prompts, resources, templates,
 * instructions, serverInfo).
 *
 * ```json
 * { "servers": [ { "id": "github", "serverInfo": { "name": "…", "version": "…" },
 *   "instructions": "…", "tools": [ … ], "prompts": [ … ], "resources": [ … ],
 *   "resourceTemplates": [ … ] } ] }
 * ```
 * @module
 */
import { GatewayError } from "../support/errors.ts";

/** One server's model-visible surface. */
export interface ServerDescriptor {
  id: string;
  serverInfo?: Record<string, unknown>;
  instructions?: string;
  tools: Record<string, unknown>[];
  prompts?: Record<string, unknown>[];
  resources?: Record<string, unknown>[];
  resourceTemplates?: Record<string, unknown>[];
}

/** A `--descriptors` / `--save` file. */
export interface DescriptorSnapshot {
  servers: ServerDescriptor[];
}

const LISTS = ["tools", "prompts", "resources", "resourceTemplates"] as const;

/** Validates a parsed snapshot; every problem is named with its JSON Pointer. */
export function parseSnapshot(value: unknown, source = "snapshot"): DescriptorSnapshot {
  const problems: string[] = [];
  const servers = (value as { servers?: unknown } | null)?.servers;
  if (!value || typeof value !== "object" || !Array.isArray(servers)) {
    throw invalid(source, ["/servers must be an array of servers"]);
  }
  const ids = new Set<string>();
  servers.forEach((server, i) => {
    const at = `/servers/${i}`;
    if (!server || typeof server !== "object") return problems.push(`${at} must be an object`);
    const s = server as Record<string, unknown>;
    if (typeof s.id !== "string" || s.id === "") {
      problems.push(`${at}/id must be a non-empty string`);
    } else if (ids.has(s.id)) problems.push(`${at}/id "${s.id}" is used twice`);
    else ids.add(s.id);
    if (!Array.isArray(s.tools)) problems.push(`${at}/tools must be an array`);
    for (const list of LISTS) {
      const items = s[list];
      if (items === undefined) continue;
      if (!Array.isArray(items)) {
        problems.push(`${at}/${list} must be an array`);
        continue;
      }
      items.forEach((item, j) => {
        if (!item || typeof item !== "object" || Array.isArray(item)) {
          problems.push(`${at}/${list}/${j} must be an object`);
        }
      });
    }
    if (s.instructions !== undefined && typeof s.instructions !== "string") {
      problems.push(`${at}/instructions must be a string`);
    }
  });
  if (problems.length > 0) throw invalid(source, problems);
  return value as DescriptorSnapshot;
}

/** Reads and validates a snapshot file. */
export async function readSnapshot(path: string): Promise<DescriptorSnapshot> {
  let text: string;
  try {
    text = await Deno.readTextFile(path);
  } catch (error) {
    throw invalid(path, [`cannot read: ${(error as Error).message}`]);
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw invalid(path, [`is not JSON: ${(error as Error).message}`]);
  }
  return parseSnapshot(value, path);
}

function invalid(source: string, problems: string[]): GatewayError {
  return new GatewayError(
    "config_invalid",
    `${source}: ${problems.join("; ")}`,
    { path: source, problems },
  );
}
