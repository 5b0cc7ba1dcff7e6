/**
 * The call pipeline: the one path every tool call takes, from an MCP client (the bridge), an
 * agent or workflow (the engine's kernel invoker) or a search-mode session alike:
 *
 *   resolve → quarantine → scanner escalation → governance → approval token → breaker → forward
 *
 * Governance checks an approval token without redeeming it; the token is redeemed only once the
 * call is really sent (the rate limit passed, the circuit breaker admitted it), so an approved
 * call refused for another reason, or not sent because its upstream is down, can be retried with
 * the same token. Refusals are {@link GatewayError}s with the same code and message whoever calls.
 * @module
 */
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import { GatewayError, type GatewayErrorCode } from "../support/errors.ts";
import type { ApprovalQueue } from "../governance/approval_queue.ts";
import {
  APPROVAL_TOKEN_META_KEY,
  type CallContext,
  type ItemTarget,
  type ToolGovernance,
  type ToolTarget,
  type Verdict,
} from "../governance/tool_governance.ts";
import type { NativeTool } from "../plugin_api/mod.ts";
import type { UpstreamCallContext } from "../proxy/child_server_handle.ts";
import { quarantinedTemplateOf } from "../proxy/template_quarantine.ts";
import {
  type CatalogView,
  PROXY_URI_PREFIX,
  type ProxyManager,
  type Route,
} from "../proxy/proxy_manager.ts";
import { redactDeep } from "../support/redact.ts";
import type { ToolRegistry } from "./tool_registry.ts";
import { resolvedUriProblem } from "./resource_uri.ts";
import { errorType, type TraceSpan } from "../tracing/gateway_tracer.ts";
import { FORWARDED, forwardTraced } from "../tracing/upstream_span.ts";

/** The `_meta` key of a listed tool the scanner escalated: the finding, in words. */
export const ESCALATION_META_KEY = "agent33/escalation";

/** What a caller can reach: the catalog it sees and whether native tools are in it. */
export interface CallScope {
  /** The upstream catalog (the aggregate, or one upstream alone on `/mcp/<server_id>`). */
  view?: CatalogView;
  /** Native tools are in scope (false on `/mcp/<server_id>`). */
  native: boolean;
  /** The name policies use for a tool name the caller used (aggregated names on scoped views). */
  policyName?: (name: string) => string;
}

/** A tool name resolved to what serves it, with the target governance decides on. */
export type ResolvedCall =
  | { kind: "native"; tool: NativeTool; target: ToolTarget }
  | { kind: "proxied"; route: Route; target: ToolTarget };

/** An in-band approver: asks the caller's user; returns the verdict after their answer. */
export type InBandApprover = (
  verdict: Verdict & { action: "approval_required" },
  target: ToolTarget,
  args: Record<string, unknown>,
) => Promise<Verdict>;

/** One call through the pipeline. */
export interface PipelineCall {
  caller: CallContext;
  /** The name the caller used. */
  name: string;
  args: Record<string, unknown>;
  scope: CallScope;
  /** The approval token the call carries (`_meta["agent33/approval_token"]`). */
  approvalToken?: string;
  /** Set when this caller may approve in-band (see {@link inBandAllowed}). */
  approveInBand?: InBandApprover;
  /** The caller's request span, when tracing is on: each stage adds a child span under it. */
  span?: TraceSpan;
  /** Runs an allowed native tool with the caller's context. */
  runNative(tool: NativeTool): Promise<CallToolResult>;
  /** The context a forwarded call carries back to its caller (progress, logs, relays). */
  upstream(route: Route): UpstreamCallContext;
}

/** A resource, resource template or prompt as a caller names it (to list, read, get, complete). */
export interface ItemCall {
  kind: "resource" | "resource-template" | "prompt";
  /** The URI, URI template or prompt name the caller used. */
  name: string;
  /** Where it routes, when an upstream serves it. */
  route?: Route;
  /** The caller sees one upstream under its own names (`/mcp/<server_id>`). */
  scoped: boolean;
}

/**
 * Codes of calls the pipeline refused (a denial, counted as such), as opposed to calls that
 * failed; `policy_error` (the gate itself failed, closed) is a failure.
 */
export const REFUSAL_CODES: ReadonlySet<string> = new Set([
  "unknown_tenant",
  "tool_denied",
  "not_allowed",
  "connector_denied",
  "effect_not_allowed",
  "invalid_arguments",
  "rate_limited",
  "quarantined",
  "approval_required",
  "approval_invalid",
  "approval_expired",
  "approval_replayed",
  "approval_mismatch",
  "approval_denied",
  "approval_queue_full",
]);

