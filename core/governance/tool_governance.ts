/**
 * ToolGovernance: the one gate every tool call passes, inbound and outbound.
 *
 * `check` returns a verdict and never throws: allow, deny with a stable code, or
 * approval_required with the request to approve. The order of the checks is {@link precedence}.
 * @module
 */
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import type { Clock } from "../support/clock.ts";
import { GatewayError } from "../support/errors.ts";
import { nestedDeeperThan } from "../support/json_size.ts";
import { redact } from "../support/redact.ts";
import { compileSchema } from "./schema_validator.ts";
import type { ApprovalQueue } from "./approval_queue.ts";
import { type ApprovalTokens, type Redemption, replayed } from "./approval_tokens.ts";
import type { AuditLog } from "./audit_log.ts";
import { argumentsHash, canonicalJson, sha256HexSync } from "./canonical_json.ts";
import {
  type EffectClass,
  type GlobRule,
  type PolicySet,
  type RateLimitRule,
  stricter,
  type TenantPolicy,
} from "./policy.ts";
import { rateLimitKey, type RateLimits } from "./rate_limiter.ts";

/** A rate limit that refused a call, and when its bucket has a token again. */
type Limited = { rule: GlobRule; retryAfterMs: number };

/** Who is calling: an inbound client's token payload, or an agent's run context. */
export interface CallContext {
  tenant: string;
  /** Who is calling, by name: shown in audit lines and approvals, never compared. */
  subject: string;
  /**
   * Who is calling, as callers are compared (TokenPayload.principal): an approval request is
   * filed under it. Without one, the request is no one's to fetch.
   */
  principal?: string;
  scopes?: readonly string[];
  /** The agent making an outbound call, when there is one. */
  agent?: string;
}

/** The tool being called, as the caller named it. */
export interface ToolTarget {
  /** The name the caller used (`<server>__<tool>` for proxied tools). */
  name: string;
  /** The upstream server id of a proxied tool: its connector boundary applies. */
  server?: string;
  /** The descriptor, for annotations and inputSchema (absent when unknown, e.g. a hidden tool). */
  descriptor?: Pick<Tool, "inputSchema" | "annotations">;
  /** Why the scanner escalated this tool (its finding): its calls are governed as destructive. */
  escalation?: string;
}

/** A resource or prompt being listed or used: its tenant globs and connector boundary apply. */
export interface ItemTarget {
  kind: "resource" | "prompt";
  /** The URI (resources) or name (prompts) the caller uses. */
  name: string;
  /** The upstream server id of a proxied item: its connector boundary applies. */
  server?: string;
}

/** Every code a denial carries. Stable: clients and tests match on them. */
export type DenyCode =
  | "unknown_tenant"
  | "tool_denied"
  | "not_allowed"
  | "connector_denied"
  | "effect_not_allowed"
  | "invalid_arguments"
  | "rate_limited"
  | "approval_invalid"
  | "approval_expired"
  | "approval_replayed"
  | "approval_mismatch"
  | "approval_denied"
  | "approval_queue_full"
  | "policy_error";

/** What an approval request shows the approver (never the raw arguments). */
export interface ApprovalSummary {
  id: string;
  tool: string;
  tenant: string;
  effect: EffectClass;
  argumentsHash: string;
  expiresAt: number;
}

/** The decision on one call. */
export type Verdict =
  | {
    action: "allow";
    effect: EffectClass;
    rule: string;
    /** With {@link CheckOptions.deferRedeem}: the token to redeem when the call is sent. */
    redemption?: Redemption;
  }
  | {
    action: "deny";
    code: DenyCode;
    reason: string;
    effect?: EffectClass;
    rule?: string;
    retryAfterMs?: number;
  }
  | {
    action: "approval_required";
    effect: EffectClass;
    reason: string;
    rule: string;
    request: ApprovalSummary;
  };

/** The `_meta` key under which a retried call carries its approval token. */
export const APPROVAL_TOKEN_META_KEY = "agent33/approval_token";

