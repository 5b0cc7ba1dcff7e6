/**
 * The stdio adapter's plan for one upstream: the child's argv and complete environment, and the
 * sandbox of the relay worker that spawns it.
 *
 * With `sandbox: "deno"` the child itself runs under `deno run --no-prompt` with permission flags
 * built from the server's `permissions` block, so the block is the only source of the child's
 * rights: flags that grant permissions in the command are refused.
 * @module
 */
import {
  GatewayError,
  type PluginPermissions,
  type UpstreamPlan,
  type UpstreamServerSpec,
} from "../../core/plugin_api.ts";

/** What the kernel passes to every plan. */
export interface StdioPlanOptions {
  /** Largest frame accepted from the child, in bytes. */
  maxMessageBytes: number;
  /** The basics every child gets (PATH, HOME, …); the server's `env` is laid over them. */
  baseEnv: Record<string, string>;
}

/** The `permissions` keys that become `--allow-<key>` flags, in flag order. */
const PERMISSION_KEYS = ["read", "write", "net", "env", "run", "sys"] as const;

/** `deno run` options that take their value as the next argument (deno 2.9 `deno run --help`). */
const VALUE_FLAGS = new Set([
  "-c",
  "--config",
  "--ext",
  "--import-map",
  "--node-modules-linker",
  "--lock",
  "--cert",
  "--min-dep-age",
  "--inspect-publish-uid",
  "--location",
  "--seed",
  "--preload",
  "--require",
  "--conditions",
  "-L",
  "--log-level",
]);

/** Short `deno run` flags that grant permissions: -A, -R, -W, -I, -N, -E, -S and -P (permission sets). */
const GRANTING_SHORT = /[ARWINESP]/;

/** Plans one stdio upstream; `execPath` replaces `deno` so children work when deno is not on PATH. */
export function planStdio(
  server: UpstreamServerSpec,
  options: StdioPlanOptions,
  execPath: string = Deno.execPath(),
): UpstreamPlan {
  const command = server.command;
  if (!command || command.length === 0 || !command[0]) {
    throw new GatewayError(
      "config_invalid",
      `Upstream "${server.id}" has no command; set command to the argv that starts it, e.g. ` +
        `["npx", "-y", "@modelcontextprotocol/server-memory"]`,
      { server: server.id },
    );
  }
  const argv = server.sandbox === "deno"
    ? sandboxedArgv(server.id, command, server.permissions, execPath, options.baseEnv)
    : command.map((arg, i) => i === 0 && arg === "deno" ? execPath : arg);
  const start: UpstreamPlan["start"] = {
    serverId: server.id,
    transport: "stdio",
    command: argv,
    // The child gets exactly this; the worker spawns with clearEnv.
    env: { ...options.baseEnv, ...server.env },
    maxMessageBytes: options.maxMessageBytes,
  };
  if (server.cwd !== undefined) start.cwd = server.cwd;
  return {
    // The relay only spawns its one command and pipes bytes: no files, network, env or sys info.
    permissions: { run: [argv[0]!], read: false, write: false, net: false, env: false, sys: false },
    start,
  };
}

/** `--allow-*` flags for a permissions block; `true` grants all, a list grants those values. */
export function permissionFlags(serverId: string, permissions: PluginPermissions): string[] {
  const flags: string[] = [];
  for (const key of PERMISSION_KEYS) {
    const grant = permissions[key];
    if (grant === true) {
      flags.push(`--allow-${key}`);
    } else if (Array.isArray(grant) && grant.length > 0) {
      for (const value of grant) {
        // Deno splits flag values on commas; a value with one would silently widen or break the grant.
        if (value === "" || value.includes(",")) {
          throw new GatewayError(
            "config_invalid",
            `Upstream "${serverId}" has permissions.${key} value ${JSON.stringify(value)}; ` +
              "values must be non-empty and contain no comma",
            { server: serverId },
          );
        }
      }
      flags.push(`--allow-${key}=${grant.join(",")}`);
    }
  }
  return flags;
}

