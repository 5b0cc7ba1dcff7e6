/**
 * Turns one registry server into one fleet entry, in the fleet file's own format. Only what the
 * gateway can run confined is mapped: npm packages (under `sandbox: deno`) and hosted remotes.
 * Everything else is skipped with a reason the operator can act on.
 *
 * A registry is outside the trust boundary, so nothing it sends chooses what the gateway reveals
 * or where a server may reach: every name, version, identifier and URL passes a strict check
 * ({@link checkOutsideText}); a `${VAR}` reference is written only for variables the operator
 * allowed (`MCP_SYNC_ENV_ALLOW`), never for gateway variables (`MCP_*`); the paths a package
 * declares are the gateway's own per-server directory, not the registry's defaults; and a new
 * entry is written `enabled: false` unless the registry is trusted.
 * @module
 */
import { isGatewayVariable } from "../proxy/interpolate.ts";
import { controlsRuntime } from "../proxy/fleet_origin.ts";
import { hostOf, privateAddressOf } from "../support/private_address.ts";
import {
  checkOutsideText,
  checkRemoteUrl,
  isOutsideText,
  OutsideTextError,
  quoteOutside,
} from "../support/outside_text.ts";
import type {
  RegistryArgument,
  RegistryEnvVar,
  RegistryHeader,
  RegistryInput,
  ServerDetail,
} from "./registry_types.ts";

/** A fleet entry (as written to the file) or why there is none. */
export type MappedServer =
  | {
    entry: Record<string, unknown>;
    /** Why the entry is written disabled, or what else the operator should know. */
    notes: string[];
    /** Directories the entry is given (created when the proposal is applied). */
    paths: string[];
  }
  | { skip: string };

/** What the mapping may use. */
export interface MappingOptions {
  /** The gateway's environment: decides which allowed variables are set. */
  env: Record<string, string | undefined>;
  /** `MCP_SYNC_ENV_ALLOW`: the variables an entry may reference. */
  allow: ReadonlySet<string>;
  /** The registry is trusted: new entries are written enabled (when nothing is missing). */
  trusted: boolean;
  /** The directory under which each server gets its own `<id>` directory for declared paths. */
  dataDir: string;
  /** `MCP_SYNC_ALLOW_PRIVATE`: remote URLs may point at loopback, link-local or private hosts. */
  allowPrivate?: boolean;
  /** Remote hosts (names) a registry may not point at, with why ({@link privateNamesOf}). */
  privateNames?: ReadonlyMap<string, string>;
}

const MAX_SLUG = 48;

/** `io.github.acme/weather` → `acme-weather`: the namespace's last label and the name. */
export function slugOf(name: string): string {
  const [namespace = "", ...rest] = name.split("/");
  const label = namespace.split(".").at(-1) ?? "";
  const raw = [label, ...rest].filter((part) => part !== "").join("-");
  // `_` is left out: ids must never contain the tool separator (`__` by default).
  const slug = raw.toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/-+/g, "-")
    .slice(0, MAX_SLUG).replace(/^-|-$/g, "");
  return slug === "" ? "server" : slug;
}

/** A slug not in `taken`: `acme-weather`, else `acme-weather-2`, `-3`, … */
export function uniqueId(slug: string, taken: ReadonlySet<string>): string {
  if (!taken.has(slug)) return slug;
  for (let n = 2;; n++) if (!taken.has(`${slug}-${n}`)) return `${slug}-${n}`;
}

/** Maps a server to a fleet entry with id `id`. */
export function toFleetEntry(
  detail: ServerDetail,
  id: string,
  options: MappingOptions,
): MappedServer {
  try {
    return mapServer(detail, id, options);
  } catch (error) {
    if (error instanceof OutsideTextError) return { skip: `refused: ${error.message}` };
    throw error;
  }
}