/** The facts the precedence decides on, gathered from the policy for one call. */
export interface Facts {
  /** The tenant has a policy (its own or `*`). */
  tenantKnown: boolean;
  /** The destination's connector boundary: whether this tenant may reach it. */
  connectorTenant: "allowed" | "denied" | "none";
  /** The destination's connector boundary: whether this effect class may pass. */
  connectorEffect: "allowed" | "denied" | "none";
  /** A deny glob matches. */
  denied: boolean;
  /** The tenant has at least one allow glob (allowlist semantics). */
  hasAllowList: boolean;
  /** An allow glob matches. */
  allowed: boolean;
  /** The arguments fail the tool's schema or the policy's tightenings. */
  invalidArguments: boolean;
  /** A rate limit is exhausted. */
  rateLimited: boolean;
  /** The effect class needs approval. */
  requiresApproval: boolean;
  /** The approval token: none, valid, or refused with a code. */
  token: "none" | "valid" | "invalid";
}

/** The outcome of {@link precedence}. */
export type Decision =
  | { action: "allow" }
  | { action: "deny"; code: DenyCode | "token" }
  | { action: "approval_required" };

/**
 * The precedence of governance rules, in order: deny > require > allow > default.
 *
 * 1. Deny: an unknown tenant, the connector boundary (tenant, then effect class), a deny glob.
 * 2. Allowlist default: once a tenant has any allow glob, a tool matching none is denied.
 * 3. The call must be within its rate, then well-formed: rate limits (which count invalid
 *    calls too), then invalid arguments.
 * 4. Require: an effect class that needs approval needs a valid token, even for allowed tools;
 *    a refused token is a denial with the token's own code.
 * 5. Allow: an allow glob matched, or no allowlist exists (the default).
 */
export function precedence(f: Facts): Decision {
  if (!f.tenantKnown) return { action: "deny", code: "unknown_tenant" };
  if (f.connectorTenant === "denied") return { action: "deny", code: "connector_denied" };
  if (f.connectorEffect === "denied") return { action: "deny", code: "effect_not_allowed" };
  if (f.denied) return { action: "deny", code: "tool_denied" };
  if (f.hasAllowList && !f.allowed) return { action: "deny", code: "not_allowed" };
  if (f.rateLimited) return { action: "deny", code: "rate_limited" };
  if (f.invalidArguments) return { action: "deny", code: "invalid_arguments" };
  if (f.requiresApproval) {
    if (f.token === "invalid") return { action: "deny", code: "token" };
    if (f.token === "none") return { action: "approval_required" };
  }
  return { action: "allow" };
}

/**
 * The upstream whose `readOnlyHint` must not count for `server`'s tools: `server` itself unless
 * the policies' `trusted_annotations` name it; none for the gateway's own tools (no server).
 */
export function untrustedHints(
  policies: PolicySet,
  server: string | undefined,
): string | undefined {
  if (server === undefined) return undefined;
  const trusted = policies.trustedAnnotations;
  return trusted === "*" || trusted?.has(server) ? undefined : server;
}

/**
 * A tool as its effect class is judged. `server` must be stated (undefined only for the
 * gateway's own tools): it decides whether the tool's readOnlyHint counts.
 */
export interface EffectSubject {
  name: string;
  annotations: Tool["annotations"] | undefined;
  server: string | undefined;
  /** Why the scanner escalated the tool, if it did. */
  escalation?: string;
}

/**
 * The effect class of a call: a scanner escalation (destructive), else a policy override, else
 * the tool's annotations, else `write`. A `readOnlyHint` counts only from the gateway's own tools
 * and from upstreams the policies list under `trusted_annotations` ({@link untrustedHints}).
 */