/** Where a refusal points the caller: routes that exist on this gateway, never others. */
export interface RefusalHints {
  /** After "Approval request <id>: ". */
  approval(id: string): string;
  /** After a quarantine's finding. */
  release: string;
}

/** The hints of a gateway serving HTTP: the approvals and scanner routes. */
export const HTTP_HINTS: RefusalHints = {
  approval: (id) =>
    `an operator approves it with POST /v1/approvals/${id}/approve; then retry the same call ` +
    `with the token in _meta["${APPROVAL_TOKEN_META_KEY}"] (GET /v1/approvals/${id} returns it ` +
    "to you once approved)",
  release: "An operator releases it with POST /v1/scanner/release",
};

/** The hints of a gateway serving stdio alone: it has no HTTP routes to point at. */
export const STDIO_HINTS: RefusalHints = {
  approval: () =>
    "over stdio the gateway can only ask you in-band, and this client does not support " +
    "elicitation (or could not ask): use a client that does, or serve the gateway over HTTP " +
    "where an approver decides, then retry the same call",
  release: "Over stdio there is no release route: fix the upstream, or review the finding in " +
    "the gateway's log on stderr and restart the gateway once you trust the tool",
};

/** What the pipeline is built from. */
export interface CallPipelineOptions {
  tools: ToolRegistry;
  proxy?: ProxyManager;
  governance: ToolGovernance;
  approvals: ApprovalQueue;
  /** Where refusals point the caller; {@link HTTP_HINTS} by default. */
  hints?: RefusalHints;
}

/** The one call path. */
export class CallPipeline {
  readonly #options: CallPipelineOptions;
  readonly #hints: RefusalHints;

  constructor(options: CallPipelineOptions) {
    this.#options = options;
    this.#hints = options.hints ?? HTTP_HINTS;
  }

  /** The approvals queue in-band approvers answer. */
  get approvals(): ApprovalQueue {
    return this.#options.approvals;
  }

  /** The gate. */
  get governance(): ToolGovernance {
    return this.#options.governance;
  }

  /**
   * Resolves a name (native first, then the scope's upstreams) and refuses a quarantined tool;
   * throws `unknown_tool` or `quarantined`.
   */
  resolve(name: string, scope: CallScope): ResolvedCall {
    const native = scope.native ? this.#options.tools.get(name) : undefined;
    if (native) return { kind: "native", tool: native, target: { name, descriptor: native } };
    const route = scope.view?.resolveTool(name);
    if (!route) {
      throw new GatewayError(
        "unknown_tool",
        `Unknown tool "${name}"; call tools/list for the names`,
        { tool: name },
      );
    }
    const server = route.handle.id;
    const quarantine = this.#options.proxy?.quarantineReason(server, route.original);
    if (quarantine) {
      throw new GatewayError(
        "quarantined",
        `Tool "${name}" is quarantined by the scanner: ${quarantine}. ${this.#hints.release}`,
        { tool: name, server },
      );
    }
    const descriptor = route.tool ??
      route.handle.catalog.tools.find((t) => t.name === route.original);
    return {
      kind: "proxied",
      route,
      target: this.proxiedTarget(
        scope.policyName?.(name) ?? name,
        server,
        route.original,
        descriptor,
      ),
    };
  }

  /** The target of a proxied tool: its connector boundary and the scanner's escalation apply. */
  proxiedTarget(
    name: string,
    server: string,
    original: string,
    descriptor: Pick<Tool, "inputSchema" | "annotations"> | undefined,
  ): ToolTarget {
    const escalation = this.#options.proxy?.escalationReason(server, original);
    return {
      name,
      server,
      ...(descriptor ? { descriptor } : {}),
      ...(escalation === undefined ? {} : { escalation }),
    };
  }

  /**
   * A proxied tool as tools/list shows it: an escalated tool says so (destructiveHint and the
   * finding under `_meta["agent33/escalation"]`), so clients and `policy explain --descriptors`
   * see what governance decides on.
   */
  listed(tool: Tool, target: ToolTarget): Tool {
    if (target.escalation === undefined) return tool;
    return {
      ...tool,
      annotations: { ...tool.annotations, destructiveHint: true },
      _meta: { ...tool._meta, [ESCALATION_META_KEY]: target.escalation },
    };
  }

