/**
 * The fleet file: the upstream MCP servers the gateway aggregates, as YAML.
 *
 * ```yaml
 * proxy_servers:
 *   - id: github
 *     command: ["npx", "-y", "@modelcontextprotocol/server-github"]
 *     env:
 *       GITHUB_TOKEN: ${GITHUB_TOKEN}
 *   - id: gateway
 *     url: https://mcp.example.com/sse
 *     transport: sse
 *     enabled: false
 * ```
 *
 * The person reading an error here is editing that file, so every problem is reported as
 * `file:line: what is wrong and how to fix it`, and all problems are reported at once rather than
 * one per restart. Unknown keys are errors (a typo such as `trasport` would otherwise be silently
 * ignored). Secrets come from the environment through `${VAR}` interpolation, applied after
 * parsing so that line numbers still point into the file as written.
 * @module
 */
import { hasControlCharacter } from "../support/control_characters.ts";
import { z } from "zod";
import { GatewayError } from "../support/errors.ts";
import { FAILURE_CLASSES, type FailureClass } from "./failure_class.ts";
import {
  describe,
  formatPath,
  isMapping,
  parseYamlSource,
  ProblemList,
  type YamlPath,
} from "../config/yaml_source.ts";
import { type CatalogLimits, DEFAULT_CATALOG_LIMITS } from "./catalog_fetch.ts";
import {
  controlsRuntime,
  type FleetOrigin,
  originAt,
  refusedVariable,
  syncEnvAllow,
} from "./fleet_origin.ts";
import { interpolate, RefusedVariableError } from "./interpolate.ts";
import { withDataDir } from "../config/data_dir.ts";
import { parseDotenv } from "../config/dotenv.ts";
import { dirname, isAbsolute, join } from "node:path";

/** How the gateway talks to an upstream server. */
export type FleetTransport = "stdio" | "sse" | "http";

/** A sandbox grant: `true` for all, `false` for none, or the list of allowed paths/hosts/names. */
export type FleetGrant = boolean | string[];

/** Deno permission grants for a `sandbox: deno` server; an absent key grants nothing. */
export interface FleetPermissions {
  read?: FleetGrant;
  write?: FleetGrant;
  net?: FleetGrant;
  env?: FleetGrant;
  run?: FleetGrant;
  sys?: FleetGrant;
}

/** One upstream server, resolved: defaults applied and variables interpolated. */
export interface FleetServer {
  /** Unique id, `^[a-z0-9][a-z0-9_-]*$`, never containing the tool separator. */
  id: string;
  transport: FleetTransport;
  /** The child process and its arguments (stdio only). */
  command?: string[];
  /** The server's http(s) endpoint (sse and http only). */
  url?: string;
  /** Extra HTTP request headers (sse and http only). */
  headers: Record<string, string>;
  /** Extra environment variables for the child process (stdio only). */
  env: Record<string, string>;
  enabled: boolean;
  /** Working directory of the child process (stdio only). */
  cwd?: string;
  timeouts: { connectMs: number; callMs: number };
  /** Check every `intervalMs`; degraded after `degradedAfter`, failed after `failedAfter` misses. */
  health: { intervalMs: number; degradedAfter: number; failedAfter: number };
  /** `count`: the failure classes counted towards `threshold`; absent: timeout, crash, internal_error, server_error. */
  breaker: { threshold: number; baseMs: number; maxMs: number; count?: FailureClass[] };
  permissions: FleetPermissions;
  /** `deno`: the stdio child runs under `deno run` with {@link FleetServer.permissions} as flags. */
  sandbox: "none" | "deno";
  /**
   * `worker` (default): the relay runs in a permission-confined worker; `inline` (stdio only): in
   * the kernel's thread, two thread hops fewer per call, without the worker's confinement.
   */
  isolation: "worker" | "inline";
  /** Namespace of the server's tools (`<prefix><separator><tool>`); `""` means unprefixed. */
  prefix: string;
  /** Tool-name globs: an empty `allow` allows all; `deny` wins over `allow`. */
  tools: { allow: string[]; deny: string[] };
  /**
   * `shared` (default): one instance serves every caller; `tenant`: one per tenant, started on the
   * tenant's first call; `session`: one per inbound session, stopped when the session ends.
   */
  scope?: FleetScope;
  /** Most instances a `tenant` or `session` scoped server runs at once (default 16). */
  maxInstances?: number;
  /** A scoped server's instance with no call in flight and no subscription stops after this (ms). */
  idleTimeoutMs?: number;
  /** Per-tenant `env` (stdio) and `headers` (http, sse) over the entry's own; `scope: tenant` only. */
  tenants?: Record<string, FleetTenantCredentials>;
  /** `passthrough` (http, sse; `scope: session`): each instance sends its caller's own bearer token. */
  auth?: "none" | "passthrough";
  /** `passthrough_audience`: the `aud` a forwarded token must name; the entry's URL by default. */
  passthroughAudience?: string[];
  /** Bounds of the upstream's catalog (`limits:`); absent means the defaults. */
  limits?: CatalogLimits;
  /** Who wrote the entry, when not the operator: its marker line says sync or discovery. */
  origin?: Exclude<FleetOrigin, "operator">;
  /** 1-based line of the entry in the file */
  line: number;
}