export function effectClassOf(
  tool: EffectSubject,
  policies: PolicySet,
  policy: TenantPolicy | undefined,
): { effect: EffectClass; rule: string } {
  const { name, annotations, escalation } = tool;
  const untrusted = untrustedHints(policies, tool.server);
  // The scanner found something in the tool's definition: nothing may make it look harmless.
  if (escalation !== undefined) {
    return { effect: "destructive", rule: `scanner escalation: ${escalation}` };
  }
  // Annotations are hints from the tool's author: they may make a call stricter than the
  // policy says, never looser. An absent hint is no hint, and an upstream's readOnlyHint is no
  // hint unless the operator trusts that upstream's annotations: it is the one hint that loosens.
  const readOnly = annotations?.readOnlyHint === true;
  const hint: EffectClass | undefined = annotations?.destructiveHint === true
    ? "destructive"
    : readOnly && untrusted === undefined
    ? "read"
    : undefined;
  const override = policy?.effects.find((r) => r.match(name));
  if (override) {
    const effect = hint ? stricter(override.effect, hint) : override.effect;
    return {
      effect,
      rule: effect === override.effect
        ? ruleText(override)
        : `annotation ${hint}Hint (stricter than ${ruleText(override)})`,
    };
  }
  if (hint) {
    return {
      effect: hint,
      rule: `annotation ${hint === "read" ? "readOnlyHint" : "destructiveHint"}`,
    };
  }
  if (readOnly) {
    return {
      effect: "write",
      rule: `default effect class write (the readOnlyHint of ${untrusted} is not trusted: list ` +
        `${untrusted} under trusted_annotations, or give the tool an effects override)`,
    };
  }
  return { effect: "write", rule: "default effect class write (no annotation, no override)" };
}

/** The tool a target names, as its effect class is judged. */
export function subjectOf(target: ToolTarget): EffectSubject {
  return {
    name: target.name,
    annotations: target.descriptor?.annotations,
    server: target.server,
    ...(target.escalation === undefined ? {} : { escalation: target.escalation }),
  };
}

/**
 * How deep a call's arguments may nest (objects and arrays): far past any real tool's, well short
 * of what overflows the recursive steps of a check (5,000 levels did).
 */
export const MAX_ARGUMENT_DEPTH = 512;

/** What the audit records, and the approval hash covers, for arguments nested past the limit. */
const TOO_DEEP = { "(arguments)": `nested more than ${MAX_ARGUMENT_DEPTH} levels; not recorded` };
/** What a rate-limited call records in place of its arguments, which were not read. */
const NOT_READ = { "(arguments)": "not read: the call was over its rate limit" };
const NOT_READ_HASH = sha256HexSync(canonicalJson(NOT_READ));

/** What the gate is built from. */
export interface ToolGovernanceOptions {
  policies: PolicySet;
  tokens: ApprovalTokens;
  approvals: ApprovalQueue;
  /** This process's buckets, or (cluster mode) the replicas' shared ones. */
  rateLimiter: RateLimits;
  audit: AuditLog;
  clock: Clock;
  /** Most work checking one call's arguments may take (default MAX_SCHEMA_WORK, schema_cost.ts). */
  maxSchemaWork?: number;
  /** Validation code one upstream's schemas may compile, ever (default MAX_CODE_PER_UPSTREAM). */
  maxSchemaCodePerUpstream?: number;
}

/** Options of one check. */
export interface CheckOptions {
  /** A token from the call's `_meta` (key {@link APPROVAL_TOKEN_META_KEY}). */
  approvalToken?: string;
  /** Decide without side effects: no rate-limit use, no approval request, no audit (`policy explain`). */
  dryRun?: boolean;
  /**
   * Leave a valid token unredeemed: the allow verdict carries its `redemption`, and the caller
   * redeems it with {@link ToolGovernance.redeem} only when the call is really sent (after the
   * circuit breaker admitted it). Without it a token is redeemed when the verdict is allow.
   */
  deferRedeem?: boolean;
}

/** The gate. */
export class ToolGovernance {
  #options: ToolGovernanceOptions;
  #policies: PolicySet;

  constructor(options: ToolGovernanceOptions) {
    this.#options = options;
    this.#policies = options.policies;
  }

  /** The policies in force. */
  get policies(): PolicySet {
    return this.#policies;
  }

  /** Replaces the policies (a reload that validated). */
  setPolicies(policies: PolicySet): void {
    this.#policies = policies;
  }

  /** The tenant's policy (its own, else `*`), or undefined when it has none. */
  tenantPolicy(tenant: string): TenantPolicy | undefined {
    return this.#tenant(tenant);
  }

