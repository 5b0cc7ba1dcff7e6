/**
 * Where a fleet entry came from, and so which variables it may reference.
 *
 * Sync and discovery write a marker comment on the line just above each entry they add
 * (`# synced from registry: <name>@<version>`, `# discovered by <source>: <id>`). Such an entry was
 * chosen by a registry or an announcement, not by the operator, so its `${VAR}` references may
 * name only the variables the operator allowed in `MCP_SYNC_ENV_ALLOW` (default none), and never a
 * gateway variable (`MCP_*`). An entry without a marker is the operator's own: it may reference
 * anything, gateway variables included, because the operator wrote that name there. Deleting the
 * marker line adopts an entry as the operator's own.
 * @module
 */
import { isGatewayVariable } from "./interpolate.ts";

/** The comment line that marks an entry as written by registry sync. */
export const SYNC_MARKER = "# synced from registry:";

/** The comment line that marks an entry as written by discovery. */
export const DISCOVERY_MARKER = "# discovered by";

/** Who chose a fleet entry. */
export type FleetOrigin = "operator" | "sync" | "discovery";

/** The origin of the entry starting on 1-based `line` of a file split into `lines`. */
export function originAt(lines: readonly string[], line: number): FleetOrigin {
  const above = (lines[line - 2] ?? "").trim();
  if (above.startsWith(SYNC_MARKER)) return "sync";
  if (above.startsWith(DISCOVERY_MARKER)) return "discovery";
  return "operator";
}

/** Prefixes of variables read by what runs a server, not by the server (compared in upper case). */
const RUNTIME_PREFIXES = [
  "DENO_",
  "OTEL_",
  "NPM_CONFIG_",
  "NODE_",
  "V8_",
  "LD_",
  "DYLD_",
  "SSL_",
  "XDG_",
];
/** Single variables of the same kind. */
const RUNTIME_NAMES = new Set([
  "SSLKEYLOGFILE",
  "PATH",
  "HOME",
  "TMPDIR",
  "TMP",
  "TEMP",
  "NO_PROXY",
]);

/**
 * Whether `name` steers what runs a server rather than the server: Deno (`DENO_*`; `OTEL_*`
 * turns on its exporter, which sends the child's console and traces out though the child has no
 * network permission), npm's configuration (its registry), Node, V8, the dynamic loader, TLS
 * (`SSLKEYLOGFILE` writes session keys to any path), proxies (`*_PROXY`) and where programs and
 * caches are found. A registry or an announcement may not set such a variable: an entry of theirs
 * would reach past the sandbox the gateway puts it in.
 */
export function controlsRuntime(name: string): boolean {
  const upper = name.toUpperCase();
  return RUNTIME_NAMES.has(upper) || upper.endsWith("_PROXY") ||
    RUNTIME_PREFIXES.some((prefix) => upper.startsWith(prefix));
}

/**
 * `MCP_SYNC_ALLOW_PRIVATE=true`: registry remotes may point inside the gateway's own network, at
 * sync and at each connection (the egress guard).
 */
export function syncAllowsPrivate(env: Readonly<Record<string, string | undefined>>): boolean {
  return env.MCP_SYNC_ALLOW_PRIVATE === "true";
}

/** `MCP_SYNC_ENV_ALLOW`: the variables entries from sync and discovery may reference. */
export function syncEnvAllow(env: Record<string, string | undefined>): Set<string> {
  return new Set(
    (env.MCP_SYNC_ENV_ALLOW ?? "").split(",").map((name) => name.trim())
      .filter((name) => name !== "" && !isGatewayVariable(name)),
  );
}

/**
 * Why an entry of `origin` may not reference variable `name` (undefined when it may). `line` is
 * the marker's line, named in the reason so the reader can find it.
 */
export function refusedVariable(
  origin: FleetOrigin,
  name: string,
  allowed: ReadonlySet<string>,
  markerLine: number,
): string | undefined {
  if (origin === "operator") return undefined;
  const who = origin === "sync" ? "registry sync" : "discovery";
  if (isGatewayVariable(name)) {
    // The bare name: a `${…}` reference text may itself be redacted as a secret value.
    return `variable ${name} is a gateway variable (MCP_*), which an entry written by ${who} ` +
      `(marker on line ${markerLine}) may never reference; remove the reference, or delete the ` +
      "marker line to adopt the entry as your own";
  }
  if (allowed.has(name)) return undefined;
  return `variable ${name} is not in MCP_SYNC_ENV_ALLOW, so an entry written by ${who} ` +
    `(marker on line ${markerLine}) may not reference it; add ${name} to MCP_SYNC_ENV_ALLOW, ` +
    "or delete the marker line to adopt the entry as your own";
}
