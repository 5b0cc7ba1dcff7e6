/**
 * The compiled governance policy: what policy files become once validated. Globs are already
 * matcher functions and every rule remembers where it came from, so a decision can name the rule.
 * @module
 */
import type { EffectClass } from "../bus/events.ts";
import type { GlobMatcher } from "../support/glob.ts";

/** How much a call can change: the seed's effect classes, least to most. */
export type { EffectClass } from "../bus/events.ts";

/** Effect classes in order of strictness. */
export const EFFECT_CLASSES: readonly EffectClass[] = ["read", "write", "destructive"];

/** The stricter of two effect classes. */
export function stricter(a: EffectClass, b: EffectClass): EffectClass {
  return EFFECT_CLASSES.indexOf(a) >= EFFECT_CLASSES.indexOf(b) ? a : b;
}

/** Where a rule was written: for `policy explain` and audit lines. */
export interface RuleSource {
  /** Policy file path as given. */
  file: string;
  /** 1-based line of the rule. */
  line: number;
  /** The rule in words, e.g. `deny "github__delete_*"`. */
  text: string;
}

/** A tool-name glob, compiled, with its source. */
export interface GlobRule {
  glob: string;
  match: GlobMatcher;
  source: RuleSource;
}

/** An effect-class override for tools matching a glob. */
export interface EffectRule extends GlobRule {
  effect: EffectClass;
}

/** Argument constraints for tools matching a glob: a JSON Schema that tightens the tool's own. */
export interface ArgumentRule extends GlobRule {
  /** `{ type: "object", properties: { <arg>: <constraints> } }`, validated alongside inputSchema. */
  schema: Record<string, unknown>;
}

/**
 * A rate limit for what matches a glob: for tools one bucket per tenant and tool; for resources
 * and prompts one per tenant and rule (a client picks URIs and names freely).
 */
export interface RateLimitRule extends GlobRule {
  perMinute: number;
  /** Calls allowed at once before the rate applies; default `perMinute`. */
  burst: number;
}

/** Allow and deny globs over resource URIs or prompt names (the names a client uses). */
export interface ItemRules {
  allow: GlobRule[];
  deny: GlobRule[];
  /** Uses (read, subscribe, get, complete) per minute of all items a rule's glob matches. */
  rateLimits: RateLimitRule[];
}

/** Who may approve a tenant's calls: an operator through the approvals API, or the caller in-band. */
export type ApprovalBy = "operator" | "in_band";

/** One tenant's policy (tenant `*` applies to every tenant not listed). */
export interface TenantPolicy {
  tenant: string;
  source: RuleSource;
  allow: GlobRule[];
  deny: GlobRule[];
  /** First matching rule wins, in file order. */
  effects: EffectRule[];
  /** Effect classes that need an approval token; default `destructive` only. */
  approval: ReadonlySet<EffectClass>;
  /**
   * Who approves over HTTP: `operator` (default) or `in_band` (the calling client's user,
   * through elicitation). Stdio sessions approve in-band whatever this says.
   */
  approvalBy: ApprovalBy;
  /** Resources (by the URI a client reads) this tenant may list and read. */
  resources: ItemRules;
  /** Prompts (by the name a client gets) this tenant may list and get. */
  prompts: ItemRules;
  /** Every matching rule applies. */
  arguments: ArgumentRule[];
  /** Every matching rule applies. */
  rateLimits: RateLimitRule[];
  /** How this tenant's sessions discover tools; the gateway default when absent. */
  discovery?: "legacy" | "search";
  /** In search mode, tools active in every session of this tenant without tool_activate. */
  alwaysActive: GlobRule[];
}

/** The connector boundary for one upstream server (destination). */
export interface ConnectorPolicy {
  server: string;
  source: RuleSource;
  /** Tenants that may reach it; `"*"` for all. */
  tenants: readonly string[] | "*";
  /** Effect classes allowed through it. */
  effects: ReadonlySet<EffectClass>;
}

/** Everything loaded from the policy files. */
export interface PolicySet {
  /** Per tenant; `*` is the fallback for tenants not listed. */
  tenants: ReadonlyMap<string, TenantPolicy>;
  /** Per upstream server id. */
  connectors: ReadonlyMap<string, ConnectorPolicy>;
  /** The files it came from (empty for the built-in default). */
  files: readonly string[];
  /**
   * Upstream server ids whose `readOnlyHint` may lower a tool's effect class to read (`"*"`: every
   * upstream's). Absent, none's: an annotation is the upstream's own claim, and a hostile upstream
   * marks a writing tool read-only to pass an approval or connector rule.
   */
  trustedAnnotations?: ReadonlySet<string> | "*";
}
