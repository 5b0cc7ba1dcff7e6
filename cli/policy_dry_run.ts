/**
 * The gateway's decisions without their side effects, for `policy explain` and `policy test`: a
 * {@link ToolGovernance} over the policy with throwaway state (no approval filed, no rate limit
 * used, nothing audited), the call or use it decides, and the tool descriptors it decides on.
 * @module
 */
import type { CommandIo } from "./command.ts";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Tool } from "@modelcontextprotocol/sdk/types.js";
import { listedTarget } from "../core/mcp/call_pipeline.ts";
import { resolvedUriProblem } from "../core/mcp/resource_uri.ts";
import { PROXY_URI_PREFIX } from "../core/proxy/proxy_manager.ts";
import { systemClock } from "../core/support/clock.ts";
import { InProcessEventBus } from "../core/bus/event_bus.ts";
import { silentLogger } from "../core/support/logger.ts";
import { ApprovalQueue } from "../core/governance/approval_queue.ts";
import { ApprovalTokens } from "../core/governance/approval_tokens.ts";
import { AuditLog } from "../core/governance/audit_log.ts";
import { MemoryNonceStore } from "../core/governance/nonce_store.ts";
import type { PolicySet, TenantPolicy } from "../core/governance/policy.ts";
import { RateLimiter } from "../core/governance/rate_limiter.ts";
import {
  ToolGovernance,
  type ToolTarget,
  type Verdict,
} from "../core/governance/tool_governance.ts";
/** The subject the offline checks act as (the gateway takes it from the caller's token). */
export const SUBJECT = "policy-cli";
/** The separator of proxied tool names, as the gateway's MCP_PROXY_TOOL_SEPARATOR defaults it. */
export const DEFAULT_SEPARATOR = "__";
/** A fleet server id (lowercase letters, digits, _ and -). */
export const SERVER_ID = /^[a-z0-9][a-z0-9_-]*$/;

/** A gate over `policies` with throwaway state: the offline commands only dry-run it. */
export function offlineGovernance(policies: PolicySet): ToolGovernance {
  const clock = systemClock;
  const bus = new InProcessEventBus(silentLogger);
  const tokens = new ApprovalTokens({
    secret: crypto.getRandomValues(new Uint8Array(32)),
    clock,
    nonces: new MemoryNonceStore({ clock }),
  });
  return new ToolGovernance({
    policies,
    tokens,
    approvals: new ApprovalQueue({ clock, bus, tokens }),
    rateLimiter: new RateLimiter({ clock }),
    audit: new AuditLog({ bus, clock, logger: silentLogger }),
    clock,
  });
}

/** The call being decided, as `explain` flags or a test case give it. */
export interface Call {
  tenant: string;
  tool: string;
  args: Record<string, unknown>;
  annotations?: Tool["annotations"];
  server?: string;
}

/** The upstream server of a call: the one given, else the tool name's `<server>__` prefix. */
export function serverOf(call: Call, separator: string): { id?: string; inferred: boolean } {
  if (call.server !== undefined) return { id: call.server, inferred: false };
  return inferred(prefixOf(call.tool, separator));
}

/** A name's `<server>__` prefix, when it is a server id. */
function prefixOf(name: string, separator: string): string | undefined {
  const at = separator === "" ? -1 : name.indexOf(separator);
  return at > 0 ? name.slice(0, at) : undefined;
}

function inferred(id: string | undefined): { id?: string; inferred: boolean } {
  return id !== undefined && SERVER_ID.test(id) ? { id, inferred: true } : { inferred: false };
}

/** The target governance decides on: the listed descriptor when known, else the flags. */
export function targetOf(
  call: Call,
  server: string | undefined,
  listed: Tool | undefined,
): ToolTarget {
  // From a listing, exactly what the gateway's pipeline decides on (escalation included).
  if (listed && call.annotations === undefined) return listedTarget(call.tool, server, listed);
  return {
    name: call.tool,
    ...(server === undefined ? {} : { server }),
    // Without descriptors the inputSchema is unknown: only the policy's argument rules apply.
    ...(call.annotations === undefined
      ? {}
      : { descriptor: { annotations: call.annotations } as ToolTarget["descriptor"] }),
  };
}

/** Decides one call as the gateway would, without side effects. */
export async function decide(
  governance: ToolGovernance,
  call: Call,
  target: ToolTarget,
): Promise<Verdict> {
  return await governance.check({ tenant: call.tenant, subject: SUBJECT }, target, call.args, {
    dryRun: true,
  });
}

/** Where tool descriptors come from: a tools/list snapshot file or a running gateway. */
export interface DescriptorSource {
  descriptors?: string | undefined;
  gateway?: string | undefined;
  token?: string | undefined;
}

/**
 * The tools by name from `--descriptors` or `--gateway`; an empty map when neither is given, a
 * string (the problem) when they cannot be read.
 */