  /**
   * The same stages for resources, resource templates and prompts: quarantine (a blocking
   * scanner finding on the item), then the tenant's `resources:` / `prompts:` globs and the
   * connector boundary. Undefined when the caller may list and use it, else the refusal.
   */
  itemRefusal(caller: CallContext, item: ItemCall): GatewayError | undefined {
    const checked = this.#itemTarget(item);
    if (checked instanceof GatewayError) return checked;
    const verdict = this.#options.governance.access(caller, checked);
    return verdict.action === "allow" ? undefined : refusal(verdict, checked, caller, this.#hints);
  }

  /**
   * A use of an item (`surface`: resources/read, resources/subscribe, prompts/get,
   * completion/complete): the stages of {@link itemRefusal}, audited; throws the refusal.
   */
  async useItem(
    caller: CallContext,
    item: ItemCall,
    surface: string,
    args: Record<string, unknown> = {},
  ): Promise<void> {
    // Judged as the upstream will read it: policies and quarantine match the text sent.
    const problem = item.kind === "resource" && item.route
      ? resolvedUriProblem(item.route.original)
      : undefined;
    if (problem) throw new GatewayError("invalid_arguments", problem, { uri: item.name });
    const checked = this.#itemTarget(item);
    if (checked instanceof GatewayError) throw checked;
    const verdict = await this.#options.governance.use(caller, checked, surface, args);
    if (verdict.action !== "allow") throw refusal(verdict, checked, caller, this.#hints);
  }

  /** The item as policies name it, or its quarantine refusal. */
  #itemTarget(item: ItemCall): ItemTarget | GatewayError {
    const { route } = item;
    const noun = item.kind === "prompt" ? "Prompt" : "Resource";
    if (route) {
      const quarantine = this.#quarantinedItem(item.kind, route);
      if (quarantine) {
        return new GatewayError(
          "quarantined",
          `${noun} "${item.name}" is quarantined by the scanner: ${quarantine}`,
          { [item.kind === "prompt" ? "prompt" : "uri"]: item.name, server: route.handle.id },
        );
      }
    }
    const server = route?.handle.id;
    const kind = item.kind === "prompt" ? "prompt" : "resource";
    // Policies name items as the aggregate does, also on /mcp/<server_id>.
    const name = !item.scoped || server === undefined
      ? item.name
      : kind === "prompt"
      ? this.#options.proxy!.qualifiedName(server, item.name)
      : `${PROXY_URI_PREFIX}${server}/${item.name}`;
    return { kind, name, ...(server === undefined ? {} : { server }) };
  }

  #quarantinedItem(kind: ItemCall["kind"], route: Route): string | undefined {
    const { handle, original } = route;
    const proxy = this.#options.proxy;
    // The scanner names a resource by its name when it has one (as the upstream lists it).
    const name = kind === "resource"
      ? handle.catalog.resources.find((r) => r.uri === original)?.name || original
      : kind === "resource-template"
      ? handle.catalog.resourceTemplates.find((t) => t.uriTemplate === original)?.name || original
      : original;
    const own = proxy?.itemQuarantineReason(handle.id, kind, name);
    if (own || kind !== "resource" || !proxy) return own;
    // A URI no listed resource has may still be an instance of a quarantined template.
    return quarantinedTemplateOf(
      original,
      handle.catalog.resourceTemplates,
      (t) => proxy.itemQuarantineReason(handle.id, "resource-template", t.name || t.uriTemplate),
    );
  }

  /** Decides a call without side effects, as the gateway would (`policy explain`). */
  async explain(caller: CallContext, target: ToolTarget, args: Record<string, unknown>) {
    return await this.#options.governance.check(caller, target, args, { dryRun: true });
  }

