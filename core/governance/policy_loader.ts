/**
 * Policy files: YAML that becomes the compiled {@link PolicySet}.
 *
 * ```yaml
 * tenants:
 *   "*":                        # every tenant not listed
 *     approval: [destructive]
 *   acme:
 *     allow: ["github__*"]
 *     deny: ["github__delete_*"]
 *     effects: { "github__create_*": write }
 *     arguments:
 *       github__list_issues:
 *         per_page: { maximum: 50 }
 *     rate_limits:
 *       "github__*": { per_minute: 60, burst: 10 }
 *     resources:
 *       allow: ["proxy://github/*"]
 *       deny: ["proxy://github/secrets/*"]
 *       rate_limits: { "proxy://github/*": { per_minute: 120 } }   # one bucket for all such URIs
 *     prompts: ["github__*"]         # a list is an allowlist
 *   beta:
 *     approval: { effects: [write, destructive], by: in_band }   # or `approval: in_band`
 * connectors:
 *   github: { tenants: [acme], effects: [read, write] }
 * trusted_annotations: [github]   # whose readOnlyHint counts (none's by default)
 * ```
 *
 * A policy path is a directory (every `*.yaml`/`*.yml` in it, in name order, except the
 * `*.test.yaml` files that hold `policy test` cases) or one file. As with the fleet file, the
 * reader is editing these files, so every problem in every file is reported at once as
 * `file:line: what is wrong and how to fix it`, and unknown keys are errors.
 * @module
 */
import { GatewayError } from "../support/errors.ts";
import { compileGlob } from "../support/glob.ts";
import {
  LINEAR_PATTERN_FIX,
  linearPattern,
  LinearPatternError,
} from "../support/linear_pattern.ts";
import {
  describe,
  isMapping,
  parseYamlSource,
  ProblemList,
  suggest,
  type YamlPath,
  type YamlSource,
} from "../config/yaml_source.ts";
import {
  type ApprovalBy,
  type ArgumentRule,
  type ConnectorPolicy,
  EFFECT_CLASSES,
  type EffectClass,
  type EffectRule,
  type GlobRule,
  type ItemRules,
  type PolicySet,
  type RateLimitRule,
  type RuleSource,
  type TenantPolicy,
} from "./policy.ts";

/** A policy file's path and contents. */
export interface PolicyFile {
  path: string;
  text: string;
}

/** File access for {@link loadPolicies} and {@link policyTestFiles}; Deno's by default. */
export interface PolicyFileAccess {
  readDir?: (path: string) => AsyncIterable<Deno.DirEntry>;
  readTextFile?: (path: string) => Promise<string>;
}

/** What a `policy test` case expects the decision to be. */
export type PolicyExpectation = "allow" | "deny" | "approval_required";

/** One `policy test` case from a `*.test.yaml` file: exactly one of tool, resource and prompt. */
export interface PolicyTestCase {
  name: string;
  tenant: string;
  /** A tool call, by the name the gateway lists. */
  tool?: string;
  /** A resource read, by the URI the gateway lists (`proxy://<server>/…`). */
  resource?: string;
  /** A prompt get, by the name the gateway lists. */
  prompt?: string;
  arguments?: Record<string, unknown>;
  /** The tool's MCP annotations (readOnlyHint, destructiveHint, …), as the upstream would send. */
  annotations?: Record<string, unknown>;
  /** The upstream server id, when the tool name alone does not say. */
  server?: string;
  expect: PolicyExpectation;
  /** The error code a denial must carry (`tool_denied`, …). */
  code?: string;
  /** The test file, as given. */
  file: string;
  /** 1-based line of the case. */
  line: number;
}

const BUILT_IN = "(built-in default)";

/** What a rule's glob names: tool names, resource URIs or prompt names. */
type RuleKind = "tool" | "resource" | "prompt";

function noItemRules(): ItemRules {
  return { allow: [], deny: [], rateLimits: [] };
}

function defaultTenant(source: RuleSource): TenantPolicy {
  return {
    tenant: "*",
    source,
    allow: [],
    deny: [],
    effects: [],
    approval: new Set<EffectClass>(["destructive"]),
    approvalBy: "operator",
    resources: noItemRules(),
    prompts: noItemRules(),
    arguments: [],
    rateLimits: [],
    alwaysActive: [],
  };
}

/**
 * The policy without policy files: tenant `*` with no allow or deny (every tool passes), approval
 * for destructive calls, no connector boundary. Its rules' source is `(built-in default)`, line 0.
 */
export const DEFAULT_POLICY: PolicySet = Object.freeze({
  tenants: new Map([[
    "*",
    defaultTenant({ file: BUILT_IN, line: 0, text: "approval [destructive]" }),
  ]]),
  connectors: new Map<string, ConnectorPolicy>(),
  files: Object.freeze([]),
});