/** How many callers one upstream instance serves. */
export type FleetScope = "shared" | "tenant" | "session";

/** One tenant's own credentials for a `scope: tenant` server, interpolated like the entry's. */
export interface FleetTenantCredentials {
  env: Record<string, string>;
  headers: Record<string, string>;
}

/** Instances a scoped server may run at once unless `max_instances` says otherwise. */
export const DEFAULT_MAX_INSTANCES = 16;

/** Seconds a scoped server's unused instance runs unless `idle_timeout` says otherwise. */
export const DEFAULT_IDLE_TIMEOUT_SECONDS = 600;

/** A parsed fleet file. */
export interface FleetConfig {
  servers: FleetServer[];
  /** The file the fleet came from, as given. */
  path: string;
}

/** Values from the gateway configuration that the fleet file defaults to. */
export interface FleetDefaults {
  /** MCP_PROXY_TOOL_SEPARATOR: ids and prefixes must not contain it. */
  separator: string;
  /** MCP_PROXY_HEALTH_CHECK_INTERVAL: `health.interval` when a server sets none. */
  healthIntervalSeconds: number;
}

const TRANSPORTS = ["stdio", "sse", "http"] as const;
const ID_PATTERN = /^[a-z0-9][a-z0-9_-]*$/;
// Prefixes become part of tool names, so they use the MCP tool-name alphabet.
const PREFIX_PATTERN = /^(?:[A-Za-z0-9][A-Za-z0-9_.-]*)?$/;
const HEADER_NAME = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
const SECONDS_KEYS = new Set(["connect", "call", "interval", "base", "max"]);

const nonEmpty = z.string().min(1);
/** A string with no control character but tab: argv, URLs and header values are single lines. */
const line = z.string().refine((v) => !hasControlCharacter(v, true), {
  error: "holds a control character (a line break?); write it on one line",
});
const seconds = z.number().positive();
const count = z.number().int().min(1);
const grant = z.union([z.boolean(), z.array(nonEmpty)], {
  error: (iss) => `must be true, false or a list of strings, received ${describe(iss.input)}`,
});