  /**
   * Runs one call through every stage; resolves with the tool's result, throws the refusal as a
   * {@link GatewayError} (or the upstream's own error, passed through).
   */
  async call(call: PipelineCall): Promise<CallToolResult> {
    const resolved = this.resolve(call.name, call.scope);
    const verdict = await this.admit(call, resolved.target);
    const { governance } = this.#options;
    const redeem = async () => {
      const refused = await governance.redeem(call.caller, resolved.target, verdict, call.args);
      if (refused) throw refusal(refused, resolved.target, call.caller, this.#hints);
    };
    if (resolved.kind === "native") {
      await redeem();
      return await call.runNative(resolved.tool);
    }
    const { route } = resolved;
    // The token is redeemed inside the breaker's admission: a call it refuses keeps the token.
    const ctx: UpstreamCallContext = { ...call.upstream(route), admitted: redeem };
    const result = await forwardTraced(
      call.span,
      route,
      FORWARDED.toolsCall,
      ctx,
      (traced) => route.handle.callTool(route.original, call.args, traced),
    );
    // A tool's error result is a diagnostic too; a successful result is left alone.
    return result.isError === true ? redactDeep(result) : result;
  }

  /**
   * Governance and approval for a resolved call: the allow verdict (its token not yet redeemed),
   * or the refusal thrown.
   */
  async admit(call: PipelineCall, target: ToolTarget): Promise<Verdict & { action: "allow" }> {
    const { governance } = this.#options;
    // Stage spans only under a span that records: an unsampled call skips their reactions.
    const span = call.span?.recording ? call.span : undefined;
    const checking = span?.child("governance");
    const check = governance.check(call.caller, target, call.args, {
      ...(call.approvalToken === undefined ? {} : { approvalToken: call.approvalToken }),
      deferRedeem: true,
    });
    let verdict = checking === undefined ? await check : await decided(checking, check);
    if (verdict.action === "approval_required" && call.approveInBand) {
      const asked = call.approveInBand(verdict, target, call.args);
      const approving = span?.child("approval", { "agent33.approval.by": "in_band" });
      verdict = approving === undefined ? await asked : await decided(approving, asked);
    }
    if (span) traceVerdict(span, verdict);
    if (verdict.action === "allow") return verdict;
    throw refusal(verdict, target, call.caller, this.#hints);
  }
}

/**
 * A decision inside its stage's span: recorded there, and the span ended, when it settles. Two
 * reactions rather than an async function: no frame of its own on every traced call.
 */
function decided(span: TraceSpan, decision: Promise<Verdict>): Promise<Verdict> {
  return decision.then((verdict) => {
    traceVerdict(span, verdict);
    span.end();
    return verdict;
  }, (error: unknown) => {
    span.fail(errorType(error), error instanceof Error ? error.message : String(error));
    span.end();
    throw error;
  });
}

/** A decision on a span: the action, and for a refusal its code and the rule. */
function traceVerdict(span: TraceSpan, verdict: Verdict): void {
  span.set("agent33.verdict", verdict.action);
  if (verdict.action === "deny") {
    span.set("agent33.verdict.code", verdict.code);
    span.set("agent33.verdict.rule", verdict.rule);
  }
}

/**
 * The target of a tool as a listing shows it (tools/list of the gateway, or a snapshot of it):
 * the descriptor, and the scanner's escalation from `_meta["agent33/escalation"]`. What
 * `policy explain --descriptors` decides on, the same fields the live pipeline fills in.
 */
export function listedTarget(name: string, server: string | undefined, tool: Tool): ToolTarget {
  const escalation = tool._meta?.[ESCALATION_META_KEY];
  return {
    name,
    ...(server === undefined ? {} : { server }),
    descriptor: {
      inputSchema: tool.inputSchema,
      ...(tool.annotations === undefined ? {} : { annotations: tool.annotations }),
    },
    ...(typeof escalation === "string" ? { escalation } : {}),
  };
}

/** Who may approve in-band (through elicitation) on a transport, by default and by policy. */
export interface InBandPolicy {
  /** `MCP_APPROVAL_IN_BAND=false` turns it off everywhere; it never turns it on for HTTP. */
  enabled: boolean;
  transport: string;
  /** The tenant's `approval.by` (`in_band` lets its HTTP callers approve their own calls). */
  tenantApprovalBy: "operator" | "in_band" | undefined;
}

/**
 * Whether the calling client may approve its own call in-band: over stdio the client is the
 * desktop user who started the gateway (trusted), so yes by default; over HTTP only for a tenant
 * whose policy says `approval: in_band` — otherwise the request waits for an operator.
 */
export function inBandAllowed(policy: InBandPolicy): boolean {
  if (!policy.enabled) return false;
  if (policy.transport === "stdio") return true;
  return policy.tenantApprovalBy === "in_band";
}

/** The error a refused call carries: the verdict's code, and the rule that refused it. */
export function refusal(
  verdict: Verdict,
  target: Pick<ToolTarget, "name">,
  caller: CallContext,
  hints: RefusalHints = HTTP_HINTS,
): GatewayError {
  if (verdict.action === "approval_required") {
    const { request } = verdict;
    return new GatewayError(
      "approval_required",
      `${verdict.reason}. Approval request ${request.id}: ${hints.approval(request.id)}`,
      { request, tokenMetaKey: APPROVAL_TOKEN_META_KEY, rule: verdict.rule },
    );
  }
  if (verdict.action !== "deny") {
    throw new TypeError("refusal() needs a deny or approval_required verdict");
  }
  const named = verdict.rule === undefined || verdict.reason.includes(verdict.rule);
  return new GatewayError(
    verdict.code as GatewayErrorCode,
    named ? verdict.reason : `${verdict.reason} (refused by ${verdict.rule})`,
    {
      tool: target.name,
      tenant: caller.tenant,
      ...(verdict.effect ? { effect: verdict.effect } : {}),
      ...(verdict.rule ? { rule: verdict.rule } : {}),
      ...(verdict.retryAfterMs === undefined ? {} : { retryAfterMs: verdict.retryAfterMs }),
    },
  );
}
