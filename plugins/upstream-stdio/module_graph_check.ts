/**
 * The module graph check of a sandboxed stdio upstream: before each start, a `deno run` entry
 * whose module graph reaches a local file outside what the child may read is refused.
 *
 * Deno loads the modules of a program's graph (static imports, and `import()` of a literal
 * specifier) without checking --allow-read (observed on 2.9.6; no `deno run` flag changes that:
 * not --no-remote, --cached-only, --deny-read, --ignore-read, --frozen or --vendor). So a text or
 * JSON import of `~/.ssh/id_rsa` would hand that file to the child's code. `deno info --json`,
 * run with the child's own resolution flags, cwd and environment, lists the same graph; each of its
 * `file:` modules must lie in the entry's directory tree, the tree of the `--config` the child was
 * given (the project the operator chose), or the child's read grants (which hold the npm cache).
 * A directory too broad to stand for a project (the filesystem root, the home directory or one
 * above it, the temp directory) counts as none: an entry lying directly in it may import only
 * itself and what is granted. Modules run before the entry (`--preload`, `--require`) are checked
 * the same way, as the entry.
 * npm entries need no check: Deno checks their packages' file imports at run time, as it does a
 * computed `import()`; a path through a symlink to outside is checked at run time too.
 * @module
 */
import { dirname, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import {
  type Clock,
  deadline,
  GatewayError,
  type UpstreamPlan,
  type UpstreamServerSpec,
} from "../../core/plugin_api/mod.ts";
import { VALUE_FLAGS } from "./command_plan.ts";

/** How long listing one entry's graph may take before the start is refused. */
export const GRAPH_CHECK_TIMEOUT_MS = 15_000;

/** The `deno run` options `deno info` takes too that change how the graph resolves. */
const RESOLUTION_FLAGS = new Set([
  "-c",
  "--config",
  "--no-config",
  "--import-map",
  "--node-modules-dir",
  "--vendor",
  "--node-modules-linker",
  "--cert",
  "--no-remote",
  "--no-npm",
  "--location",
  "--deny-import",
]);

/** A sandboxed child's `deno run` entry module, as its planned argv gives it. */
export interface DenoEntry {
  /** The module argument, as given. */
  module: string;
  /** Modules `--preload` or `--require` runs before it, as given. */
  preloads: string[];
  /** The options that resolve the graph, to hand `deno info` (each with its value inline). */
  flags: string[];
  /** The `--config` path, if one was given. */
  config?: string;
  /** `--allow-read` without a list: the child may read everything, so nothing is to check. */
  readAll: boolean;
  /** The `--allow-read` paths. */
  reads: string[];
}

/** The entry of a planned `[deno, "run", …flags, module, …args]` argv; undefined for others. */
export function denoEntry(argv: readonly string[]): DenoEntry | undefined {
  if (argv[1] !== "run") return undefined;
  const entry: DenoEntry = { module: "", preloads: [], flags: [], readAll: false, reads: [] };
  for (let i = 2; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith("-")) return { ...entry, module: arg };
    const eq = arg.indexOf("=");
    const name = eq < 0 ? arg : arg.slice(0, eq);
    let value = eq < 0 ? undefined : arg.slice(eq + 1);
    // `--lock` takes its value optionally; any other value flag always consumes the next arg.
    const next = argv[i + 1];
    if (
      eq < 0 && VALUE_FLAGS.has(name) &&
      (name !== "--lock" || (next !== undefined && !next.startsWith("-")))
    ) {
      value = next;
      i++;
    }
    if (name === "--allow-read") {
      if (value === undefined) entry.readAll = true;
      else entry.reads.push(...value.split(","));
    }
    if (name === "-c" || name === "--config") entry.config = value;
    if ((name === "--preload" || name === "--require") && value !== undefined) {
      entry.preloads.push(value);
    }
    if (RESOLUTION_FLAGS.has(name) || name.startsWith("--unstable")) {
      entry.flags.push(value === undefined ? name : `${name}=${value}`);
    }
  }
  return undefined;
}

/**
 * Refuses, with config_invalid naming the server, the module and the file, a sandboxed start
 * whose module graph loads a local file the child may not read.
 */
