/**
 * Turns one registry server into one fleet entry, in the fleet file's own format. Only what the
 * gateway can run confined is mapped: npm packages (under `sandbox: deno`) and hosted remotes.
 * Everything else is skipped with a reason the operator can act on.
 * @module
 */
import type { RegistryEnvVar, RegistryHeader, ServerDetail } from "./registry_types.ts";

/** A fleet entry (as written to the file) or why there is none. */
export type MappedServer =
  | { entry: Record<string, unknown>; note?: string }
  | { skip: string };

/** `io.github.acme/weather` → `acme-weather`: the namespace's last label and the name. */
export function slugOf(name: string): string {
  const [namespace = "", ...rest] = name.split("/");
  const label = namespace.split(".").at(-1) ?? "";
  const raw = [label, ...rest].filter((part) => part !== "").join("-");
  // `_` is left out: ids must never contain the tool separator (`__` by default).
  const slug = raw.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+/g, "-")
    .replace(/^-|-$/g, "");
  return slug === "" ? "server" : slug;
}

/** A slug not in `taken`: `acme-weather`, else `acme-weather-2`, `-3`, … */
export function uniqueId(slug: string, taken: ReadonlySet<string>): string {
  if (!taken.has(slug)) return slug;
  for (let n = 2;; n++) if (!taken.has(`${slug}-${n}`)) return `${slug}-${n}`;
}

/** Maps a server to a fleet entry with id `id`; `env` decides which secrets are set. */
export function toFleetEntry(
  detail: ServerDetail,
  id: string,
  env: Record<string, string | undefined>,
): MappedServer {
  const packages = detail.packages ?? [];
  const npm = packages.find((p) =>
    p.registryType === "npm" && (p.transport?.type ?? "stdio") === "stdio"
  );
  if (npm) {
    const version = npm.version ?? detail.version;
    const vars = npm.environmentVariables ?? [];
    const entry: Record<string, unknown> = {
      id,
      command: ["deno", "run", `npm:${npm.identifier}@${version}`],
      sandbox: "deno",
    };
    if (vars.length > 0) {
      entry.env = Object.fromEntries(vars.map((v) => [v.name, placeholder(v)]));
      entry.permissions = { env: vars.map((v) => v.name) };
    }
    return disabledWhenUnset(entry, vars.filter(needsValue).map((v) => v.name), env);
  }
  const remote = (detail.remotes ?? []).find((r) =>
    r.type === "streamable-http" || r.type === "sse"
  );
  if (remote) {
    const entry: Record<string, unknown> = {
      id,
      url: remote.url,
      transport: remote.type === "sse" ? "sse" : "http",
    };
    const headers = remote.headers ?? [];
    const needed: string[] = [];
    if (headers.length > 0) {
      entry.headers = Object.fromEntries(headers.map((h) => {
        const [value, variable] = headerValue(h, id);
        if (variable) needed.push(variable);
        return [h.name, value];
      }));
    }
    return disabledWhenUnset(entry, needed, env);
  }
  const kinds = [
    ...packages.map((p) => `${p.registryType} package ${p.identifier}`),
    ...(detail.remotes ?? []).map((r) => `${r.type} remote`),
  ];
  return {
    skip: kinds.length === 0
      ? "declares no package and no remote, so there is nothing to run"
      : `only ${kinds.join(", ")}: not runnable here (the gateway runs npm packages under ` +
        "sandbox: deno and streamable-http or sse remotes); add it by hand if you trust it",
  };
}

/** Values become `${VAR}` references: secrets never land in the fleet file. */
function placeholder(v: RegistryEnvVar): string {
  if (v.default !== undefined && !v.isSecret) return `\${${v.name}:-${v.default}}`;
  if (!needsValue(v)) return `\${${v.name}:-}`;
  return `\${${v.name}}`;
}

function needsValue(v: RegistryEnvVar): boolean {
  return v.isSecret === true || v.isRequired === true ||
    (v.isRequired === undefined && v.default === undefined);
}

/** A header's value; a secret or unset one becomes `${<ID>_<HEADER>}`. */
function headerValue(h: RegistryHeader, id: string): [string, string | undefined] {
  if (h.value !== undefined && !h.isSecret && !/\{[^}]*\}/.test(h.value)) {
    return [h.value, undefined];
  }
  const variable = `${id}_${h.name}`.toUpperCase().replace(/[^A-Z0-9]+/g, "_");
  return [`\${${variable}}`, variable];
}

/** An entry whose variables are not set yet is written disabled: the fleet would refuse it. */
function disabledWhenUnset(
  entry: Record<string, unknown>,
  variables: string[],
  env: Record<string, string | undefined>,
): MappedServer {
  const missing = variables.filter((name) => env[name] === undefined);
  if (missing.length === 0) return { entry };
  entry.enabled = false;
  return {
    entry,
    note: `written disabled: set ${missing.join(", ")} and enable it`,
  };
}