/** One schema per server field, parsed separately so that one bad field hides no other problem. */
const FIELDS = {
  id: z.string().regex(ID_PATTERN, {
    error: (iss) =>
      `must be lowercase letters, digits, _ and -, starting with a letter or digit, received ${
        describe(iss.input)
      }`,
  }),
  command: z.array(line).min(1),
  transport: z.enum(TRANSPORTS),
  url: line.pipe(nonEmpty),
  headers: z.record(z.string(), line),
  env: z.record(z.string(), z.string()),
  enabled: z.boolean(),
  cwd: line.pipe(nonEmpty),
  timeouts: z.strictObject({ connect: seconds.optional(), call: seconds.optional() }),
  health: z.strictObject({
    interval: seconds.optional(),
    degraded_after: count.optional(),
    failed_after: count.optional(),
  }),
  breaker: z.strictObject({
    threshold: count.optional(),
    base: seconds.optional(),
    max: seconds.optional(),
    count: z.array(z.enum(FAILURE_CLASSES)).optional(),
  }),
  permissions: z.strictObject({
    read: grant.optional(),
    write: grant.optional(),
    net: grant.optional(),
    env: grant.optional(),
    run: grant.optional(),
    sys: grant.optional(),
  }),
  sandbox: z.enum(["none", "deno"]),
  isolation: z.enum(["worker", "inline"]),
  prefix: z.string().regex(PREFIX_PATTERN, {
    error: (iss) =>
      `must be empty or letters, digits, _ . and -, starting with a letter or digit, received ${
        describe(iss.input)
      }`,
  }),
  tools: z.strictObject({
    allow: z.array(nonEmpty).optional(),
    deny: z.array(nonEmpty).optional(),
  }),
  scope: z.enum(["shared", "tenant", "session"]),
  max_instances: count,
  idle_timeout: seconds,
  tenants: z.record(
    z.string().min(1),
    z.strictObject({
      env: z.record(z.string(), z.string()).optional(),
      headers: z.record(z.string(), line).optional(),
      secrets_file: line.pipe(nonEmpty).optional(),
    }),
  ),
  auth: z.enum(["none", "passthrough"]),
  passthrough_audience: z.union([line.pipe(nonEmpty), z.array(line.pipe(nonEmpty)).min(1)]),
  limits: z.strictObject({
    pages: count.optional(),
    items: count.optional(),
    description_bytes: count.optional(),
    schema_bytes: count.optional(),
    schema_depth: count.optional(),
    catalog_bytes: count.optional(),
  }),
};

type FieldName = keyof typeof FIELDS;
type Fields = { [K in FieldName]?: z.output<(typeof FIELDS)[K]> };

const SERVER_KEYS = Object.keys(FIELDS);
const NESTED_KEYS: Record<string, string[]> = {
  timeouts: Object.keys(FIELDS.timeouts.shape),
  health: Object.keys(FIELDS.health.shape),
  breaker: Object.keys(FIELDS.breaker.shape),
  permissions: Object.keys(FIELDS.permissions.shape),
  tools: Object.keys(FIELDS.tools.shape),
  limits: Object.keys(FIELDS.limits.shape),
};
/** Keys of one tenant's credentials under `tenants.<name>`. */
const TENANT_KEYS = ["env", "headers", "secrets_file"];

const EXPECTED: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "a whole number",
  boolean: "true or false",
  array: "a list",
  object: "a mapping",
  record: "a mapping",
};

/** Messages for the issues the schemas above leave to the parse, in the file's vocabulary. */
const PARSE = {
  error: (iss: z.core.$ZodRawIssue): string | undefined => {
    switch (iss.code) {
      case "invalid_type":
        if (iss.input === undefined) return "is required";
        if (
          iss.expected === "string" &&
          (typeof iss.input === "number" || typeof iss.input === "boolean")
        ) {
          return `must be a string, received ${describe(iss.input)}; quote it: "${iss.input}"`;
        }
        return `must be ${EXPECTED[iss.expected] ?? iss.expected}, received ${describe(iss.input)}`;
      case "invalid_value":
        return `must be one of ${iss.values.join(", ")}, received ${describe(iss.input)}`;
      case "too_small":
        if (iss.origin === "array" || iss.origin === "string") return "must not be empty";
        return `must be ${iss.inclusive ? "at least" : "greater than"} ${String(iss.minimum)}, ` +
          `received ${describe(iss.input)}`;
      default:
        return undefined;
    }
  },
};

