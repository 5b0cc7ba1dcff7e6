/**
 * The gateway's one writable directory (`MCP_DATA_DIR`, default `./.agent33`): the demo's audit
 * log, approvals file and the memory server's knowledge graph live there, and fleet files name it
 * as `${MCP_DATA_DIR}` so an upstream gets an absolute path whatever its own working directory.
 * @module
 */
import { isAbsolute, resolve } from "node:path";

/** The variable naming the data directory; fleet files interpolate it like any other. */
export const DATA_DIR_VARIABLE = "MCP_DATA_DIR";

/** Where the data directory is when nothing names one: relative to the working directory. */
export const DEFAULT_DATA_DIR = ".agent33";

/** The data directory as an absolute path: `MCP_DATA_DIR` (relative to `cwd`), else the default. */
export function resolveDataDir(value: string | undefined, cwd: string = Deno.cwd()): string {
  const dir = value === undefined || value === "" ? DEFAULT_DATA_DIR : value;
  return isAbsolute(dir) ? resolve(dir) : resolve(cwd, dir);
}

/** `env` with `MCP_DATA_DIR` set to its absolute path, for fleet interpolation. */
export function withDataDir(
  env: Record<string, string | undefined>,
): Record<string, string | undefined> {
  return { ...env, [DATA_DIR_VARIABLE]: resolveDataDir(env[DATA_DIR_VARIABLE]) };
}

/** Creates the data directory (readable by its owner only) if it does not exist yet. */
export async function ensureDataDir(path: string): Promise<void> {
  await Deno.mkdir(path, { recursive: true, mode: 0o700 });
}