const ROOT_KEYS = ["tenants", "connectors", "trusted_annotations"];
const TENANT_KEYS = [
  "allow",
  "deny",
  "effects",
  "approval",
  "arguments",
  "rate_limits",
  "discovery",
  "always_active",
  "resources",
  "prompts",
];
const APPROVAL_KEYS = ["effects", "by"];
const APPROVERS: readonly ApprovalBy[] = ["operator", "in_band"];
const ITEM_KEYS = ["allow", "deny", "rate_limits"];
const DISCOVERY_MODES = ["legacy", "search"];
const RATE_KEYS = ["per_minute", "burst"];
const CONNECTOR_KEYS = ["tenants", "effects"];
const CASE_KEYS = [
  "name",
  "tenant",
  "tool",
  "resource",
  "prompt",
  "arguments",
  "annotations",
  "server",
  "expect",
  "code",
];
const CASE_TARGETS = ["tool", "resource", "prompt"] as const;
const ANNOTATION_KEYS = [
  "title",
  "readOnlyHint",
  "destructiveHint",
  "idempotentHint",
  "openWorldHint",
];
const EXPECTATIONS: readonly PolicyExpectation[] = ["allow", "deny", "approval_required"];
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"];
const COUNT_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems"];
const RANGES = [
  ["minimum", "maximum"],
  ["minLength", "maxLength"],
  ["minItems", "maxItems"],
] as const;
/** The JSON Schema keywords an argument rule may use: scalar constraints that only tighten. */
const CONSTRAINT_KEYWORDS = [
  "pattern",
  "enum",
  "const",
  ...NUMBER_KEYWORDS,
  ...COUNT_KEYWORDS,
  "format",
  "items",
];
// The formats ajv-formats knows: a validator meeting an unknown format would reject the schema.
const FORMATS = [
  "date",
  "time",
  "date-time",
  "iso-time",
  "iso-date-time",
  "duration",
  "uri",
  "uri-reference",
  "uri-template",
  "url",
  "email",
  "hostname",
  "ipv4",
  "ipv6",
  "regex",
  "uuid",
  "json-pointer",
  "json-pointer-uri-fragment",
  "relative-json-pointer",
  "byte",
  "int32",
  "int64",
  "float",
  "double",
  "password",
  "binary",
];
// Globs match tool names, so anything outside the MCP tool-name alphabet could never match.
const GLOB_PATTERN = /^[A-Za-z0-9_.\-*?]+$/;
// Resource globs match URIs: any visible character, no spaces or control characters.
const URI_GLOB_PATTERN = /^[\x21-\x7e]+$/;
const MAX_GLOB_CHARS = 1024;
const SERVER_ID = /^[a-z0-9][a-z0-9_-]*$/;
const POLICY_FILE = /\.ya?ml$/;
const TEST_FILE = /\.test\.ya?ml$/;

/**
 * Reads the policy at `path` (a directory or one file); a missing path, or a directory without
 * policy files, gives {@link DEFAULT_POLICY}. Throws `config_invalid` listing every problem.
 */
export async function loadPolicies(
  path: string,
  options: PolicyFileAccess = {},
): Promise<PolicySet> {
  const files = await readPolicyFiles(path, options);
  return files.length === 0 ? DEFAULT_POLICY : parsePolicies(files, path);
}

/**
 * The policy files at `path` (a directory's `*.yaml`/`*.yml` but the test files, in name order,
 * or the one file), unparsed; none for a missing path. Throws `config_invalid` on a read error.
 */
export async function readPolicyFiles(
  path: string,
  options: PolicyFileAccess = {},
): Promise<PolicyFile[]> {
  const { readDir = Deno.readDir, readTextFile = Deno.readTextFile } = options;
  const listing = await list(path, readDir);
  if (listing === "missing") return [];
  const paths = listing === "file"
    ? [path]
    : listing.filter((name) => POLICY_FILE.test(name) && !TEST_FILE.test(name))
      .map((name) => join(path, name));
  return await Promise.all(paths.map(async (file) => {
    try {
      return { path: file, text: await readTextFile(file) };
    } catch (error) {
      throw cannotRead(file, error);
    }
  }));
}

/**
 * Compiles policy files, in the order given, into one {@link PolicySet}; throws `config_invalid`
 * listing every problem in every file. `origin` names them in the error (the directory read).
 * Tenant `*` exists only if a file defines it (or there are no files: the built-in default). A tenant's `source` is its
 * approval rule: the `approval` line, or the tenant's line when approval is left at its default.
 */
export function parsePolicies(files: readonly PolicyFile[], origin?: string): PolicySet {
  const problems = new ProblemList("policy", origin ?? files.map((f) => f.path).join(", "));
  const tenants = new Map<string, TenantPolicy>();
  const connectors = new Map<string, ConnectorPolicy>();
  const defined = new Map<string, string>();
  const trusted = new Set<string>();
  for (const file of files) {
    const source = parseYamlSource(file.text, file.path, problems);
    if (source) new PolicyReader(source, problems, defined).read(tenants, connectors, trusted);
  }
  problems.throwIfAny();
  // Files that list tenants but no "*" are an allowlist of tenants: others get unknown_tenant.
  // With no files at all, the built-in default ("*") applies.
  if (files.length === 0 && !tenants.has("*")) {
    tenants.set("*", defaultTenant({ file: BUILT_IN, line: 0, text: "approval [destructive]" }));
  }
  const policies: PolicySet = { tenants, connectors, files: files.map((f) => f.path) };
  if (trusted.has("*")) policies.trustedAnnotations = "*";
  else if (trusted.size > 0) policies.trustedAnnotations = trusted;
  return policies;
}

/** Parses a `*.test.yaml` file of `policy test` cases; throws `config_invalid` listing every problem. */
export function parsePolicyTests(text: string, path: string): PolicyTestCase[] {
  const problems = new ProblemList("policy test file", path);
  const source = parseYamlSource(text, path, problems);
  if (source === undefined) throw problems.error();
  const reader = new PolicyReader(source, problems, new Map());
  const cases = reader.readCases();
  problems.throwIfAny();
  return cases;
}