export async function checkModuleGraph(
  server: UpstreamServerSpec,
  plan: UpstreamPlan,
  clock: Clock,
  timeoutMs: number = GRAPH_CHECK_TIMEOUT_MS,
): Promise<void> {
  const argv = plan.start.command;
  const entry = server.sandbox === "deno" && argv ? denoEntry(argv) : undefined;
  if (entry === undefined || entry.readAll) return;
  const modules = [...entry.preloads, entry.module].filter(isLocal);
  if (modules.length === 0) return;
  const cwd = plan.start.cwd ?? Deno.cwd();
  const at = (path: string) => path.startsWith("file:") ? fileURLToPath(path) : resolve(cwd, path);
  const broad = broadDirectories(plan.start.env ?? {});
  // A module's own directory is its project, unless that directory holds far more than a project.
  const project = (file: string) => broad.has(dirname(file)) ? file : dirname(file);
  const roots = [...modules.map((m) => project(at(m))), ...entry.reads.map(at)];
  if (entry.config !== undefined) roots.push(project(at(entry.config)));
  for (const module of modules) {
    const files = await graphFiles(
      server.id,
      argv![0]!,
      module,
      entry,
      plan.start,
      clock,
      timeoutMs,
    );
    const outside = files.find((file) => !roots.some((root) => within(file, root)));
    if (outside === undefined) continue;
    const dir = dirname(at(module));
    const why = broad.has(dir)
      ? `, outside its read grants (its directory, ${dir}, holds far more than one server's ` +
        "project, so it counts as none: move the server into a directory of its own)"
      : ", outside its directory and its read grants";
    throw new GatewayError(
      "config_invalid",
      `Upstream "${server.id}" runs under sandbox: deno, but its module ${module} imports ` +
        `${outside}${why}; Deno loads imported files without ` +
        "the read check, so the gateway does not start it. Add the file to permissions.read if the " +
        "server may read it, or use sandbox: none for code you trust",
      { server: server.id, module, file: outside },
    );
  }
}

/**
 * Directories that stand for no one project: the filesystem root, the child's home directory and
 * every directory above it, and the temp directories.
 */
function broadDirectories(env: Record<string, string>): Set<string> {
  const broad = new Set([sep, "/tmp", "/var/tmp"]);
  for (const dir of [env.TMPDIR, env.TMP, env.TEMP]) if (dir) broad.add(resolve(dir));
  if (env.HOME) {
    for (let dir = resolve(env.HOME); !broad.has(dir); dir = dirname(dir)) broad.add(dir);
  }
  return broad;
}

/** Whether a module argument names a local file (a path or a `file:` URL), not npm:, jsr: or a URL. */
function isLocal(module: string): boolean {
  // One letter before the colon is a Windows drive, not a scheme.
  return module.startsWith("file:") || !/^[a-z][a-z0-9+.-]+:/i.test(module);
}

/** Whether `path` is `root` or lies under it. */
function within(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

/** The local files of the entry's module graph, listed by `deno info --json` as the child would resolve it. */
async function graphFiles(
  serverId: string,
  execPath: string,
  module: string,
  entry: DenoEntry,
  start: UpstreamPlan["start"],
  clock: Clock,
  timeoutMs: number,
): Promise<string[]> {
  const limit = deadline(clock, timeoutMs);
  const refuse = (why: string) =>
    new GatewayError(
      "config_invalid",
      `Upstream "${serverId}" runs under sandbox: deno, and the gateway could not list the ` +
        `module graph of ${module} to check what it imports (${why}), so it does not start it`,
      { server: serverId, module },
    );
  let output: Deno.CommandOutput;
  try {
    output = await new Deno.Command(execPath, {
      // --no-lock: listing the graph never writes a lockfile; the child itself may.
      args: ["info", "--json", "--no-lock", ...entry.flags, module],
      ...(start.cwd !== undefined ? { cwd: start.cwd } : {}),
      // NO_COLOR: its error line goes into lastError, which holds no terminal escapes.
      env: { ...start.env, NO_COLOR: "1" },
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
      signal: limit.signal,
    }).output();
  } catch (error) {
    throw refuse(limit.passed ? `timed out after ${timeoutMs} ms` : String(error));
  } finally {
    limit.cancel();
  }
  if (limit.passed) throw refuse(`timed out after ${timeoutMs} ms`);
  if (!output.success) {
    const text = new TextDecoder().decode(output.stderr);
    throw refuse(text.trim().split("\n", 1)[0] || `deno info exited with ${output.code}`);
  }
  const graph = JSON.parse(new TextDecoder().decode(output.stdout)) as {
    modules?: { specifier?: string }[];
    redirects?: Record<string, string>;
  };
  const specifiers = [
    ...(graph.modules ?? []).map((m) => m.specifier ?? ""),
    ...Object.values(graph.redirects ?? {}),
  ];
  return specifiers.filter((s) => s.startsWith("file:")).map((s) => fileURLToPath(s));
}