export async function readDescriptors(
  source: DescriptorSource,
  io: CommandIo,
): Promise<Map<string, Tool> | string> {
  if (source.descriptors !== undefined && source.gateway !== undefined) {
    return "give --descriptors or --gateway, not both";
  }
  let tools: unknown;
  if (source.descriptors !== undefined) {
    let text: string;
    try {
      text = await Deno.readTextFile(source.descriptors);
    } catch (error) {
      return `Cannot read --descriptors "${source.descriptors}": ${(error as Error).message}`;
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch (error) {
      return `--descriptors "${source.descriptors}" is not JSON (${(error as Error).message})`;
    }
    tools = Array.isArray(value) ? value : (value as { tools?: unknown } | null)?.tools;
  } else if (source.gateway !== undefined) {
    const listed = await listGateway(source.gateway, source.token ?? io.env.MCP_GATEWAY_TOKEN);
    if (typeof listed === "string") return listed;
    tools = listed;
  } else {
    return new Map();
  }
  if (!Array.isArray(tools)) {
    return 'the descriptors must be a tools/list result ({"tools": [...]}) or a list of tools';
  }
  const byName = new Map<string, Tool>();
  for (const tool of tools) {
    if (tool && typeof tool === "object" && typeof (tool as Tool).name === "string") {
      byName.set((tool as Tool).name, tool as Tool);
    }
  }
  return byName;
}

/** Every tool a running gateway lists (all pages), or the problem. */
async function listGateway(url: string, token: string | undefined): Promise<Tool[] | string> {
  let endpoint: URL;
  try {
    endpoint = new URL(url);
  } catch {
    return `--gateway must be the gateway's MCP URL, e.g. http://127.0.0.1:3000/mcp, received "${url}"`;
  }
  const client = new Client({ name: "agent33-policy-cli", version: "1" });
  try {
    await client.connect(
      new StreamableHTTPClientTransport(endpoint, {
        ...(token ? { requestInit: { headers: { Authorization: `Bearer ${token}` } } } : {}),
      }),
    );
    const tools: Tool[] = [];
    let cursor: string | undefined;
    for (let page = 0; page < 1000; page++) {
      const result = await client.listTools(cursor === undefined ? {} : { cursor });
      tools.push(...result.tools);
      cursor = result.nextCursor;
      if (cursor === undefined) break;
    }
    return tools;
  } catch (error) {
    return `Cannot read tools/list from --gateway ${url}: ${(error as Error).message}` +
      (token ? "" : " (no token: pass --token or set MCP_GATEWAY_TOKEN)");
  } finally {
    await client.close().catch(() => {});
  }
}

/** The tenant's policy, else the `*` entry's. */
export function tenantPolicy(policies: PolicySet, tenant: string): TenantPolicy | undefined {
  return policies.tenants.get(tenant) ?? policies.tenants.get("*");
}

/** A use of a resource or prompt being decided, as `explain` flags or a test case give it. */
export interface ItemUse {
  tenant: string;
  kind: "resource" | "prompt";
  /** The URI (resources) or name (prompts) as the gateway lists it. */
  name: string;
  server?: string;
}

/**
 * The upstream of a use: the one given, else the server of a `proxy://<server>/…` URI or of a
 * prompt's `<server>__` prefix.
 */
export function itemServerOf(use: ItemUse, separator: string): { id?: string; inferred: boolean } {
  if (use.server !== undefined) return { id: use.server, inferred: false };
  if (use.kind === "prompt") return inferred(prefixOf(use.name, separator));
  if (!use.name.startsWith(PROXY_URI_PREFIX)) return { inferred: false };
  const rest = use.name.slice(PROXY_URI_PREFIX.length);
  return inferred(rest.slice(0, Math.max(0, rest.indexOf("/"))) || undefined);
}

/**
 * Decides a use as the gateway would, without side effects: a proxied URI its server would read
 * as another resource is refused (invalid_arguments), then the connector boundary and the tenant's
 * `resources:` / `prompts:` globs. The scanner's quarantine is decided at run time only.
 */
export function decideItem(
  governance: ToolGovernance,
  use: ItemUse,
  server: string | undefined,
): Verdict {
  // As the gateway routes it: only a proxied URI is read by an upstream that resolves it.
  const proxied = server === undefined ? undefined : `${PROXY_URI_PREFIX}${server}/`;
  const problem = use.kind === "resource" && proxied && use.name.startsWith(proxied)
    ? resolvedUriProblem(use.name.slice(proxied.length))
    : undefined;
  if (problem) {
    return { action: "deny", code: "invalid_arguments", reason: problem, effect: "read" };
  }
  return governance.access({ tenant: use.tenant, subject: SUBJECT }, {
    kind: use.kind,
    name: use.name,
    ...(server === undefined ? {} : { server }),
  });
}