function mapServer(detail: ServerDetail, id: string, options: MappingOptions): MappedServer {
  const packages = Array.isArray(detail.packages) ? detail.packages : [];
  const remotes = Array.isArray(detail.remotes) ? detail.remotes : [];
  const npm = packages.find((p) =>
    p?.registryType === "npm" && (p.transport?.type ?? "stdio") === "stdio"
  );
  const needs = new Needs(options);
  if (npm) {
    const identifier = checkOutsideText(npm.identifier, "npm package", "npmPackage");
    const version = checkOutsideText(npm.version ?? detail.version, "package version", "version");
    const dir = `${options.dataDir.replace(/\/+$/, "")}/${id}`;
    const paths = new Set<string>();
    const runtimeArgs = list<RegistryArgument>(npm.runtimeArguments);
    const ignored = runtimeArgs.map((a) => argumentLabel(a)).filter((l) => !NPX_YES.has(l));
    if (ignored.length > 0) {
      needs.note(
        `runtime arguments for npx/node (${
          ignored.join(" ")
        }) have no sandbox: deno equivalent and are not passed; check the server's documentation`,
      );
      needs.disable();
    }
    const args: string[] = [];
    for (const argument of list<RegistryArgument>(npm.packageArguments)) {
      args.push(...argumentValues(argument, dir, paths, needs));
    }
    const env: Record<string, string> = {};
    for (const variable of list<RegistryEnvVar>(npm.environmentVariables)) {
      const value = envValue(variable, dir, paths, needs);
      if (value !== undefined) env[variable.name] = value;
    }
    const entry: Record<string, unknown> = {
      id,
      command: ["deno", "run", `npm:${identifier}@${version}`, ...args],
      sandbox: "deno",
    };
    const names = Object.keys(env);
    if (names.length > 0) entry.env = env;
    // Env reads need no grant: the child's environment is already only the base and its env.
    if (paths.size > 0) entry.permissions = { read: [...paths], write: [...paths] };
    return needs.finish(entry, [...paths]);
  }
  const remote = remotes.find((r) => r?.type === "streamable-http" || r?.type === "sse");
  if (remote) {
    const url = checkRemoteUrl(remote.url, "remote url");
    const inside = privateAddressOf(url);
    const host = hostOf(url)!;
    const named = options.privateNames?.get(host);
    if ((inside || named) && !options.allowPrivate) {
      const where = inside
        ? `remote url host ${inside.host} is ${inside.kind}, inside the gateway's own network`
        : `remote url host ${host} ${named}`;
      throw new OutsideTextError(
        `${where}; ` +
          "a registry may not point the gateway there (set MCP_SYNC_ALLOW_PRIVATE=true to allow it)",
      );
    }
    const entry: Record<string, unknown> = {
      id,
      url,
      transport: remote.type === "sse" ? "sse" : "http",
    };
    const headers = list<RegistryHeader>(remote.headers);
    if (headers.length > 0) {
      entry.headers = Object.fromEntries(headers.map((h) => {
        const name = checkOutsideText(h.name, "header name", "headerName");
        return [name, headerValue(h, name, id, needs)];
      }));
    }
    return needs.finish(entry, []);
  }
  const kinds = [
    ...packages.map((p) =>
      `${describeKind(p?.registryType)} package ${describeKind(p?.identifier)}`
    ),
    ...remotes.map((r) => `${describeKind(r?.type)} remote`),
  ];
  return {
    skip: kinds.length === 0
      ? "declares no package and no remote, so there is nothing to run"
      : `only ${kinds.join(", ")}: not runnable here (the gateway runs npm packages under ` +
        "sandbox: deno and streamable-http or sse remotes); add it by hand if you trust it",
  };
}

// A variable named like MEMORY_FILE_PATH or DATA_DIR declares a path.
const PATH_VARIABLE = /(^|_)(PATH|DIR|DIRECTORY|FOLDER|FILE|ROOT)$/i;

// npx's "yes, install it" flag: deno needs none.
const NPX_YES = new Set(["-y", "--yes"]);

/** What an entry still needs before it may run; decides `enabled` and the notes. */
class Needs {
  #options: MappingOptions;
  #notes: string[] = [];
  #unset = new Set<string>();
  #notAllowed = new Set<string>();
  #disabled = false;

  constructor(options: MappingOptions) {
    this.#options = options;
  }