  /** Whether the tenant may see the tool in tools/list: the same rules as a call, minus arguments. */
  visible(ctx: CallContext, target: ToolTarget): boolean {
    const policy = this.#tenant(ctx.tenant);
    const { effect } = effectClassOf(subjectOf(target), this.#policies, policy);
    const facts = this.#facts(ctx, target, policy, effect);
    const decision = precedence({
      ...facts,
      invalidArguments: false,
      rateLimited: false,
      token: "none",
    });
    return decision.action !== "deny";
  }

  /** Decides one call. Never throws: a failure inside the gate denies with `internal` reasons logged. */
  async check(
    ctx: CallContext,
    target: ToolTarget,
    args: Record<string, unknown>,
    options: CheckOptions = {},
  ): Promise<Verdict> {
    try {
      return await this.#check(ctx, target, args, options);
    } catch (error) {
      // A full approval queue is the caller's to hear about as such (which bound, what to do).
      if (error instanceof GatewayError && error.code === "approval_queue_full") {
        return { action: "deny", code: "approval_queue_full", reason: error.message };
      }
      // Fail closed: a gate that cannot decide refuses.
      return {
        action: "deny",
        code: "policy_error",
        reason: `The governance check for "${target.name}" failed (${
          error instanceof Error ? error.message : String(error)
        }); the call is refused`,
      };
    }
  }

  async #check(
    ctx: CallContext,
    target: ToolTarget,
    args: Record<string, unknown>,
    options: CheckOptions,
  ): Promise<Verdict> {
    const policy = this.#tenant(ctx.tenant);
    const { effect, rule: effectRule } = effectClassOf(subjectOf(target), this.#policies, policy);
    const facts = this.#facts(ctx, target, policy, effect);
    const statically = precedence({
      ...facts,
      invalidArguments: false,
      rateLimited: false,
      token: "none",
    });
    let limited: Limited | undefined;
    if (statically.action !== "deny" && !options.dryRun) {
      // The in-process limiter answers at once: awaited only when a shared one goes to NATS.
      const taken = this.#rateLimit(ctx.tenant, target.name, policy?.rateLimits ?? []);
      limited = taken instanceof Promise ? await taken : taken;
    }
    // A call over its rate is refused before its arguments are read: hashing and validating them
    // costs up to ~0.1 s (MCP_MAX_SCHEMA_WORK) and ~8 ms a megabyte, which the limit must bound
    // too, so invalid calls count against it as well.
    const unread = limited !== undefined;
    // Deeper arguments would overflow the stack in the recursive steps below (canonical JSON,
    // ajv, the audit's redaction): refused as such, recorded as a placeholder.
    const tooDeep = !unread && nestedDeeperThan(args, MAX_ARGUMENT_DEPTH);
    const recorded = unread ? NOT_READ : tooDeep ? TOO_DEEP : args;
    const hash = unread ? NOT_READ_HASH : await argumentsHash(recorded);

    // Arguments cannot change a static denial: they are not validated for one.
    const problems = unread || statically.action === "deny"
      ? []
      : tooDeep
      ? [`(arguments) are nested more than ${MAX_ARGUMENT_DEPTH} levels deep; flatten them`]
      : this.#argumentProblems(target, policy, args);

    let tokenFailure: { code: DenyCode; reason: string } | undefined;
    let token: Facts["token"] = "none";
    let redemption: Redemption | undefined;
    if (facts.requiresApproval && options.approvalToken !== undefined && !options.dryRun) {
      // Checked without redeeming: a call refused for another reason (a rate limit) keeps it.
      const verified = await this.#options.tokens.verify(options.approvalToken, {
        tenant: ctx.tenant,
        tool: target.name,
        argumentsHash: hash,
      }, { consume: false });
      token = verified.ok ? "valid" : "invalid";
      if (verified.ok) redemption = verified.redemption;
      else tokenFailure = { code: verified.code, reason: verified.reason };
    }