/**
 * The `policy test` files for a policy path: a directory's `*.test.yaml`/`*.test.yml` files in
 * name order; for one policy file `x.yaml`, its sibling `x.test.yaml` or `x.test.yml`; none for a
 * missing path.
 */
export async function policyTestFiles(
  path: string,
  options: Pick<PolicyFileAccess, "readDir"> = {},
): Promise<string[]> {
  const { readDir = Deno.readDir } = options;
  const listing = await list(path, readDir);
  if (listing === "missing") return [];
  if (listing !== "file") {
    return listing.filter((name) => TEST_FILE.test(name)).map((name) => join(path, name));
  }
  if (TEST_FILE.test(path)) return [path];
  const slash = Math.max(path.lastIndexOf("/"), path.lastIndexOf("\\"));
  const dir = slash < 0 ? "." : path.slice(0, slash) || "/";
  const stem = path.slice(slash + 1).replace(POLICY_FILE, "");
  const siblings = await list(dir, readDir);
  if (!Array.isArray(siblings)) return [];
  const names = new Set([`${stem}.test.yaml`, `${stem}.test.yml`]);
  return siblings.filter((name) => names.has(name)).map((name) =>
    slash < 0 ? name : join(dir, name)
  );
}

/** A directory's file names in name order, `"file"` when `path` is not a directory, or `"missing"`. */
async function list(
  path: string,
  readDir: (path: string) => AsyncIterable<Deno.DirEntry>,
): Promise<string[] | "file" | "missing"> {
  const names: string[] = [];
  try {
    for await (const entry of readDir(path)) {
      // Dotfiles are editor leftovers (`.#default.yaml` locks, swap files), never policy.
      if ((entry.isFile || entry.isSymlink) && !entry.name.startsWith(".")) names.push(entry.name);
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "missing";
    if (error instanceof Deno.errors.NotADirectory) return "file";
    throw cannotRead(path, error);
  }
  return names.sort();
}

function join(dir: string, name: string): string {
  return dir.endsWith("/") || dir.endsWith("\\") ? dir + name : `${dir}/${name}`;
}

function cannotRead(path: string, error: unknown): GatewayError {
  const message = `Cannot read policy "${path}": ${
    error instanceof Error ? error.message : String(error)
  }; check MCP_POLICY_PATH`;
  return new GatewayError("config_invalid", message, { path, problems: [message] });
}

/** Validates and compiles one parsed file, reporting each problem where it was written. */
class PolicyReader {
  readonly #source: YamlSource;
  readonly #problems: ProblemList;
  /** `file:line` of every tenant and connector defined so far, across files. */
  readonly #defined: Map<string, string>;

  constructor(source: YamlSource, problems: ProblemList, defined: Map<string, string>) {
    this.#source = source;
    this.#problems = problems;
    this.#defined = defined;
  }

  read(
    tenants: Map<string, TenantPolicy>,
    connectors: Map<string, ConnectorPolicy>,
    trusted: Set<string>,
  ): void {
    const { root } = this.#source;
    if (root === null || root === undefined) return;
    if (!isMapping(root)) {
      this.#problem(
        [],
        `must be a mapping with tenants and/or connectors, received ${describe(root)}`,
      );
      return;
    }
    this.#knownKeys(root, [], ROOT_KEYS);
    for (const [name, raw] of this.#entries(root.tenants, ["tenants"], "tenant names to rules")) {
      const at = ["tenants", name];
      if (this.#firstDefinition("tenant", name, at)) {
        const tenant = this.#tenant(name, raw, at);
        if (tenant) tenants.set(name, tenant);
      }
    }
    for (
      const [server, raw] of this.#entries(
        root.connectors,
        ["connectors"],
        "server ids to connector rules",
      )
    ) {
      const at = ["connectors", server];
      if (this.#firstDefinition("connector", server, at)) {
        const connector = this.#connector(server, raw, at);
        if (connector) connectors.set(server, connector);
      }
    }
    if (Object.hasOwn(root, "trusted_annotations")) {
      for (const server of this.#trustedAnnotations(root.trusted_annotations)) trusted.add(server);
    }
  }

  /** `trusted_annotations`: server ids (or `"*"`) whose readOnlyHint may make a tool read. */
  #trustedAnnotations(raw: unknown): string[] {
    const at: YamlPath = ["trusted_annotations"];
    if (raw === "*") return ["*"];
    if (!Array.isArray(raw)) {
      this.#problem(
        at,
        `must be a list of server ids whose readOnlyHint counts, like [fs], or "*", received ${
          describe(raw)
        }`,
      );
      return [];
    }
    return raw.filter((server: unknown, index) => {
      if (typeof server === "string" && (server === "*" || SERVER_ID.test(server))) return true;
      this.#problem(
        [...at, index],
        `must be a server id from the fleet file (lowercase letters, digits, _ and -), received ${
          describe(server)
        }`,
      );
      return false;
    }) as string[];
  }

  readCases(): PolicyTestCase[] {
    const { root } = this.#source;
    if (root === null || root === undefined) return [];
    if (!isMapping(root)) {
      this.#problem([], `must be a mapping with a cases list, received ${describe(root)}`);
      return [];
    }
    this.#knownKeys(root, [], ["cases"]);
    if (!Object.hasOwn(root, "cases")) {
      this.#problem(["cases"], "is required: list the test cases under it");
      return [];
    }
    if (!Array.isArray(root.cases)) {
      this.#problem(["cases"], `must be a list of test cases, received ${describe(root.cases)}`);
      return [];
    }
    const cases: PolicyTestCase[] = [];
    const names = new Map<string, number>();
    root.cases.forEach((raw: unknown, index) => {
      const at = ["cases", index];
      const testCase = this.#case(raw, at);
      if (!testCase) return;
      const first = names.get(testCase.name);
      if (first !== undefined) {
        this.#problem(
          [...at, "name"],
          `"${testCase.name}" is already the name of the case on line ${first}; ` +
            "give each case its own name",
        );
        return;
      }
      names.set(testCase.name, testCase.line);
      cases.push(testCase);
    });
    return cases;
  }

  #tenant(name: string, raw: unknown, at: YamlPath): TenantPolicy | undefined {
    const before = this.#problems.size;
    if (name === "") this.#problem(at, "is an empty tenant name; name the tenant");
    else if (name.includes("*") && name !== "*") {
      this.#problem(
        at,
        'is not a tenant name: tenants are named exactly, and only "*" alone means every other tenant',
      );
    }
    // `acme:` with every rule commented out is a tenant left at the defaults.
    const rules = raw ?? {};
    if (!isMapping(rules)) {
      this.#problem(
        at,
        `must be a mapping of rules (${TENANT_KEYS.join(", ")}), received ${describe(raw)}`,
      );
      return undefined;
    }
    this.#knownKeys(rules, at, TENANT_KEYS);
    const allow = this.#globList(rules.allow, [...at, "allow"], "allow");
    const deny = this.#globList(rules.deny, [...at, "deny"], "deny");
    const effects = this.#effects(rules.effects, [...at, "effects"]);
    const { effects: approval, by: approvalBy } = this.#approval(rules, [...at, "approval"]);
    const resources = this.#itemRules(rules.resources, [...at, "resources"], "resource");
    const prompts = this.#itemRules(rules.prompts, [...at, "prompts"], "prompt");
    const argumentRules = this.#argumentRules(rules.arguments, [...at, "arguments"]);
    const rateLimits = this.#rateLimits(rules.rate_limits, [...at, "rate_limits"]);
    const discovery = rules.discovery;
    if (discovery !== undefined && !DISCOVERY_MODES.includes(discovery as string)) {
      this.#problem(
        [...at, "discovery"],
        `must be one of ${DISCOVERY_MODES.join(", ")}, received ${describe(discovery)}`,
      );
    }
    const alwaysActive = this.#globList(
      rules.always_active,
      [...at, "always_active"],
      "always_active",
    );
    if (this.#problems.size > before || approval === undefined) return undefined;
    const written = Object.hasOwn(rules, "approval");
    const source = this.#ruleSource(
      written ? [...at, "approval"] : at,
      `approval [${[...approval].join(", ")}]${written ? "" : " (default)"}`,
    );
    return {
      tenant: name,
      source,
      allow,
      deny,
      effects,
      approval,
      approvalBy,
      resources,
      prompts,
      arguments: argumentRules,
      rateLimits,
      ...(discovery === undefined ? {} : { discovery: discovery as "legacy" | "search" }),
      alwaysActive,
    };
  }

  #connector(server: string, raw: unknown, at: YamlPath): ConnectorPolicy | undefined {
    const before = this.#problems.size;
    if (!SERVER_ID.test(server)) {
      this.#problem(
        at,
        "is not a server id: use the id from the fleet file (lowercase letters, digits, _ and -, " +
          "starting with a letter or digit)",
      );
    }
    if (!isMapping(raw)) {
      this.#problem(
        at,
        `must be a mapping like { tenants: "*", effects: [read] }, received ${describe(raw)}`,
      );
      return undefined;
    }
    this.#knownKeys(raw, at, CONNECTOR_KEYS);
    const tenants = this.#connectorTenants(raw, server, [...at, "tenants"]);
    let effects: Set<EffectClass> | undefined;
    if (!Object.hasOwn(raw, "effects")) {
      this.#problem(
        [...at, "effects"],
        `is required: list the effect classes allowed through ${server}, e.g. [read, write]`,
      );
    } else {
      effects = this.#effectList(raw.effects, [...at, "effects"], "[read, write]");
      if (effects?.size === 0) {
        this.#problem(
          [...at, "effects"],
          "must not be empty: list the effect classes allowed through it, or remove the connector " +
            "from the fleet",
        );
      }
    }
    if (this.#problems.size > before || tenants === undefined || effects === undefined) {
      return undefined;
    }
    return { server, source: this.#ruleSource(at, `connector ${server}`), tenants, effects };
  }

  #connectorTenants(
    raw: Record<string, unknown>,
    server: string,
    at: YamlPath,
  ): readonly string[] | "*" | undefined {
    const value = raw.tenants;
    if (!Object.hasOwn(raw, "tenants")) {
      this.#problem(at, `is required: list the tenants that may reach ${server}, or write "*"`);
      return undefined;
    }
    if (value === "*") return "*";
    if (!Array.isArray(value)) {
      this.#problem(
        at,
        `must be a list of tenants or "*", received ${describe(value)}` +
          (typeof value === "string" ? `; write [${value}]` : ""),
      );
      return undefined;
    }
    const names = value.filter((tenant: unknown, index) => {
      if (typeof tenant === "string" && tenant !== "") return true;
      this.#problem([...at, index], `must be a tenant name, received ${describe(tenant)}`);
      return false;
    });
    // `["*"]` says the same as `"*"`.
    return names.includes("*") ? "*" : Object.freeze(names);
  }

  #case(raw: unknown, at: YamlPath): PolicyTestCase | undefined {
    const before = this.#problems.size;
    if (!isMapping(raw)) {
      this.#problem(
        at,
        `must be a mapping with name, tenant, tool (or resource, or prompt) and expect, received ${
          describe(raw)
        }`,
      );
      return undefined;
    }
    this.#knownKeys(raw, at, CASE_KEYS);
    const text = (key: string): string | undefined => {
      const value = raw[key];
      if (!Object.hasOwn(raw, key)) return undefined;
      if (typeof value === "string" && value !== "") return value;
      this.#problem([...at, key], `must be a non-empty string, received ${describe(value)}`);
      return undefined;
    };
    for (const key of ["name", "tenant", "expect"]) {
      if (!Object.hasOwn(raw, key)) this.#problem([...at, key], "is required");
    }
    const name = text("name");
    const tenant = text("tenant");
    const targets = CASE_TARGETS.filter((key) => Object.hasOwn(raw, key));
    if (targets.length !== 1) {
      this.#problem(
        at,
        targets.length === 0
          ? "needs what to decide: tool (a call), resource (a read) or prompt (a get)"
          : `decides one thing; give one of ${targets.join(", ")}`,
      );
    }
    const target = targets.length === 1 ? targets[0]! : undefined;
    const targetName = target === undefined ? undefined : text(target);
    if (target !== undefined && target !== "tool") {
      for (const key of ["arguments", "annotations"]) {
        if (Object.hasOwn(raw, key)) {
          this.#problem(
            [...at, key],
            `applies to tool cases only; a ${target} is decided by its name, remove it`,
          );
        }
      }
    }
    const server = text("server");
    const code = text("code");
    const expectText = text("expect");
    let expect: PolicyExpectation | undefined;
    if (expectText !== undefined) {
      expect = EXPECTATIONS.find((e) => e === expectText);
      if (!expect) {
        this.#problem([...at, "expect"], oneOf(EXPECTATIONS, expectText));
      } else if (expect === "allow" && code !== undefined) {
        this.#problem(
          [...at, "code"],
          "only applies when expect is deny or approval_required; remove it",
        );
      } else if (expect === "approval_required" && target !== undefined && target !== "tool") {
        this.#problem(
          [...at, "expect"],
          `a ${target} is allowed or denied, never approval_required (reads need no approval)`,
        );
      }
    }
    if (server !== undefined && !SERVER_ID.test(server)) {
      this.#problem(
        [...at, "server"],
        `must be a server id from the fleet file (lowercase letters, digits, _ and -), received "${server}"`,
      );
    }
    const args = raw.arguments;
    if (args !== undefined && !isMapping(args)) {
      this.#problem(
        [...at, "arguments"],
        `must be a mapping of argument names to values, received ${describe(args)}`,
      );
    }
    const annotations = raw.annotations;
    if (annotations !== undefined) {
      if (!isMapping(annotations)) {
        this.#problem(
          [...at, "annotations"],
          `must be a mapping like { readOnlyHint: true }, received ${describe(annotations)}`,
        );
      } else {
        this.#knownKeys(annotations, [...at, "annotations"], ANNOTATION_KEYS);
        for (const [key, value] of Object.entries(annotations)) {
          const expected = key === "title" ? "string" : "boolean";
          if (ANNOTATION_KEYS.includes(key) && typeof value !== expected) {
            this.#problem(
              [...at, "annotations", key],
              `must be ${expected === "string" ? "a string" : "true or false"}, received ${
                describe(value)
              }`,
            );
          }
        }
      }
    }
    if (
      this.#problems.size > before || name === undefined || tenant === undefined ||
      target === undefined || targetName === undefined || expect === undefined
    ) {
      return undefined;
    }
    return {
      name,
      tenant,
      [target]: targetName,
      ...(isMapping(args) ? { arguments: args } : {}),
      ...(isMapping(annotations) ? { annotations } : {}),
      ...(server === undefined ? {} : { server }),
      expect,
      ...(code === undefined ? {} : { code }),
      file: this.#source.path,
      line: this.#source.lineOf(at),
    };
  }

  #globList(value: unknown, at: YamlPath, verb: "allow" | "deny" | "always_active"): GlobRule[] {
    if (value === undefined) return [];
    if (!Array.isArray(value)) {
      this.#problem(
        at,
        `must be a list of tool-name globs, e.g. ["github__*"], received ${describe(value)}`,
      );
      return [];
    }
    return value.flatMap((item: unknown, index) => {
      const glob = this.#glob(item, [...at, index], false);
      return glob === undefined
        ? []
        : [this.#globRule(glob, [...at, index], `${verb} ${JSON.stringify(glob)}`)];
    });
  }

  #effects(value: unknown, at: YamlPath): EffectRule[] {
    return this.#entries(value, at, "tool-name globs to effect classes").flatMap(([glob, raw]) => {
      const where = [...at, glob];
      const valid = this.#glob(glob, where, true);
      const effect = this.#effectClass(raw, where);
      if (valid === undefined || effect === undefined) return [];
      return [{ ...this.#globRule(glob, where, `effect ${glob} = ${effect}`), effect }];
    });
  }

  #argumentRules(value: unknown, at: YamlPath): ArgumentRule[] {
    const rules: ArgumentRule[] = [];
    for (const [glob, args] of this.#entries(value, at, "tool-name globs to argument rules")) {
      const where = [...at, glob];
      const before = this.#problems.size;
      this.#glob(glob, where, true);
      if (!isMapping(args)) {
        this.#problem(
          where,
          `must map argument names to constraints, e.g. path: { pattern: "^/data/" }, received ${
            describe(args)
          }`,
        );
        continue;
      }
      if (Object.keys(args).length === 0) {
        this.#problem(where, "constrains no arguments; add one or remove the entry");
      }
      const properties: Record<string, unknown> = {};
      for (const [arg, constraints] of Object.entries(args)) {
        if (arg === "") this.#problem([...where, arg], "is an empty argument name");
        const schema = this.#constraints(constraints, [...where, arg]);
        if (schema) properties[arg] = schema;
      }
      if (this.#problems.size > before) continue;
      rules.push({
        ...this.#globRule(glob, where, `arguments ${glob} (${Object.keys(args).join(", ")})`),
        schema: { type: "object", properties },
      });
    }
    return rules;
  }

  /** One argument's JSON Schema constraints, checked so the validator never meets a bad schema. */
  #constraints(value: unknown, at: YamlPath): Record<string, unknown> | undefined {
    const before = this.#problems.size;
    if (!isMapping(value)) {
      this.#problem(
        at,
        `must be a mapping of JSON Schema constraints, e.g. { maximum: 50 }, received ${
          describe(value)
        }`,
      );
      return undefined;
    }
    if (Object.keys(value).length === 0) {
      this.#problem(
        at,
        `has no constraints; add one of ${CONSTRAINT_KEYWORDS.join(", ")}, or remove it`,
      );
    }
    this.#knownKeys(value, at, CONSTRAINT_KEYWORDS);
    const schema: Record<string, unknown> = {};
    for (const [keyword, raw] of Object.entries(value)) {
      const where = [...at, keyword];
      if (keyword === "pattern") {
        if (typeof raw !== "string") {
          this.#problem(where, `must be a regular expression string, received ${describe(raw)}`);
          continue;
        }
        try {
          // As the validator will run it: JavaScript syntax and meaning, matched by RE2.
          new RegExp(raw, "u");
          linearPattern(raw);
        } catch (error) {
          this.#problem(
            where,
            error instanceof LinearPatternError
              ? `cannot be matched in linear time: ${error.reason}; ${LINEAR_PATTERN_FIX}`
              : `is not a valid regular expression (JavaScript, u flag): ${
                (error as Error).message
              }`,
          );
          continue;
        }
      } else if (keyword === "enum") {
        if (!Array.isArray(raw)) {
          this.#problem(
            where,
            `must be a list of allowed values, e.g. [open, closed], received ${describe(raw)}`,
          );
          continue;
        }
        if (raw.length === 0) {
          this.#problem(where, "must not be empty: list the allowed values, e.g. [open, closed]");
          continue;
        }
        raw.forEach((item: unknown, index) => {
          if (!isScalar(item)) {
            this.#problem(
              [...where, index],
              `must be a string, number, true, false or null, received ${describe(item)}`,
            );
          }
        });
      } else if (keyword === "const") {
        if (!isScalar(raw)) {
          this.#problem(
            where,
            `must be a string, number, true, false or null, received ${describe(raw)}`,
          );
        }
      } else if (NUMBER_KEYWORDS.includes(keyword)) {
        if (typeof raw !== "number" || !Number.isFinite(raw)) {
          this.#problem(where, `must be a number, received ${describe(raw)}`);
        }
      } else if (COUNT_KEYWORDS.includes(keyword)) {
        if (typeof raw !== "number" || !Number.isInteger(raw) || raw < 0) {
          this.#problem(where, `must be a whole number of at least 0, received ${describe(raw)}`);
        }
      } else if (keyword === "format") {
        if (typeof raw !== "string" || !FORMATS.includes(raw)) {
          const close = typeof raw === "string" ? suggest(raw, FORMATS) : undefined;
          this.#problem(
            where,
            `is not a known format, received ${describe(raw)}; ` +
              (close ? `did you mean "${close}"?` : `known formats are ${FORMATS.join(", ")}`),
          );
        }
      } else if (keyword === "items") {
        this.#constraints(raw, where);
      } else {
        continue; // Unknown: reported above.
      }
      schema[keyword] = raw;
    }
    for (const [low, high] of RANGES) this.#range(value, at, low, high);
    return this.#problems.size > before ? undefined : schema;
  }

  /** A lower bound above its upper bound lets nothing through, which is never what was meant. */
  #range(value: Record<string, unknown>, at: YamlPath, low: string, high: string): void {
    const min = value[low];
    const max = value[high];
    if (typeof min === "number" && typeof max === "number" && min > max) {
      this.#problem(
        [...at, low],
        `(${min}) is greater than ${high} (${max}), so no value could pass; fix one of them`,
      );
    }
  }

  /** `rate_limits:` of a tenant (tool-name globs) or of its `resources:` / `prompts:`. */
  #rateLimits(value: unknown, at: YamlPath, kind: RuleKind = "tool"): RateLimitRule[] {
    const rules: RateLimitRule[] = [];
    const keys = kind === "resource" ? "resource URI globs" : `${kind}-name globs`;
    for (const [glob, raw] of this.#entries(value, at, `${keys} to rate limits`)) {
      const where = [...at, glob];
      const before = this.#problems.size;
      if (kind === "resource") this.#uriGlob(glob, where);
      else this.#glob(glob, where, true);
      if (!isMapping(raw)) {
        this.#problem(
          where,
          `must be a mapping like { per_minute: 60, burst: 10 }, received ${describe(raw)}`,
        );
        continue;
      }
      this.#knownKeys(raw, where, RATE_KEYS);
      if (!Object.hasOwn(raw, "per_minute")) {
        this.#problem([...where, "per_minute"], "is required, e.g. per_minute: 60");
      }
      const perMinute = this.#positiveInteger(raw.per_minute, [...where, "per_minute"]);
      const burst = this.#positiveInteger(raw.burst, [...where, "burst"]) ?? perMinute;
      if (this.#problems.size > before || perMinute === undefined || burst === undefined) {
        continue;
      }
      const text = `${kind === "tool" ? "" : `${kind}s `}rate_limit ${glob} ${perMinute}/min ` +
        `burst ${burst}`;
      rules.push({
        ...this.#globRule(glob, where, text),
        perMinute,
        burst,
      });
    }
    return rules;
  }

  #positiveInteger(value: unknown, at: YamlPath): number | undefined {
    if (value === undefined) return undefined;
    if (typeof value === "number" && Number.isInteger(value) && value > 0) return value;
    this.#problem(at, `must be a whole number of at least 1, received ${describe(value)}`);
    return undefined;
  }

  /** A glob, or undefined (reported) when it could never match a tool name. */
  #glob(value: unknown, at: YamlPath, isKey: boolean): string | undefined {
    if (typeof value !== "string") {
      this.#problem(
        at,
        `must be a tool-name glob, received ${describe(value)}` +
          (typeof value === "number" || typeof value === "boolean" ? `; quote it: "${value}"` : ""),
      );
      return undefined;
    }
    if (value === "") {
      this.#problem(at, 'must not be empty; write a tool-name glob such as "github__*"');
      return undefined;
    }
    if (!GLOB_PATTERN.test(value)) {
      const bad = [...new Set(value.replace(/[A-Za-z0-9_.\-*?]/g, ""))].map((c) =>
        JSON.stringify(c)
      );
      this.#problem(
        at,
        `${isKey ? "" : `${JSON.stringify(value)} `}is not a valid tool-name glob: it contains ` +
          `${bad.join(", ")}; tool names use letters, digits, _ . and -, with * and ? as wildcards`,
      );
      return undefined;
    }
    return value;
  }

  /**
   * `approval:` as a list of effect classes (who approves: operator), one approver
   * (`operator` | `in_band`, effect classes left at [destructive]) or `{ effects, by }`.
   */
  #approval(
    rules: Record<string, unknown>,
    at: YamlPath,
  ): { effects: Set<EffectClass> | undefined; by: ApprovalBy } {
    const fallback = () => new Set<EffectClass>(["destructive"]);
    if (!Object.hasOwn(rules, "approval")) return { effects: fallback(), by: "operator" };
    const value = rules.approval;
    const example = "[destructive], or [] for none";
    if (Array.isArray(value)) {
      return { effects: this.#effectList(value, at, example), by: "operator" };
    }
    if (typeof value === "string" && APPROVERS.includes(value as ApprovalBy)) {
      return { effects: fallback(), by: value as ApprovalBy };
    }
    if (typeof value === "string") {
      this.#problem(
        at,
        `must be a list of effect classes (read, write, destructive), e.g. ${example}, or who ` +
          `approves (${APPROVERS.join(" or ")}), received ${describe(value)}` +
          (EFFECT_CLASSES.includes(value as EffectClass) ? `; write [${value}]` : ""),
      );
      return { effects: undefined, by: "operator" };
    }
    if (!isMapping(value)) {
      this.#problem(
        at,
        `must be a list of effect classes (e.g. ${example}), an approver (${
          APPROVERS.join(" or ")
        }) or { effects: [destructive], by: operator }, received ${describe(value)}`,
      );
      return { effects: undefined, by: "operator" };
    }
    this.#knownKeys(value, at, APPROVAL_KEYS);
    const effects = Object.hasOwn(value, "effects")
      ? this.#effectList(value.effects, [...at, "effects"], example)
      : fallback();
    const by = value.by === undefined ? "operator" : this.#approver(value.by, [...at, "by"]);
    return { effects, by: by ?? "operator" };
  }

  #approver(value: unknown, at: YamlPath): ApprovalBy | undefined {
    if (APPROVERS.includes(value as ApprovalBy)) return value as ApprovalBy;
    this.#problem(
      at,
      `must name who approves: operator (the approvals API, the default) or in_band (the ` +
        `calling client's user, through elicitation), received ${describe(value)}`,
    );
    return undefined;
  }

  /** `resources:` / `prompts:` as a list (an allowlist) or `{ allow, deny, rate_limits }`. */
  #itemRules(value: unknown, at: YamlPath, kind: "resource" | "prompt"): ItemRules {
    if (value === undefined || value === null) return noItemRules();
    if (Array.isArray(value)) {
      return { ...noItemRules(), allow: this.#itemGlobs(value, at, kind, "allow") };
    }
    if (!isMapping(value)) {
      this.#problem(
        at,
        `must be a list of ${kind} globs (an allowlist) or { allow: [...], deny: [...], ` +
          `rate_limits: {...} }, received ${describe(value)}`,
      );
      return noItemRules();
    }
    this.#knownKeys(value, at, ITEM_KEYS);
    return {
      allow: this.#itemGlobs(value.allow, [...at, "allow"], kind, "allow"),
      deny: this.#itemGlobs(value.deny, [...at, "deny"], kind, "deny"),
      rateLimits: this.#rateLimits(value.rate_limits, [...at, "rate_limits"], kind),
    };
  }

  #itemGlobs(
    value: unknown,
    at: YamlPath,
    kind: "resource" | "prompt",
    verb: "allow" | "deny",
  ): GlobRule[] {
    if (value === undefined || value === null) return [];
    const example = kind === "resource" ? '["proxy://memory/*"]' : '["memory__*"]';
    if (!Array.isArray(value)) {
      this.#problem(
        at,
        `must be a list of ${kind} globs, e.g. ${example}, received ${describe(value)}`,
      );
      return [];
    }
    return value.flatMap((item: unknown, index) => {
      const where = [...at, index];
      if (kind === "prompt") {
        const glob = this.#glob(item, where, false);
        return glob === undefined
          ? []
          : [this.#globRule(glob, where, `prompts ${verb} ${JSON.stringify(glob)}`)];
      }
      const glob = this.#uriGlob(item, where);
      return glob === undefined
        ? []
        : [this.#globRule(glob, where, `resources ${verb} ${JSON.stringify(glob)}`)];
    });
  }

  /** A resource URI glob, or undefined (reported) when it is not one. */
  #uriGlob(item: unknown, at: YamlPath): string | undefined {
    if (typeof item !== "string" || item === "") {
      this.#problem(
        at,
        `must be a resource URI glob such as "proxy://memory/*", received ${describe(item)}`,
      );
      return undefined;
    }
    if (item.length > MAX_GLOB_CHARS || !URI_GLOB_PATTERN.test(item)) {
      this.#problem(
        at,
        `${JSON.stringify(item.slice(0, 80))} is not a valid resource URI glob: use at most ` +
          `${MAX_GLOB_CHARS} visible characters (no spaces), with * and ? as wildcards`,
      );
      return undefined;
    }
    return item;
  }

  #globRule(glob: string, at: YamlPath, text: string): GlobRule {
    return { glob, match: compileGlob(glob), source: this.#ruleSource(at, text) };
  }

  #effectList(value: unknown, at: YamlPath, example: string): Set<EffectClass> | undefined {
    if (!Array.isArray(value)) {
      this.#problem(
        at,
        `must be a list of effect classes (read, write, destructive), e.g. ${example}, received ${
          describe(value)
        }`,
      );
      return undefined;
    }
    const classes = value.map((item: unknown, index) => this.#effectClass(item, [...at, index]));
    if (classes.includes(undefined)) return undefined;
    // Kept in strictness order, so `approval [write, destructive]` reads the same however written.
    return new Set(EFFECT_CLASSES.filter((c) => classes.includes(c)));
  }

  #effectClass(value: unknown, at: YamlPath): EffectClass | undefined {
    const effect = EFFECT_CLASSES.find((c) => c === value);
    if (effect === undefined) this.#problem(at, oneOf(EFFECT_CLASSES, value));
    return effect;
  }

  /** The entries of a mapping section; an empty section (all commented out) has none. */
  #entries(value: unknown, at: YamlPath, what: string): [string, unknown][] {
    if (value === undefined || value === null) return [];
    if (!isMapping(value)) {
      this.#problem(at, `must be a mapping of ${what}, received ${describe(value)}`);
      return [];
    }
    return Object.entries(value);
  }

  /**
   * True the first time a tenant or connector is defined; otherwise reports where it already was,
   * since silently letting one file override another would make the policy depend on file order.
   */
  #firstDefinition(kind: "tenant" | "connector", name: string, at: YamlPath): boolean {
    const here = `${this.#source.path}:${this.#source.lineOf(at)}`;
    const first = this.#defined.get(`${kind} ${name}`);
    if (first === undefined) {
      this.#defined.set(`${kind} ${name}`, here);
      return true;
    }
    this.#problem(
      at,
      `is already defined at ${first}; define each ${kind} once, merging the two definitions`,
    );
    return false;
  }

  #knownKeys(value: Record<string, unknown>, at: YamlPath, known: readonly string[]): void {
    for (const key of Object.keys(value)) {
      if (!known.includes(key)) this.#problems.unknownKey(this.#source, [...at, key], known);
    }
  }

  #ruleSource(at: YamlPath, text: string): RuleSource {
    return { file: this.#source.path, line: this.#source.lineOf(at), text };
  }

  #problem(at: YamlPath, message: string): void {
    this.#problems.add(this.#source, at, message);
  }
}

/** "must be a, b or c, received x", with the one that was probably meant. */
function oneOf(allowed: readonly string[], value: unknown): string {
  const close = typeof value === "string" ? suggest(value, allowed) : undefined;
  const choices = `${allowed.slice(0, -1).join(", ")} or ${allowed[allowed.length - 1]}`;
  return `must be ${choices}, received ${describe(value)}${
    close ? `; did you mean "${close}"?` : ""
  }`;
}

function isScalar(value: unknown): boolean {
  return value === null || ["string", "number", "boolean"].includes(typeof value);
}