/** Parses fleet YAML; throws `config_invalid` listing every problem as `file:line: message`. */
export function parseFleetConfig(
  text: string,
  path: string,
  env: Record<string, string | undefined>,
  defaults: FleetDefaults,
  /** Reads a tenant's `secrets_file` (relative paths are relative to the fleet file). */
  readSecretsFile: (path: string) => string = Deno.readTextFileSync,
): FleetConfig {
  // ${MCP_DATA_DIR} always resolves (to an absolute path), so a fleet can name where to write.
  env = withDataDir(env);
  const problems = new ProblemList("fleet config", path);
  const source = parseYamlSource(text, path, problems);
  if (source === undefined) throw problems.error();
  const { root, lineOf } = source;
  const fieldProblem = (at: YamlPath, message: string) => problems.add(source, at, message);
  const report = (at: YamlPath, message: string) => problems.addAt(path, lineOf(at), message);
  const unknownKey = (at: YamlPath, known: readonly string[]) =>
    problems.unknownKey(
      source,
      at,
      known,
      (close) => SECONDS_KEYS.has(close) ? " (in seconds)" : "",
    );

  const servers: FleetServer[] = [];
  if (root === null || root === undefined) return { servers, path };
  if (!isMapping(root)) {
    report([], `the file must be a mapping with a proxy_servers list, received ${describe(root)}`);
    throw problems.error();
  }
  for (const key of Object.keys(root)) {
    if (key !== "proxy_servers") unknownKey([key], ["proxy_servers"]);
  }
  const list = root.proxy_servers;
  if (!Object.hasOwn(root, "proxy_servers")) {
    report(
      [],
      "proxy_servers is required: list the upstream servers under it (an empty file means no servers)",
    );
  } else if (list !== null && !Array.isArray(list)) {
    fieldProblem(["proxy_servers"], `must be a list of servers, received ${describe(list)}`);
  }

  const lines = text.split("\n");
  const allowed = syncEnvAllow(env);
  const ids = new Map<string, { index: number; line: number }>();
  const prefixes = new Map<string, { id: string; line: number }>();
  const entries: unknown[] = Array.isArray(list) ? list : [];
  entries.forEach((raw, index) => {
    const at: YamlPath = ["proxy_servers", index];
    const before = problems.size;
    if (!isMapping(raw)) {
      fieldProblem(at, `must be a mapping with at least an id, received ${describe(raw)}`);
      return;
    }

    const fields: Fields = {};
    for (const [key, value] of Object.entries(raw)) {
      if (!Object.hasOwn(FIELDS, key)) {
        unknownKey([...at, key], SERVER_KEYS);
        continue;
      }
      const result = FIELDS[key as FieldName].safeParse(value, PARSE);
      if (result.success) {
        (fields as Record<string, unknown>)[key] = result.data;
        continue;
      }
      for (const issue of result.error.issues) {
        const issuePath: YamlPath = [...at, key, ...issue.path.map((k) => k as string | number)];
        if (issue.code === "unrecognized_keys") {
          const known = key === "tenants" ? TENANT_KEYS : NESTED_KEYS[key] ?? [];
          for (const extra of issue.keys) unknownKey([...issuePath, extra], known);
        } else {
          fieldProblem(issuePath, issue.message);
        }
      }
    }
    const has = (key: FieldName) => Object.hasOwn(raw, key);
    const line = lineOf(at);
    const { id } = fields;
    if (!has("id")) fieldProblem([...at, "id"], "is required");
    const label = id === undefined ? formatPath(at) : `server "${id}"`;

    // Cross-field rules: each runs only when the fields it reads are valid, to avoid echoes.
    if (id !== undefined && defaults.separator && id.includes(defaults.separator)) {
      fieldProblem(
        [...at, "id"],
        `"${id}" must not contain the tool separator "${defaults.separator}" ` +
          "(MCP_PROXY_TOOL_SEPARATOR); rename the server",
      );
    }
    // "gh_" + "__" + "x" reads as "gh" + "__" + "_x": policy globs on one server (gh__*) would
    // match the other's tools. A namespace must end where the separator begins.
    const overlaps = (name: string | undefined): name is string =>
      name !== undefined && name !== "" && defaults.separator !== "" &&
      !name.includes(defaults.separator) &&
      `${name}${defaults.separator}`.indexOf(defaults.separator) !== name.length;
    for (const [field, name] of [["id", id], ["prefix", fields.prefix]] as const) {
      if (!overlaps(name)) continue;
      fieldProblem(
        [...at, field],
        `"${name}" must not end with "${defaults.separator.slice(0, 1)}": followed by the tool ` +
          `separator "${defaults.separator}" its tool names would read as another server's; ` +
          `rename it, e.g. "${name.replace(/[_-]+$/, "")}"`,
      );
    }
    // An invalid prefix is already reported; undefined keeps it out of the collision check.
    const prefix = has("prefix") ? fields.prefix : id;
    if (
      fields.prefix !== undefined && defaults.separator &&
      fields.prefix.includes(defaults.separator)
    ) {
      fieldProblem(
        [...at, "prefix"],
        `"${fields.prefix}" must not contain the tool separator "${defaults.separator}" ` +
          "(MCP_PROXY_TOOL_SEPARATOR); choose another prefix",
      );
    }

    const transport: FleetTransport | undefined = fields.transport ??
      (has("transport") ? undefined : has("command") ? "stdio" : "http");
    if (!has("transport") && !has("command") && !has("url")) {
      fieldProblem(
        at,
        "needs a command (for a stdio server) or a url (for an sse or http server)",
      );
    } else if (transport === "stdio") {
      if (!has("command")) {
        fieldProblem(
          [...at, "command"],
          'is required for a stdio server, e.g. command: ["npx", "-y", "@modelcontextprotocol/server-github"]',
        );
      } else if (fields.command?.[0] === "") {
        fieldProblem(
          [...at, "command", 0],
          "must name the program to run, received an empty string",
        );
      }
      for (const key of ["url", "headers"] as const) {
        if (has(key)) {
          fieldProblem(
            [...at, key],
            "is only for sse and http servers; remove it or set transport: sse or http",
          );
        }
      }
    } else if (transport !== undefined) {
      if (has("command")) {
        fieldProblem(
          [...at, "command"],
          `is only for stdio servers; remove it or set transport: stdio (this one is ${transport})`,
        );
      }
      if (!has("url")) {
        fieldProblem(
          [...at, "url"],
          `is required for an ${transport} server, e.g. url: https://mcp.example.com/mcp`,
        );
      }
      for (const key of ["env", "cwd"] as const) {
        if (has(key)) {
          fieldProblem(
            [...at, key],
            `is only for stdio servers (it configures the child process); remove it`,
          );
        }
      }
      if (fields.sandbox === "deno") {
        fieldProblem([...at, "sandbox"], "deno only applies to stdio servers; remove it");
      }
      if (fields.isolation === "inline") {
        fieldProblem([...at, "isolation"], "inline only applies to stdio servers; remove it");
      }
    }
    const sandboxValid = !has("sandbox") || fields.sandbox !== undefined;
    if (has("permissions") && sandboxValid && fields.sandbox !== "deno") {
      fieldProblem(
        [...at, "permissions"],
        "only apply with sandbox: deno; add sandbox: deno or remove permissions",
      );
    }
    const health = fields.health ?? {};
    const degradedAfter = health.degraded_after ?? 1;
    const failedAfter = health.failed_after ?? 3;
    if (failedAfter < degradedAfter) {
      if (health.failed_after === undefined) {
        fieldProblem(
          [...at, "health", "degraded_after"],
          `(${degradedAfter}) must not exceed failed_after (3, the default); set failed_after too`,
        );
      } else {
        fieldProblem(
          [...at, "health", "failed_after"],
          `(${failedAfter}) must be at least degraded_after (${degradedAfter}${
            health.degraded_after === undefined ? ", the default" : ""
          })`,
        );
      }
    }
    const breaker = fields.breaker ?? {};
    const baseSeconds = breaker.base ?? 30;
    const maxSeconds = breaker.max ?? 600;
    if (maxSeconds < baseSeconds) {
      if (breaker.max === undefined) {
        fieldProblem(
          [...at, "breaker", "base"],
          `(${baseSeconds} s) must not exceed max (600 s, the default); set max too`,
        );
      } else {
        fieldProblem(
          [...at, "breaker", "max"],
          `(${maxSeconds} s) must be at least base (${baseSeconds} s${
            breaker.base === undefined ? ", the default" : ""
          })`,
        );
      }
    }
    const scope = fields.scope ?? "shared";
    const scopeValid = !has("scope") || fields.scope !== undefined;
    if (has("max_instances") && scopeValid && scope === "shared") {
      fieldProblem(
        [...at, "max_instances"],
        "only applies with scope: tenant or scope: session (a shared server runs one instance); " +
          "set scope or remove max_instances",
      );
    }
    if (has("idle_timeout") && scopeValid && scope === "shared") {
      fieldProblem(
        [...at, "idle_timeout"],
        "only applies with scope: tenant or scope: session (a shared server's one instance " +
          "never idles out); set scope or remove idle_timeout",
      );
    }
    if (has("tenants") && scopeValid && scope !== "tenant") {
      fieldProblem(
        [...at, "tenants"],
        `per-tenant credentials need scope: tenant (one instance per tenant, each with its own); ` +
          `this server has scope: ${scope}`,
      );
    }
    if (fields.auth === "passthrough") {
      if (transport === "stdio") {
        fieldProblem(
          [...at, "auth"],
          "passthrough only applies to http and sse servers (it forwards the caller's bearer " +
            "token as the Authorization header); remove it",
        );
      } else if (scopeValid && scope !== "session") {
        fieldProblem(
          [...at, "auth"],
          "passthrough needs scope: session (each session's connection carries its own caller's " +
            `token); this server has scope: ${scope}`,
        );
      }
      if (
        Object.keys(fields.headers ?? {}).some((name) => name.toLowerCase() === "authorization")
      ) {
        fieldProblem(
          [...at, "headers", "Authorization"],
          "conflicts with auth: passthrough, which sends the caller's own token; remove one",
        );
      }
    } else if (has("passthrough_audience")) {
      fieldProblem(
        [...at, "passthrough_audience"],
        "only applies with auth: passthrough (it names the audience a forwarded token must " +
          "carry); remove it or set auth: passthrough",
      );
    }
    const envNames = (env: Record<string, string> | undefined, where: YamlPath) => {
      for (const key of Object.keys(env ?? {})) {
        if (key === "" || key.includes("=") || key.includes("\0")) {
          fieldProblem(
            [...where, key],
            `is not a valid variable name: it must not be empty or contain "="`,
          );
        }
      }
    };
    const headerNames = (headers: Record<string, string> | undefined, where: YamlPath) => {
      for (const key of Object.keys(headers ?? {})) {
        if (!HEADER_NAME.test(key)) {
          fieldProblem(
            [...where, key],
            "is not a valid header name: use letters, digits and -, e.g. Authorization",
          );
        }
      }
    };
    envNames(fields.env, [...at, "env"]);
    headerNames(fields.headers, [...at, "headers"]);
    for (const [tenant, credentials] of Object.entries(fields.tenants ?? {})) {
      const where: YamlPath = [...at, "tenants", tenant];
      envNames(credentials.env, [...where, "env"]);
      headerNames(credentials.headers, [...where, "headers"]);
      if (transport === "stdio" && credentials.headers !== undefined) {
        fieldProblem(
          [...where, "headers"],
          "is only for sse and http servers; give a stdio server's tenants env instead",
        );
      }
      if (transport !== undefined && transport !== "stdio" && credentials.env !== undefined) {
        fieldProblem(
          [...where, "env"],
          `is only for stdio servers; give an ${transport} server's tenants headers instead`,
        );
      }
    }

    // A disabled server may reference variables that are not set yet: it keeps the raw text.
    const enabled = fields.enabled ?? true;
    const unresolved = new Set<string>();
    // Entries sync or discovery wrote may only reference what the operator allowed.
    const origin = originAt(lines, line);
    const refuse = (name: string) => refusedVariable(origin, name, allowed, line - 1);
    const resolve = (
      value: string,
      where: YamlPath,
      field: string,
      vars: Record<string, string | undefined> = env,
    ): string => {
      const missing = new Set<string>();
      let resolved: string;
      try {
        resolved = interpolate(value, vars, (name) => missing.add(name), refuse);
      } catch (error) {
        // Disabled, such an entry is how sync proposes it: kept as written, never resolved.
        if (error instanceof RefusedVariableError && !enabled) {
          unresolved.add(field);
          return value;
        }
        report(where, `${label} ${field}: ${(error as Error).message}`);
        unresolved.add(field);
        return value;
      }
      if (missing.size === 0) return resolved;
      unresolved.add(field);
      if (enabled) {
        for (const name of missing) {
          report(
            where,
            `${label} ${field} needs variable ${name}, which is not set; ` +
              `export it or use \${${name}:-default}`,
          );
        }
      }
      return value;
    };
    const command = fields.command?.map((arg, i) =>
      resolve(arg, [...at, "command", i], `command[${i}]`)
    );
    const url = fields.url === undefined ? undefined : resolve(fields.url, [...at, "url"], "url");
    const headers = mapValues(
      fields.headers ?? {},
      (value, key) => resolve(value, [...at, "headers", key], `headers.${key}`),
    );
    const childEnv = mapValues(
      fields.env ?? {},
      (value, key) => resolve(value, [...at, "env", key], `env.${key}`),
    );
    const cwd = fields.cwd === undefined ? undefined : resolve(fields.cwd, [...at, "cwd"], "cwd");
    // A tenant's secrets file: variables for its own values only, the file's winning.
    const secretsOf = (
      file: string | undefined,
      where: YamlPath,
      field: string,
    ): Record<string, string> => {
      if (file === undefined || !enabled) return {};
      if (origin !== "operator") {
        report(
          [...where, "secrets_file"],
          `${label} ${field}.secrets_file: an entry written by ${origin} may not read files; ` +
            "delete its marker line to adopt it as your own",
        );
        return {};
      }
      const full = isAbsolute(file) ? file : join(dirname(path), file);
      let text: string;
      try {
        text = readSecretsFile(full);
      } catch (error) {
        report(
          [...where, "secrets_file"],
          `${label} ${field}.secrets_file "${file}" cannot be read: ${(error as Error).message}`,
        );
        return {};
      }
      try {
        return parseDotenv(text, full);
      } catch (error) {
        // The line's text is not quoted: it may hold a secret.
        const at = (error as GatewayError).data?.line;
        report(
          [...where, "secrets_file"],
          `${label} ${field}.secrets_file "${file}" line ${at ?? "?"} is not KEY=value ` +
            "(# starts a comment)",
        );
        return {};
      }
    };
    // Callers' tokens and per-tenant credentials are the operator's decision, never a registry's.
    if (origin !== "operator") {
      for (const key of Object.keys(fields.env ?? {}).filter(controlsRuntime)) {
        fieldProblem(
          [...at, "env", key],
          `may not be set by ${origin}: it is read by the runtime (Deno, npm, TLS, a proxy, the ` +
            "loader), not by the server, and would reach past its sandbox; delete the entry's " +
            "marker line to adopt it as your own",
        );
      }
      for (const key of ["auth", "tenants"] as const) {
        if (has(key) && (key !== "auth" || fields.auth === "passthrough")) {
          fieldProblem(
            [...at, key],
            `may not be set by ${origin} (it would hand callers' tokens or tenants' credentials ` +
              "to an upstream the operator did not choose); delete the entry's marker line to " +
              "adopt it as your own",
          );
        }
      }
    }
    const tenants = Object.fromEntries(
      Object.entries(fields.tenants ?? {}).map(([tenant, credentials]) => {
        const where: YamlPath = [...at, "tenants", tenant];
        const field = `tenants.${tenant}`;
        const vars = { ...env, ...secretsOf(credentials.secrets_file, where, field) };
        return [tenant, {
          env: mapValues(
            credentials.env ?? {},
            (value, key) => resolve(value, [...where, "env", key], `${field}.env.${key}`, vars),
          ),
          headers: mapValues(
            credentials.headers ?? {},
            (value, key) =>
              resolve(value, [...where, "headers", key], `${field}.headers.${key}`, vars),
          ),
        }];
      }),
    );
    const permissions: FleetPermissions = {};
    for (const [key, grant] of Object.entries(fields.permissions ?? {})) {
      permissions[key as keyof FleetPermissions] = Array.isArray(grant)
        ? grant.map((value, i) =>
          resolve(value, [...at, "permissions", key, i], `permissions.${key}[${i}]`)
        )
        : grant;
    }
    // Validated after interpolation; quotes the text as written so no secret reaches the message.
    if (url !== undefined && !unresolved.has("url") && !isHttpUrl(url)) {
      fieldProblem([...at, "url"], `must be an http:// or https:// URL, received "${fields.url}"`);
    }

    if (id !== undefined) {
      const first = ids.get(id);
      if (first) {
        fieldProblem(
          [...at, "id"],
          `"${id}" is already used by proxy_servers[${first.index}] (line ${first.line}); ` +
            "give each server a unique id",
        );
      } else {
        ids.set(id, { index, line: lineOf([...at, "id"]) });
        if (prefix) {
          const owner = prefixes.get(prefix);
          if (owner) {
            fieldProblem(
              [...at, fields.prefix === undefined ? "id" : "prefix"],
              `"${prefix}" is already the tool prefix of server "${owner.id}" (line ${owner.line}); ` +
                "tool names would collide, so set a different prefix",
            );
          } else {
            prefixes.set(prefix, { id, line: lineOf([...at, "prefix"]) });
          }
        }
      }
    }

    if (problems.size > before || id === undefined || transport === undefined) return;
    const timeouts = fields.timeouts ?? {};
    const tools = fields.tools ?? {};
    servers.push({
      id,
      transport,
      ...(command === undefined ? {} : { command }),
      ...(url === undefined ? {} : { url }),
      headers,
      env: childEnv,
      enabled,
      ...(cwd === undefined ? {} : { cwd }),
      timeouts: { connectMs: ms(timeouts.connect ?? 30), callMs: ms(timeouts.call ?? 60) },
      health: {
        intervalMs: ms(health.interval ?? defaults.healthIntervalSeconds),
        degradedAfter,
        failedAfter,
      },
      breaker: {
        threshold: breaker.threshold ?? 5,
        baseMs: ms(baseSeconds),
        maxMs: ms(maxSeconds),
        ...(breaker.count === undefined ? {} : { count: [...new Set(breaker.count)] }),
      },
      permissions,
      sandbox: fields.sandbox ?? "none",
      isolation: fields.isolation ?? "worker",
      prefix: prefix ?? id,
      tools: { allow: tools.allow ?? [], deny: tools.deny ?? [] },
      // The defaults stay implicit, so an entry that sets none of these reads as it always did.
      ...(scope === "shared" ? {} : {
        scope,
        maxInstances: fields.max_instances ?? DEFAULT_MAX_INSTANCES,
        idleTimeoutMs: ms(fields.idle_timeout ?? DEFAULT_IDLE_TIMEOUT_SECONDS),
      }),
      ...(scope === "tenant" ? { tenants } : {}),
      ...(fields.auth === "passthrough" ? { auth: "passthrough" as const } : {}),
      ...(fields.auth === "passthrough" && fields.passthrough_audience !== undefined
        ? { passthroughAudience: [fields.passthrough_audience].flat() }
        : {}),
      ...(fields.limits ? { limits: catalogLimits(fields.limits) } : {}),
      ...(origin === "operator" ? {} : { origin }),
      line,
    });
  });

  problems.throwIfAny();
  return { servers, path };
}