    let decision = precedence({
      ...facts,
      invalidArguments: problems.length > 0,
      rateLimited: limited !== undefined,
      token,
    });
    if (decision.action === "allow" && redemption && !options.deferRedeem) {
      if (!(await this.#options.tokens.redeem(redemption))) {
        tokenFailure = replayed(target.name);
        decision = { action: "deny", code: "token" };
      }
      redemption = undefined;
    }
    // Filed before the verdict is written: shared by replicas, the request is on the shared state.
    const filed = decision.action === "approval_required" && !options.dryRun
      ? await this.#options.approvals.file({
        tenant: ctx.tenant,
        subject: ctx.subject,
        ...(ctx.principal === undefined ? {} : { principal: ctx.principal }),
        tool: target.name,
        ...(target.server === undefined ? {} : { server: target.server }),
        effect,
        arguments: args,
        argumentsHash: hash,
      })
      : undefined;
    const verdict = this.#verdict(decision, {
      ctx,
      target,
      policy,
      effect,
      effectRule,
      problems,
      limited,
      tokenFailure,
      hash,
      filed,
    });
    if (verdict.action === "allow" && redemption) verdict.redemption = redemption;
    if (!options.dryRun) this.#audit(ctx, target, verdict, hash, recorded);
    return verdict;
  }

  /**
   * Redeems the token of an allow verdict from a `deferRedeem` check, as the call is sent:
   * undefined when the call may go (or needed no token), else the `approval_replayed` denial
   * (another call redeemed it meanwhile), which is audited.
   */
  async redeem(
    ctx: CallContext,
    target: ToolTarget,
    verdict: Verdict & { action: "allow" },
    args: Record<string, unknown>,
  ): Promise<Verdict | undefined> {
    if (!verdict.redemption) return undefined;
    let ok: boolean;
    try {
      ok = await this.#options.tokens.redeem(verdict.redemption);
    } catch (error) {
      return {
        action: "deny",
        code: "policy_error",
        reason: `The approval token for "${target.name}" could not be redeemed (${
          error instanceof Error ? error.message : String(error)
        }); the call is refused`,
      };
    }
    if (ok) return undefined;
    const failure = replayed(target.name);
    const denial: Verdict = {
      action: "deny",
      code: failure.code,
      reason: failure.reason,
      effect: verdict.effect,
      rule: "approval token",
    };
    this.#audit(ctx, target, denial, await argumentsHash(args), args);
    return denial;
  }

  /**
   * {@link access} for a use of the item (read, subscribe, get, complete), within the tenant's
   * `rate_limits:` of its `resources:` / `prompts:`, audited like a tool call: one line with the
   * surface, the item's name as `tool`, and the hash of its arguments.
   */
  async use(
    ctx: CallContext,
    item: ItemTarget,
    surface: string,
    args: Record<string, unknown> = {},
  ): Promise<Verdict> {
    let verdict = this.access(ctx, item);
    const scope = item.kind === "resource" ? "resources" : "prompts";
    const rules = this.#tenant(ctx.tenant)?.[scope].rateLimits ?? [];
    let limited: Limited | undefined;
    if (verdict.action === "allow" && rules.length > 0) {
      const taken = this.#rateLimit(ctx.tenant, item.name, rules, scope);
      limited = taken instanceof Promise ? await taken : taken;
    }
    if (limited !== undefined) {
      const { rule, retryAfterMs } = limited;
      verdict = {
        action: "deny",
        code: "rate_limited",
        reason: `Tenant "${ctx.tenant}" exceeded the rate limit for ${scope} matching ${
          JSON.stringify(rule.glob)
        } (${ruleText(rule)}); retry in ${Math.ceil(retryAfterMs / 1000)} s`,
        effect: "read",
        rule: ruleText(rule),
        retryAfterMs,
      };
    }
    // As for tools, a use over its rate is refused without reading its arguments.
    const recorded = limited === undefined ? args : NOT_READ;
    try {
      this.#options.audit.record({
        tenant: ctx.tenant,
        subject: ctx.subject,
        // A URI is free text from a client or upstream (query tokens, userinfo): redacted here,
        // since decision events skip the bus's redaction.
        tool: redact(item.name),
        ...(item.server === undefined ? {} : { server: item.server }),
        surface,
        effect: "read",
        verdict: verdict.action,
        ...(verdict.action === "deny" ? { code: verdict.code } : {}),
        ...(verdict.rule === undefined ? {} : { rule: verdict.rule }),
        argumentsHash: limited === undefined ? await argumentsHash(args) : NOT_READ_HASH,
        arguments: recorded,
      });
    } catch {
      // Arguments that cannot be hashed still get the decision; the audit log reports its own failures.
    }
    return verdict;
  }

  /**
   * Whether the tenant may list and use a resource or prompt: unknown tenant, the connector
   * boundary (tenant, and `read` through its effect classes) and the tenant's `resources:` /
   * `prompts:` globs, in the precedence of tool calls. Never throws.
   */
  access(ctx: CallContext, item: ItemTarget): Verdict {
    const policy = this.#tenant(ctx.tenant);
    const effect: EffectClass = "read";
    const facts = this.#facts(
      ctx,
      { name: item.name, ...(item.server === undefined ? {} : { server: item.server }) },
      policy,
      effect,
    );
    const globs = policy?.[item.kind === "resource" ? "resources" : "prompts"];
    const decision = precedence({
      ...facts,
      denied: globs?.deny.some((r) => r.match(item.name)) ?? false,
      hasAllowList: (globs?.allow.length ?? 0) > 0,
      allowed: globs?.allow.some((r) => r.match(item.name)) ?? false,
      invalidArguments: false,
      rateLimited: false,
      requiresApproval: false,
      token: "none",
    });
    const noun = item.kind === "resource" ? "Resource" : "Prompt";
    const key = item.kind === "resource" ? "resources" : "prompts";
    if (decision.action !== "deny") {
      const allowRule = globs?.allow.find((r) => r.match(item.name));
      return {
        action: "allow",
        effect,
        rule: allowRule ? ruleText(allowRule) : `no ${key} allowlist: allowed by default`,
      };
    }
    const connector = item.server === undefined
      ? undefined
      : this.#policies.connectors.get(item.server);
    const deny = (code: DenyCode, reason: string, rule?: string): Verdict => ({
      action: "deny",
      code,
      reason,
      effect,
      ...(rule === undefined ? {} : { rule }),
    });
    switch (decision.code) {
      case "unknown_tenant":
        return deny(
          "unknown_tenant",
          `Tenant "${ctx.tenant}" has no policy; add it (or a "*" entry) under tenants: in ${
            this.#policies.files.join(", ") || "the policy files"
          }`,
        );
      case "connector_denied":
      case "effect_not_allowed": {
        const rule = `${connector!.source.file}:${connector!.source.line} ${
          connector!.source.text
        }`;
        return deny(
          decision.code,
          decision.code === "connector_denied"
            ? `Tenant "${ctx.tenant}" may not reach upstream "${item.server}" (connector boundary, ${rule}); ask an operator to add it to connectors.${item.server}.tenants`
            : `Upstream "${item.server}" allows only ${
              [...connector!.effects].join(", ")
            } calls, and reading ${item.kind}s is read (${rule})`,
          rule,
        );
      }
      case "tool_denied": {
        const rule = globs!.deny.find((r) => r.match(item.name))!;
        return deny(
          "tool_denied",
          `${noun} "${item.name}" is denied for tenant "${ctx.tenant}" by ${ruleText(rule)}`,
          ruleText(rule),
        );
      }
      default: {
        const rule = `${policy!.source.file}:${policy!.source.line} ${key} allowlist of tenant ${
          policy!.tenant
        }`;
        return deny(
          "not_allowed",
          `${noun} "${item.name}" is not in tenant "${ctx.tenant}"'s ${key} allowlist (${
            globs!.allow.map((r) => r.glob).join(", ")
          }; ${rule})`,
          rule,
        );
      }
    }
  }

  #tenant(tenant: string): TenantPolicy | undefined {
    return this.#policies.tenants.get(tenant) ?? this.#policies.tenants.get("*");
  }

  #facts(
    ctx: CallContext,
    target: ToolTarget,
    policy: TenantPolicy | undefined,
    effect: EffectClass,
  ) {
    const connector = target.server === undefined
      ? undefined
      : this.#policies.connectors.get(target.server);
    return {
      tenantKnown: policy !== undefined,
      connectorTenant: !connector
        ? "none" as const
        : connector.tenants === "*" || connector.tenants.includes(ctx.tenant)
        ? "allowed" as const
        : "denied" as const,
      connectorEffect: !connector
        ? "none" as const
        : connector.effects.has(effect)
        ? "allowed" as const
        : "denied" as const,
      denied: policy?.deny.some((r) => r.match(target.name)) ?? false,
      hasAllowList: (policy?.allow.length ?? 0) > 0,
      allowed: policy?.allow.some((r) => r.match(target.name)) ?? false,
      requiresApproval: policy?.approval.has(effect) ?? false,
    };
  }

  #argumentProblems(
    target: ToolTarget,
    policy: TenantPolicy | undefined,
    args: Record<string, unknown>,
  ): string[] {
    const problems: string[] = [];
    const schema = target.descriptor?.inputSchema as Record<string, unknown> | undefined;
    if (schema) {
      try {
        // Undefined budget: compileSchema's default (MAX_CODE_PER_UPSTREAM).
        const validate = compileSchema(
          schema,
          target.server,
          this.#options.maxSchemaCodePerUpstream,
        );
        const result = validate(args, this.#options.maxSchemaWork);
        if (!result.valid) problems.push(...result.errors);
      } catch (error) {
        problems.push(`the tool's inputSchema cannot be used: ${(error as Error).message}`);
      }
    }
    for (const rule of policy?.arguments ?? []) {
      if (!rule.match(target.name)) continue;
      const result = compileSchema(rule.schema)(args, this.#options.maxSchemaWork);
      if (!result.valid) {
        problems.push(
          ...result.errors.map((e) => `${e} (policy ${rule.source.file}:${rule.source.line})`),
        );
      }
    }
    return problems;
  }

  /**
   * The first of `rules` matching `name` that refuses the use (rules from `from` on); a promise
   * only when the limiter is shared. A tool's bucket is per tenant and tool; an item's (`scope`
   * `resources` or `prompts`) per tenant and rule, since a client names items freely and a bucket
   * per URI would bound nothing. Item rule keys carry `scope:`, which tool globs cannot contain.
   */
  #rateLimit(
    tenant: string,
    name: string,
    rules: readonly RateLimitRule[],
    scope?: "resources" | "prompts",
    from = 0,
  ): Limited | undefined | Promise<Limited | undefined> {
    for (let i = from; i < rules.length; i++) {
      const rule = rules[i]!;
      if (!rule.match(name)) continue;
      const taken = this.#options.rateLimiter.take(
        scope === undefined
          ? rateLimitKey(tenant, rule.glob, name)
          : rateLimitKey(tenant, `${scope}:${rule.glob}`, ""),
        rule.perMinute,
        rule.burst,
      );
      if (taken instanceof Promise) {
        return taken.then((t) =>
          t.ok
            ? this.#rateLimit(tenant, name, rules, scope, i + 1)
            : { rule, retryAfterMs: t.retryAfterMs }
        );
      }
      if (!taken.ok) return { rule, retryAfterMs: taken.retryAfterMs };
    }
    return undefined;
  }

  #verdict(
    decision: Decision,
    c: {
      ctx: CallContext;
      target: ToolTarget;
      policy: TenantPolicy | undefined;
      effect: EffectClass;
      effectRule: string;
      problems: string[];
      limited: { rule: GlobRule; retryAfterMs: number } | undefined;
      tokenFailure: { code: DenyCode; reason: string } | undefined;
      hash: string;
      /** The approval request filed for this call (none in a dry run). */
      filed: { id: string; expiresAt: number } | undefined;
    },
  ): Verdict {
    const { ctx, target, policy, effect } = c;
    const tool = target.name;
    const deny = (
      code: DenyCode,
      reason: string,
      rule?: string,
      extra: { retryAfterMs?: number } = {},
    ): Verdict => ({
      action: "deny",
      code,
      reason,
      effect,
      ...(rule === undefined ? {} : { rule }),
      ...extra,
    });
    if (decision.action === "allow") {
      const allowRule = policy?.allow.find((r) => r.match(tool));
      const rule = policy?.approval.has(effect)
        ? "approval token"
        : allowRule
        ? ruleText(allowRule)
        : `no allowlist for tenant "${policy?.tenant}": allowed by default`;
      return { action: "allow", effect, rule };
    }
    if (decision.action === "approval_required") {
      const rule = `${policy!.source.file}:${policy!.source.line} approval [${
        [...policy!.approval].join(", ")
      }]`;
      const reason = `Tool "${tool}" is ${effect} (${c.effectRule}) and tenant "${ctx.tenant}" ` +
        `needs an approval for ${effect} calls (${rule})`;
      // A dry run (policy explain) decides without queueing a request.
      const request = c.filed ?? { id: "(dry run)", expiresAt: 0 };
      return {
        action: "approval_required",
        effect,
        reason,
        rule,
        request: {
          id: request.id,
          tool,
          tenant: ctx.tenant,
          effect,
          argumentsHash: c.hash,
          expiresAt: request.expiresAt,
        },
      };
    }
    const connector = target.server === undefined
      ? undefined
      : this.#policies.connectors.get(target.server);
    switch (decision.code) {
      case "unknown_tenant":
        return deny(
          "unknown_tenant",
          `Tenant "${ctx.tenant}" has no policy; add it (or a "*" entry) under tenants: in ${
            this.#policies.files.join(", ") || "the policy files"
          }`,
        );
      case "connector_denied": {
        const rule = `${connector!.source.file}:${connector!.source.line} ${
          connector!.source.text
        }`;
        return deny(
          "connector_denied",
          `Tenant "${ctx.tenant}" may not reach upstream "${target.server}" (connector boundary, ${rule}); ask an operator to add it to connectors.${target.server}.tenants`,
          rule,
        );
      }
      case "effect_not_allowed":
        return deny(
          "effect_not_allowed",
          `Upstream "${target.server}" allows only ${
            [...connector!.effects].join(", ")
          } calls, and "${tool}" is ${effect} (${c.effectRule})`,
          `${connector!.source.file}:${connector!.source.line} ${connector!.source.text}`,
        );
      case "tool_denied": {
        const rule = policy!.deny.find((r) => r.match(tool))!;
        return deny(
          "tool_denied",
          `Tool "${tool}" is denied for tenant "${ctx.tenant}" by ${ruleText(rule)}`,
          ruleText(rule),
        );
      }
      case "not_allowed": {
        const rule = `${policy!.source.file}:${policy!.source.line} allowlist of tenant ${
          policy!.tenant
        }`;
        return deny(
          "not_allowed",
          `Tool "${tool}" is not in tenant "${ctx.tenant}"'s allowlist (${
            policy!.allow.map((r) => r.glob).join(", ")
          }; ${rule})`,
          rule,
        );
      }
      case "invalid_arguments":
        return deny(
          "invalid_arguments",
          `Invalid arguments for tool "${tool}": ${c.problems.join("; ")}`,
        );
      case "rate_limited": {
        const { rule, retryAfterMs } = c.limited!;
        return deny(
          "rate_limited",
          `Tenant "${ctx.tenant}" exceeded the rate limit for "${tool}" (${
            ruleText(rule)
          }); retry in ${Math.ceil(retryAfterMs / 1000)} s`,
          ruleText(rule),
          { retryAfterMs },
        );
      }
      case "token":
        return deny(c.tokenFailure!.code, c.tokenFailure!.reason, "approval token");
      default:
        return deny(decision.code, `Call to "${tool}" refused (${decision.code})`);
    }
  }

  #audit(
    ctx: CallContext,
    target: ToolTarget,
    v: Verdict,
    hash: string,
    args: Record<string, unknown>,
  ): void {
    this.#options.audit.record({
      time: new Date(this.#options.clock.now()).toISOString(),
      tenant: ctx.tenant,
      subject: ctx.subject,
      tool: target.name,
      ...(target.server === undefined ? {} : { server: target.server }),
      effect: v.effect ?? "write",
      verdict: v.action,
      ...(v.action === "deny" ? { code: v.code } : {}),
      ...(v.rule === undefined ? {} : { rule: v.rule }),
      argumentsHash: hash,
      arguments: args,
    });
  }
}

function ruleText(rule: GlobRule): string {
  return `${rule.source.file}:${rule.source.line} ${rule.source.text}`;
}