function sandboxedArgv(
  serverId: string,
  command: string[],
  permissions: PluginPermissions,
  execPath: string,
  env: Record<string, string>,
): string[] {
  const [program, ...rest] = command;
  if ((program === "deno" || program === execPath) && rest[0] === "run") {
    const userArgs = rest.slice(1);
    const { module, configured } = scanDenoArgs(serverId, userArgs);
    const flags = permissionFlags(serverId, withOwnPackage(permissions, module, env));
    const noPrompt = userArgs.includes("--no-prompt") ? [] : ["--no-prompt"];
    // Without --config, a child run from inside a project would pick up that project's deno.json
    // and write its deno.lock.
    const noConfig = configured ? [] : ["--no-config"];
    return [execPath, "run", ...noPrompt, ...noConfig, ...flags, ...userArgs];
  }
  if (program === "npx") {
    let i = 0;
    while (rest[i] === "-y" || rest[i] === "--yes") i++;
    const pkg = rest[i];
    if (pkg && !pkg.startsWith("-")) {
      const flags = permissionFlags(serverId, withOwnPackage(permissions, `npm:${pkg}`, env));
      // --no-config: like npx, the package runs without the project's deno.json (and never
      // writes the gateway's deno.lock).
      return [
        execPath,
        "run",
        "--no-prompt",
        "--no-config",
        ...flags,
        `npm:${pkg}`,
        ...rest.slice(i + 1),
      ];
    }
  }
  throw new GatewayError(
    "config_invalid",
    `Upstream "${serverId}" uses sandbox: deno, so its command must be ` +
      `["deno", "run", <deno flags…>, <module>, <args…>] or ["npx", "-y", "<package>", <args…>]; ` +
      `received ${JSON.stringify(command)}. Use sandbox: none for other programs.`,
    { server: serverId },
  );
}

/**
 * An npm package may read its own files in Deno's cache (docs, templates it ships); that read is
 * granted on top of the permissions block, and nothing else of the cache.
 */
export function withOwnPackage(
  permissions: PluginPermissions,
  module: string | undefined,
  env: Record<string, string>,
): PluginPermissions {
  const match = module ? /^npm:(@[^/@]+\/[^/@]+|[^/@]+)/.exec(module) : null;
  if (!match || permissions.read === true) return permissions;
  const registry = new URL(env.NPM_CONFIG_REGISTRY ?? "https://registry.npmjs.org").host;
  const own = `${denoDir(env)}/npm/${registry}/${match[1]}`;
  const read = Array.isArray(permissions.read) ? permissions.read : [];
  return { ...permissions, read: [...read, own] };
}

/** Deno's cache directory, as Deno itself finds it. */
function denoDir(env: Record<string, string>): string {
  if (env.DENO_DIR) return env.DENO_DIR;
  if (Deno.build.os === "darwin") return `${env.HOME}/Library/Caches/deno`;
  if (Deno.build.os === "windows") return `${env.LOCALAPPDATA}\\deno`;
  return `${env.XDG_CACHE_HOME || `${env.HOME}/.cache`}/deno`;
}

/**
 * Walks the deno flags before the module: refuses permission-granting flags (the permissions
 * block is the only grant) and finds the module and whether a config file was chosen.
 */
function scanDenoArgs(serverId: string, args: string[]): { module?: string; configured: boolean } {
  let configured = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    // The first positional argument is the module; everything after it belongs to the program.
    if (!arg.startsWith("-")) return { module: arg, configured };
    const name = arg.split("=", 1)[0]!;
    if (name === "-c" || name === "--config" || name === "--no-config") configured = true;
    const granting = name === "--allow-all" || name.startsWith("--allow-") ||
      name === "--permission-set" ||
      (/^-[A-Za-z]+$/.test(name) && GRANTING_SHORT.test(name));
    if (granting) {
      throw new GatewayError(
        "config_invalid",
        `Upstream "${serverId}" passes ${
          JSON.stringify(arg)
        } to deno run, but under sandbox: deno ` +
          "permissions come only from its permissions block (read, write, net, env, run, sys); " +
          "remove the flag and list what the server needs there",
        { server: serverId },
      );
    }
    if (VALUE_FLAGS.has(name) && !arg.includes("=")) {
      // `--lock` takes its value optionally; any other value flag always consumes the next arg.
      const next = args[i + 1];
      if (name !== "--lock" || (next !== undefined && !next.startsWith("-"))) i++;
    }
  }
  return { configured };
}
