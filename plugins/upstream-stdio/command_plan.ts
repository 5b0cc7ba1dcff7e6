/**
 * The stdio adapter's plan for one upstream: the child's argv and complete environment, and the
 * sandbox of the relay worker that spawns it.
 *
 * With `sandbox: "deno"` the child itself runs under `deno run --no-prompt` with permission flags
 * built from the server's `permissions` block, so the block is the only source of the child's
 * rights: flags that grant permissions in the command are refused. On top of the block the child
 * may read the npm package cache (packages read their own files and their dependencies') and its
 * own environment (already scrubbed to the base variables and the server's `env`), and may import
 * from no remote host.
 * @module
 */
import {
  GatewayError,
  type PluginPermissions,
  type UpstreamPlan,
  type UpstreamServerSpec,
} from "../../core/plugin_api/mod.ts";

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
export const VALUE_FLAGS = new Set([
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

/**
 * `deno run` options that would undo the sandbox without an `--allow-` name: an env file is read
 * outside the read grant (and lands in the readable environment); an inspector port lets any
 * local process run code with the child's grants.
 */
const UNSANDBOXING = new Set([
  "--env-file",
  "--env",
  "--inspect",
  "--inspect-brk",
  "--inspect-wait",
]);

/**
 * The hosts Deno 2.9 lets any program import from by default (`deno run --help`, --allow-import).
 * A bare `--deny-import` leaves them importable (observed on 2.9.6), so each is denied by name;
 * every other host is denied already, as no import is allowed and --no-prompt asks nobody.
 */
export const DEFAULT_IMPORT_HOSTS = [
  "deno.land:443",
  "jsr.io:443",
  "esm.sh:443",
  "raw.esm.sh:443",
  "cdn.jsdelivr.net:443",
  "raw.githubusercontent.com:443",
  "gist.githubusercontent.com:443",
] as const;

/** The flag that denies every remote import to a sandboxed child. */
export const DENY_IMPORT_FLAG = `--deny-import=${DEFAULT_IMPORT_HOSTS.join(",")}`;

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
    ? sandboxedArgv(server.id, command, server.permissions, execPath, options.baseEnv, server.env)
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
  baseEnv: Record<string, string>,
  serverEnv: Record<string, string>,
): string[] {
  const [program, ...rest] = command;
  const confine = () => [
    DENY_IMPORT_FLAG,
    ...permissionFlags(serverId, sandboxGrants(permissions, baseEnv)),
    ...hiddenVariables(permissions, baseEnv, serverEnv),
  ];
  if ((program === "deno" || program === execPath) && rest[0] === "run") {
    const userArgs = rest.slice(1);
    const { configured } = scanDenoArgs(serverId, userArgs);
    const noPrompt = userArgs.includes("--no-prompt") ? [] : ["--no-prompt"];
    // Without --config, a child run from inside a project would pick up that project's deno.json
    // and write its deno.lock.
    const noConfig = configured ? [] : ["--no-config"];
    return [execPath, "run", ...noPrompt, ...noConfig, ...confine(), ...userArgs];
  }
  if (program === "npx") {
    let i = 0;
    while (rest[i] === "-y" || rest[i] === "--yes") i++;
    const pkg = rest[i];
    if (pkg && !pkg.startsWith("-")) {
      // --no-config: like npx, the package runs without the project's deno.json (and never
      // writes the gateway's deno.lock).
      return [
        execPath,
        "run",
        "--no-prompt",
        "--no-config",
        ...confine(),
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
 * The grants a sandboxed child runs with: its permissions block, plus reading the npm package
 * cache (packages read their own files and their dependencies'; the cache holds only public
 * package contents, and stays unwritable so no server can plant code in another's packages), plus
 * reading its environment unless the block says `env: false` or lists the variables.
 */
export function sandboxGrants(
  permissions: PluginPermissions,
  env: Record<string, string>,
): PluginPermissions {
  const read = permissions.read === true
    ? true
    : [...(Array.isArray(permissions.read) ? permissions.read : []), npmCacheDir(env)];
  return { ...permissions, read, env: permissions.env ?? true };
}

/**
 * `--ignore-env` for base variables whose value carries URL credentials (a proxy's or registry's
 * `user:password@`): Deno itself still uses them to fetch packages, the child's code reads them as
 * unset. A server's own `env` is its to read.
 */
function hiddenVariables(
  permissions: PluginPermissions,
  baseEnv: Record<string, string>,
  serverEnv: Record<string, string>,
): string[] {
  if (permissions.env === false) return [];
  const hidden = Object.keys(baseEnv).filter((name) =>
    !(name in serverEnv) && /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*@/i.test(baseEnv[name]!)
  );
  return hidden.length === 0 ? [] : [`--ignore-env=${hidden.join(",")}`];
}

/** Deno's npm package cache, as Deno itself finds it. */
function npmCacheDir(env: Record<string, string>): string {
  return `${denoDir(env)}${Deno.build.os === "windows" ? "\\" : "/"}npm`;
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
 * block is the only grant, and no flag may undo the sandbox) and finds whether a config file was
 * chosen.
 */
function scanDenoArgs(serverId: string, args: string[]): { configured: boolean } {
  let configured = false;
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!;
    // The first positional argument is the module; everything after it belongs to the program.
    if (!arg.startsWith("-")) return { configured };
    const name = arg.split("=", 1)[0]!;
    if (name === "-c" || name === "--config" || name === "--no-config") configured = true;
    const granting = name === "--allow-all" || name.startsWith("--allow-") ||
      name === "--permission-set" ||
      (/^-[A-Za-z]+$/.test(name) && GRANTING_SHORT.test(name));
    if (UNSANDBOXING.has(name)) {
      throw new GatewayError(
        "config_invalid",
        `Upstream "${serverId}" passes ${JSON.stringify(arg)} to deno run, which would undo ` +
          "sandbox: deno (an env file is read outside the read grant; an inspector lets any " +
          "local process drive the child); put variables in the server's env instead",
        { server: serverId },
      );
    }
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
