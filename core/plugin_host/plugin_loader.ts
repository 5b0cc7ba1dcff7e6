/**
 * Finds plugins in directories, imports each `mod.ts`, and validates its manifest.
 *
 * A broken plugin (syntax error, missing default export, bad manifest, duplicate name) is reported
 * with its path and reason and skipped; the others load.
 * @module
 */
import { fileURLToPath, pathToFileURL } from "node:url";
import { z } from "zod";
import { PLUGIN_KINDS, type PluginManifest } from "../plugin_api/mod.ts";

/** A plugin whose manifest passed validation. */
export interface LoadedPlugin {
  manifest: PluginManifest;
  /** Absolute path of its `mod.ts`. */
  path: string;
}

/** A plugin that could not be loaded, and why. */
export interface PluginFailure {
  path: string;
  reason: string;
}

/** The outcome of loading every plugin directory. */
export interface PluginLoadResult {
  plugins: LoadedPlugin[];
  failures: PluginFailure[];
}

/** The built-in plugins directory of this checkout. */
// fileURLToPath, not URL.pathname: a checkout path with a space would stay percent-encoded.
export const BUILTIN_PLUGIN_DIR: string = fileURLToPath(new URL("../../plugins/", import.meta.url));

const grant = z.union([z.boolean(), z.array(z.string())]);
const MANIFEST = z.object({
  name: z.string().regex(/^[a-z0-9][a-z0-9-]*$/, {
    message: 'must be lower-case letters, digits and "-", e.g. "bus-nats"',
  }),
  version: z.string().regex(/^\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/, {
    message: 'must be a semver version, e.g. "1.0.0"',
  }),
  kind: z.enum(PLUGIN_KINDS, { message: `must be one of ${PLUGIN_KINDS.join(", ")}` }),
  description: z.string().optional(),
  permissions: z.object({
    read: grant.optional(),
    write: grant.optional(),
    net: grant.optional(),
    env: grant.optional(),
    run: grant.optional(),
    sys: grant.optional(),
  }, {
    // The unknown-key message names the key; a blanket message would hide which one is wrong.
    error: (issue) =>
      issue.code === "unrecognized_keys"
        ? `has unknown key ${issue.keys.map((k) => `"${k}"`).join(", ")}; ` +
          "use read, write, net, env, run or sys"
        : 'must be an object of Deno permissions, e.g. { net: ["127.0.0.1"] }',
  }).strict(),
  create: z.custom<(...args: unknown[]) => unknown>((v) => typeof v === "function", {
    message: "must be a function (the plugin's factory)",
  }),
  transport: z.string().optional(),
  configSchema: z.unknown().optional(),
}).superRefine((m, ctx) => {
  if (m.kind === "transport" && !m.transport) {
    ctx.addIssue({
      code: "custom",
      path: ["transport"],
      message: 'is required for a transport plugin, e.g. "stdio"',
    });
  }
});

/** Imports and validates every plugin folder (`<dir>/<name>/mod.ts`) in the given directories. */
export async function loadPlugins(dirs: readonly string[]): Promise<PluginLoadResult> {
  const plugins: LoadedPlugin[] = [];
  const failures: PluginFailure[] = [];
  const byName = new Map<string, string>();
  for (const dir of dirs) {
    for (const path of await pluginModules(dir, failures)) {
      const outcome = await loadOne(path);
      if ("reason" in outcome) {
        failures.push(outcome);
        continue;
      }
      const existing = byName.get(outcome.manifest.name);
      if (existing) {
        failures.push({
          path,
          reason:
            `plugin name "${outcome.manifest.name}" is already used by ${existing}; rename one`,
        });
        continue;
      }
      byName.set(outcome.manifest.name, path);
      plugins.push(outcome);
    }
  }
  return { plugins, failures };
}

async function pluginModules(dir: string, failures: PluginFailure[]): Promise<string[]> {
  const root = dir.endsWith("/") ? dir : dir + "/";
  const paths: string[] = [];
  try {
    for await (const entry of Deno.readDir(root)) {
      if (!entry.isDirectory || entry.name.startsWith(".") || entry.name.startsWith("_")) continue;
      const mod = `${root}${entry.name}/mod.ts`;
      try {
        if ((await Deno.stat(mod)).isFile) paths.push(mod);
      } catch {
        // A folder without mod.ts is not a plugin (e.g. shared helpers); skip it quietly.
      }
    }
  } catch (error) {
    failures.push({
      path: dir,
      reason: error instanceof Deno.errors.NotFound
        ? "plugin directory does not exist; fix MCP_PLUGIN_PATHS"
        : `cannot read plugin directory: ${(error as Error).message}`,
    });
  }
  return paths.sort();
}

async function loadOne(path: string): Promise<LoadedPlugin | PluginFailure> {
  let mod: { default?: unknown };
  try {
    // pathToFileURL escapes "#", "?", "%" and spaces that a `file://${path}` string would misread.
    mod = await import(pathToFileURL(path).href);
  } catch (error) {
    return { path, reason: `cannot import: ${firstLine((error as Error).message)}` };
  }
  if (mod.default === undefined) {
    return { path, reason: "has no default export; export default definePlugin({ … })" };
  }
  const parsed = MANIFEST.safeParse(mod.default);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) =>
      `${i.path.length ? i.path.join(".") : "manifest"} ${i.message}`
    );
    return { path, reason: `invalid manifest: ${problems.join("; ")}` };
  }
  return { manifest: mod.default as PluginManifest, path };
}

/** The config slice of a plugin: `MCP_PLUGIN_<NAME>_<KEY>` variables keyed by lower-case `<key>`. */
export function pluginConfigSlice(
  pluginName: string,
  pluginEnv: Record<string, string>,
): Record<string, string> {
  const prefix = `MCP_PLUGIN_${pluginName.toUpperCase().replaceAll("-", "_")}_`;
  const slice: Record<string, string> = {};
  for (const [key, value] of Object.entries(pluginEnv)) {
    if (key.startsWith(prefix)) slice[key.slice(prefix.length).toLowerCase()] = value;
  }
  return slice;
}

function firstLine(text: string): string {
  return text.split("\n").slice(0, 3).join(" ").trim();
}