  /** `${name}` when the entry may reference it; records what is missing either way. */
  reference(name: string, fallback?: string): string {
    if (isGatewayVariable(name) || !this.#options.allow.has(name)) this.#notAllowed.add(name);
    else if (fallback === undefined && this.#options.env[name] === undefined) this.#unset.add(name);
    return fallback === undefined ? `\${${name}}` : `\${${name}:-${fallback}}`;
  }

  /** Whether the entry may reference `name`. */
  allowed(name: string): boolean {
    return !isGatewayVariable(name) && this.#options.allow.has(name);
  }

  note(text: string): void {
    this.#notes.push(text);
  }

  disable(): void {
    this.#disabled = true;
  }

  finish(entry: Record<string, unknown>, paths: string[]): MappedServer {
    const notes = [...this.#notes];
    if (this.#notAllowed.size > 0) {
      const names = [...this.#notAllowed].sort();
      const them = names.length === 1 ? "it" : "them";
      notes.push(
        `needs ${names.join(", ")}, which ${names.length === 1 ? "is" : "are"} not in ` +
          `MCP_SYNC_ENV_ALLOW: add ${them} there (an MCP_* gateway variable never can be), ` +
          `set ${them} and enable the entry`,
      );
    }
    if (this.#unset.size > 0) {
      notes.push(`set ${[...this.#unset].sort().join(", ")} and enable the entry`);
    }
    if (!this.#options.trusted) {
      notes.push(
        "from a registry not in MCP_SYNC_TRUSTED_REGISTRIES: review it and enable it by hand",
      );
    }
    if (
      this.#disabled || this.#notAllowed.size > 0 || this.#unset.size > 0 || !this.#options.trusted
    ) {
      entry.enabled = false;
    }
    return { entry, notes, paths };
  }
}

/** One package argument as argv items (none when it is optional and has no value). */
function argumentValues(
  argument: RegistryArgument,
  dir: string,
  paths: Set<string>,
  _needs: Needs,
): string[] {
  const label = argumentLabel(argument);
  const named = argument.type === "named";
  if (named) checkOutsideText(argument.name, "argument name", "argumentName");
  else if (argument.type !== "positional") {
    throw new OutsideTextError(`argument type ${quoteOutside(String(argument.type))} is unknown`);
  }
  let value: string | undefined;
  if (isPath(argument)) {
    // The registry does not choose which of the host's files a server may touch.
    value = dir;
    paths.add(dir);
  } else if (argument.isSecret === true) {
    throw new OutsideTextError(
      `argument ${label} is a secret, which the gateway does not put on a command line`,
    );
  } else {
    value = inputValue(argument, label);
  }
  if (value === undefined) {
    if (argument.isRequired !== true) return [];
    // A required flag without a value is a switch.
    if (named && argument.format === "boolean") return [argument.name!];
    throw new OutsideTextError(
      `argument ${label} is required and the registry gives no value for it; add the server by hand`,
    );
  }
  return named ? [argument.name!, value] : [value];
}

/** A package's environment variable as the fleet's `env` value, or undefined to leave it out. */
function envValue(
  variable: RegistryEnvVar,
  dir: string,
  paths: Set<string>,
  needs: Needs,
): string | undefined {
  const name = checkOutsideText(variable.name, "environment variable", "envName");
  if (controlsRuntime(name)) {
    throw new OutsideTextError(
      `environment variable ${name} is read by the runtime (Deno, npm, TLS, a proxy, the ` +
        "loader), not by the server; a registry may not set it",
    );
  }
  if ((isPath(variable) || PATH_VARIABLE.test(name)) && variable.isSecret !== true) {
    paths.add(dir);
    const file = isOutsideText(variable.default, "literal") && /[^/]+$/.exec(variable.default);
    const base = file && /^[A-Za-z0-9._-]+$/.test(file[0]) ? file[0] : name.toLowerCase();
    return `${dir}/${base}`;
  }
  const fallback = variable.isSecret === true ? undefined : inputValue(variable, name);
  if (needs.allowed(name)) {
    // The operator allowed it: their value wins, the registry's default fills in.
    const required = variable.isSecret === true || variable.isRequired === true ||
      (variable.isRequired === undefined && fallback === undefined);
    return needs.reference(name, fallback ?? (required ? undefined : ""));
  }
  // Not allowed: a plain default is written as the value, anything else needs the operator.
  if (fallback !== undefined) return fallback;
  if (variable.isSecret === true || variable.isRequired === true) return needs.reference(name);
  return undefined;
}

/** A header's value: a plain literal as given, else a `${<ID>_<HEADER>}` reference. */
function headerValue(h: RegistryHeader, name: string, id: string, needs: Needs): string {
  if (h.isSecret !== true && isOutsideText(h.value, "literal")) return h.value;
  const variable = `${id}_${name}`.toUpperCase().replace(/[^A-Z0-9]+/g, "_");
  return needs.reference(variable);
}

/** An input's literal value (`value`, else `default`), when it is plain text. */
function inputValue(input: RegistryInput, label: string): string | undefined {
  for (const candidate of [input.value, input.default]) {
    if (candidate === undefined || candidate === null) continue;
    if (!isOutsideText(candidate, "literal") || /\{[^}]*\}/.test(String(candidate))) {
      throw new OutsideTextError(
        `${label} has the value ${
          quoteOutside(String(candidate))
        }, which is not plain text (printable ASCII without $ { }); add the server by hand`,
      );
    }
    return candidate;
  }
  return undefined;
}

/** A declared path: `format: filepath`, or a hint or name that says path, dir, folder or file. */
function isPath(input: RegistryInput & { valueHint?: string; name?: string }): boolean {
  if (input.format === "filepath") return true;
  const words = `${input.valueHint ?? ""} ${input.type === "named" ? input.name ?? "" : ""}`;
  return /(^|[^a-z])(path|paths|dir|directory|directories|folder|root)([^a-z]|$)/i.test(words);
}

function argumentLabel(argument: RegistryArgument): string {
  const text = argument.type === "named" ? argument.name : argument.valueHint ?? argument.value;
  return typeof text === "string" && isOutsideText(text, "literal")
    ? text
    : quoteOutside(String(text ?? "(unnamed)"));
}

function list<T>(value: unknown): T[] {
  return Array.isArray(value) ? value.filter((v) => typeof v === "object" && v !== null) : [];
}

function describeKind(value: unknown): string {
  return typeof value === "string" && /^[A-Za-z0-9@/._-]{1,100}$/.test(value)
    ? value
    : quoteOutside(String(value));
}