/** Reads and parses a fleet file; see {@link parseFleetConfig}. */
export async function loadFleetConfig(
  path: string,
  env: Record<string, string | undefined>,
  defaults: FleetDefaults,
  readTextFile: (path: string) => Promise<string> = Deno.readTextFile,
): Promise<FleetConfig> {
  let text: string;
  try {
    text = await readTextFile(path);
  } catch (error) {
    const message = error instanceof Deno.errors.NotFound
      ? `Fleet config "${path}" does not exist; create it or point MCP_PROXY_CONFIG_PATH (--config) at it`
      : `Cannot read fleet config "${path}": ${
        error instanceof Error ? error.message : String(error)
      }; check MCP_PROXY_CONFIG_PATH (--config)`;
    throw new GatewayError("config_invalid", message, { path, problems: [message] });
  }
  return parseFleetConfig(text, path, env, defaults);
}

function isHttpUrl(text: string): boolean {
  const url = URL.parse(text);
  return url !== null && (url.protocol === "http:" || url.protocol === "https:");
}

/** The `limits:` block over the defaults. */
function catalogLimits(limits: NonNullable<Fields["limits"]>): CatalogLimits {
  const d = DEFAULT_CATALOG_LIMITS;
  return {
    pages: limits.pages ?? d.pages,
    items: limits.items ?? d.items,
    descriptionBytes: limits.description_bytes ?? d.descriptionBytes,
    schemaBytes: limits.schema_bytes ?? d.schemaBytes,
    schemaDepth: limits.schema_depth ?? d.schemaDepth,
    catalogBytes: limits.catalog_bytes ?? d.catalogBytes,
  };
}

function ms(seconds: number): number {
  return Math.round(seconds * 1000);
}

function mapValues(
  record: Record<string, string>,
  fn: (value: string, key: string) => string,
): Record<string, string> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, fn(v, k)]));
}
